"""Tenants' limits on the wire, driven by the real SDKs (docs/tenants.md#limits): a 429 in OpenAI's envelope
with ``retry-after`` that the ``openai`` SDK retries on its own, Anthropic's ``rate_limit_error`` that the
``anthropic`` SDK reads, the rate-limit headers on every answer of a limited tenant; and a full engine's fair
share (docs/tenants.md#fair-share): a flooding tenant waits behind another, a background turn waits queued.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.lazy import lazy_import
from support.server_harness import RunningServer
from websockets.sync.client import connect as ws_connect

from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.responses import AdmissionLimits, BackgroundLimits
from trtllm_responses.tenants import hash_key

anthropic = lazy_import("anthropic")  # support/lazy.py: not at collection

TENANTS = {
    "retry": {"requests_per_minute": 1},
    "socket": {"requests_per_minute": 1},
    "wire": {"requests_per_minute": 1},
    "tokens": {"tokens_per_minute": 20, "requests_per_minute": 100},
    "claude": {"requests_per_minute": 1},
    "free": {},
}


def tenants_file(path: Path, tenants: dict[str, dict[str, Any]]) -> str:
    entries = {name: {"keys": [hash_key(f"key-{name}")], **fields} for name, fields in tenants.items()}
    path.write_text(json.dumps({"tenants": entries}))
    return str(path)


@pytest.fixture(scope="module")
def limited(serve, tmp_path_factory) -> RunningServer:  # type: ignore[no-untyped-def]
    """A server whose rate window is 1 s (the limits count per second here, not per minute)."""
    path = tenants_file(tmp_path_factory.mktemp("tenants") / "tenants.json", TENANTS)
    with serve(tenants_file=path, admission=AdmissionLimits(window=1.0)) as running:
        yield running


def create(server: RunningServer, tenant: str, **body: Any) -> httpx.Response:
    return httpx.post(
        server.base_url + "/v1/responses",
        json={"model": "m", "input": "hi", **body},
        headers={"Authorization": f"Bearer key-{tenant}"},
        timeout=30,
    )


def test_the_openai_sdk_retries_a_429_and_succeeds_when_the_window_reopens(limited: RunningServer) -> None:
    statuses: list[int] = []
    hooks = {"response": [lambda response: statuses.append(response.status_code)]}
    with httpx.Client(event_hooks=hooks) as http:
        client = openai.OpenAI(base_url=limited.base_url + "/v1", api_key="key-retry", http_client=http)
        started = time.monotonic()
        assert client.responses.create(model="m", input="one").status == "completed"
        assert client.responses.create(model="m", input="two").status == "completed"  # its default retries
    assert statuses[0] == 200 and statuses[-1] == 200 and 429 in statuses
    assert time.monotonic() - started < 3.5  # it waited as retry-after said (under 1 s a try), not longer


def test_a_429_in_openai_wire_and_the_headers_on_every_answer(limited: RunningServer) -> None:
    time.sleep(1.05)  # a fresh window
    first = create(limited, "wire")
    assert first.status_code == 200
    assert first.headers["x-ratelimit-limit-requests"] == "1"
    assert first.headers["x-ratelimit-remaining-requests"] == "0"
    assert first.headers["x-ratelimit-reset-requests"] in ("1s", *(f"{ms}ms" for ms in range(1001)))
    refused = create(limited, "wire")
    assert refused.status_code == 429
    assert refused.json() == {
        "error": {
            "message": refused.json()["error"]["message"],
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert 1 <= int(refused.headers["retry-after"]) <= 1
    assert 0 < int(refused.headers["retry-after-ms"]) <= 1000
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    # every answer of a limited tenant carries them: a read, an error, a route the framework serves
    headers = {"Authorization": "Bearer key-wire"}
    for answer in (
        httpx.get(limited.base_url + "/v1/models", headers=headers),
        httpx.get(limited.base_url + f"/v1/responses/{first.json()['id']}", headers=headers),
        httpx.post(limited.base_url + "/v1/responses", content=b"{", headers=headers),
    ):
        assert answer.headers["x-ratelimit-limit-requests"] == "1", answer
    # reads are not counted, so they are never refused; a tenant without limits gets no such headers
    assert httpx.get(limited.base_url + "/v1/models", headers=headers).status_code == 200
    free = create(limited, "free")
    assert free.status_code == 200 and "x-ratelimit-limit-requests" not in free.headers


def test_a_streamed_turn_is_refused_before_its_stream_starts(limited: RunningServer) -> None:
    time.sleep(1.05)
    assert create(limited, "wire", stream=True).status_code == 200
    refused = create(limited, "wire", stream=True)
    assert refused.status_code == 429 and refused.headers["content-type"] == "application/json"


def test_tokens_per_window(limited: RunningServer) -> None:
    first = create(limited, "tokens")
    assert first.status_code == 200
    assert int(first.headers["x-ratelimit-limit-tokens"]) == 20
    refused = create(limited, "tokens")  # the first turn's prompt alone spent the window's 20
    assert refused.status_code == 429
    assert refused.json()["error"]["type"] == "tokens"
    assert refused.headers["x-ratelimit-remaining-tokens"] == "0"
    time.sleep(1.05)
    assert create(limited, "tokens").status_code == 200


def test_the_anthropic_sdk_reads_its_429(limited: RunningServer) -> None:
    with anthropic.Anthropic(base_url=limited.base_url, api_key="key-claude", max_retries=0) as client:
        message = {"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
        raw = client.messages.with_raw_response.create(**message)  # type: ignore[call-overload]
        assert raw.headers["anthropic-ratelimit-requests-limit"] == "1"
        assert raw.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert raw.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
        assert "x-ratelimit-limit-requests" not in raw.headers
        with pytest.raises(anthropic.RateLimitError) as refused:
            client.messages.create(**message)  # type: ignore[call-overload]
        error = refused.value
        assert error.status_code == 429
        assert error.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
        assert error.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert int(error.response.headers["retry-after"]) >= 1


def test_a_websocket_turn_is_counted_and_refused_in_its_error_event(limited: RunningServer) -> None:
    url = limited.base_url.replace("http", "ws", 1) + "/v1/responses"
    with ws_connect(url, additional_headers={"Authorization": "Bearer key-socket"}) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi", "store": False}))
        while (event := json.loads(ws.recv()))["type"] != "response.completed":
            assert event["type"] != "error", event
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi", "store": False}))
        refused = json.loads(ws.recv())
    assert refused["type"] == "error" and refused["status"] == 429
    assert refused["error"]["code"] == "rate_limit_exceeded" and refused["error"]["type"] == "requests"


def test_a_request_is_served_in_at_most_its_tenants_tier(limited: RunningServer) -> None:
    """``priority`` asked by a ``default`` tenant is served, and answered, as ``default``; ``flex`` stays."""
    assert create(limited, "free", service_tier="priority").json()["service_tier"] == "default"
    assert create(limited, "free", service_tier="flex").json()["service_tier"] == "flex"


def test_usage_per_tenant_in_metrics_and_stats(limited: RunningServer) -> None:
    metrics = httpx.get(limited.base_url + "/metrics").text
    assert 'trtllm_tenant_requests_total{tenant="retry"}' in metrics
    assert 'trtllm_tenant_refusals_total{tenant="wire",type="requests"}' in metrics
    assert 'trtllm_tenant_tokens_total{kind="output",tenant="retry"}' in metrics
    names = {line.split("{")[0] for line in metrics.splitlines() if 'tenant="' in line}
    assert names >= {
        "trtllm_tenant_requests_total",
        "trtllm_tenant_tokens_total",
        "trtllm_tenant_refusals_total",
    }


# -- fair share of a full engine ----------------------------------------------------------------------

SHARE = {
    "flood": {"max_concurrent_responses": 8},
    "paced": {"weight": 1},
    "capped": {"max_concurrent_responses": 1},
}


@pytest.fixture(scope="module")
def full(serve, encoding, tmp_path_factory) -> RunningServer:  # type: ignore[no-untyped-def]
    """One turn runs at a time (``max_running_responses=1``), each about 0.3 s long."""
    path = tenants_file(tmp_path_factory.mktemp("share") / "tenants.json", SHARE)
    executor = EchoExecutor(encoding, tokens_per_second=100)
    with serve(
        executor, tenants_file=path, admission=AdmissionLimits(max_running=1, max_waiting=8, max_wait=20)
    ) as running:
        yield running


async def timed_stream(
    client: httpx.AsyncClient, tenant: str, started: float, words: int = 20
) -> tuple[str, float, float]:
    """A streamed turn of ``words`` words: its tenant, when its head came and when it ended (since ``started``)."""
    body = {"model": "m", "input": f"#lorem {words}", "stream": True}
    headers = {"Authorization": f"Bearer key-{tenant}"}
    async with client.stream("POST", "/v1/responses", json=body, headers=headers) as response:
        head = time.monotonic() - started
        assert response.status_code == 200, await response.aread()
        async for _ in response.aiter_bytes():
            pass
    return tenant, head, time.monotonic() - started


async def test_a_flooding_tenant_waits_behind_another(full: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=full.base_url, timeout=60) as client:
        started = time.monotonic()
        flood = [asyncio.ensure_future(timed_stream(client, "flood", started)) for _ in range(5)]
        await asyncio.sleep(0.1)  # the flood is in: one runs, four wait
        paced = await timed_stream(client, "paced", started)
        rest = await asyncio.gather(*flood)
    ends = sorted(end for _, _, end in rest)
    # the paced turn ran second: after the flood's running turn, before its four waiting ones
    assert paced[2] < ends[1], (paced, rest)
    # a waiting stream said nothing until it ran: no head before its slot
    assert sorted(head for _, head, _ in rest)[-1] > ends[0] - 0.05


async def test_a_client_that_leaves_while_waiting_frees_its_place(full: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=full.base_url, timeout=60) as client:
        started = time.monotonic()
        running = asyncio.ensure_future(timed_stream(client, "flood", started))
        await asyncio.sleep(0.1)
        leaving = asyncio.ensure_future(timed_stream(client, "flood", started))
        await asyncio.sleep(0.1)
        leaving.cancel()
        await asyncio.sleep(0.1)
        assert full.app.service.gate.share.total_waiting == 0
        await running
    assert full.app.service.gate.share.total_running == 0


async def test_a_websocket_that_leaves_while_its_turn_waits_frees_its_place(full: RunningServer) -> None:
    """The WebSocket mode: a turn waits for a slot in its lane's worker; the client closing the connection
    gives the place up at once (not after ``--max_wait_seconds``)."""
    url = full.base_url.replace("http://", "ws://") + "/v1/responses"
    headers = {"Authorization": "Bearer key-flood"}
    async with httpx.AsyncClient(base_url=full.base_url, timeout=60) as client:
        running = asyncio.ensure_future(timed_stream(client, "flood", time.monotonic(), words=400))
        await asyncio.sleep(0.1)

        def wait_then_leave() -> None:
            with ws_connect(url, additional_headers=headers) as socket:
                socket.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
                deadline = time.monotonic() + 5
                while full.app.service.gate.share.total_waiting == 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert full.app.service.gate.share.total_waiting == 1

        await asyncio.to_thread(wait_then_leave)
        deadline = time.monotonic() + 2
        while full.app.service.gate.share.total_waiting and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert full.app.service.gate.share.total_waiting == 0
        assert not running.done()  # given up while the running turn still ran, not when it ended
        await running


def test_concurrent_responses_of_a_tenant(full: RunningServer) -> None:
    """``max_concurrent_responses``: a background turn holds its lease; another turn is a 429 meanwhile."""
    queued = create(full, "capped", input="#lorem 30", background=True)
    assert queued.status_code == 200 and queued.json()["status"] == "queued"
    refused = create(full, "capped")
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "requests"
    deadline = time.monotonic() + 20
    headers = {"Authorization": "Bearer key-capped"}
    while time.monotonic() < deadline:
        status = httpx.get(f"{full.base_url}/v1/responses/{queued.json()['id']}", headers=headers).json()[
            "status"
        ]
        if status == "completed":
            break
        time.sleep(0.05)
    assert status == "completed"
    time.sleep(0.2)  # its lease is given back once it ends
    assert create(full, "capped").status_code == 200


def test_a_refused_background_start_gives_its_turn_back(
    full: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background turn let in whose start is then refused (the process's background limit) never runs: its
    slot and its concurrency lease are given back, so its tenant's next turn runs at once."""
    monkeypatch.setattr(full.app.service.runs, "limits", BackgroundLimits(max_running=0))
    refused = create(full, "capped", background=True)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_background_responses"
    monkeypatch.undo()
    time.sleep(0.1)
    started = time.monotonic()
    assert create(full, "capped").status_code == 200
    assert time.monotonic() - started < 5


def test_the_waiting_queue_is_bounded(full: RunningServer) -> None:
    """Past ``max_waiting_responses`` a turn is a 429 at once (nine background turns: one runs, eight wait)."""
    headers = {"Authorization": "Bearer key-paced"}
    # Each long enough (about 20 s) that none ends before the tenth arrives on a loaded machine (#lorem 100 did).
    ids = [create(full, "paced", input="#lorem 2000", background=True).json()["id"] for _ in range(9)]
    refused = create(full, "paced")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limit_exceeded"
    for response_id in ids:
        httpx.post(f"{full.base_url}/v1/responses/{response_id}/cancel", headers=headers, timeout=30)
    assert full.app.service.gate.share.total_waiting == 0
