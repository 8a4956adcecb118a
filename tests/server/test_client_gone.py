"""A client that hangs up aborts its generation on every route and transport, non-streamed included.

Before: a non-streamed response (Responses, Chat Completions with n = 1, 4, 16, Messages) went on
generating to its end after its client left (19-28 s on the attack's echo); only streams stopped.
Each test starts a long generation on a paced echo, waits until the executor has every generation
of the request, hangs up, and measures how long the generations outlive their client: at most 1 s
(docs/limits.md#hostile-input-and-limits). A background response is the exception: its client may leave.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from support.server_harness import RecordingEcho, RunningServer, ServerFactory
from websockets.sync.client import connect as ws_connect

from trtllm_responses.harmony import HarmonyEncoding

#: The bound this file checks: no generation outlives its client by more than this.
OUTLIVES_AT_MOST = 1.0
LONG = "#lorem 4000"  # 20 s at 200 tokens a second: far longer than any test waits


@pytest.fixture(scope="module")
def paced(encoding: HarmonyEncoding, serve: ServerFactory):  # type: ignore[no-untyped-def]
    running = serve(RecordingEcho(encoding, tokens_per_second=200))
    yield running
    running.stop()


def _until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Wait for ``condition``; the time it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what} not within {timeout} s")
        time.sleep(0.01)
    return time.monotonic() - started


def _aborts_metric(server: RunningServer) -> float:
    text = httpx.get(server.base_url + "/metrics", timeout=10).text
    match = re.search(r"^trtllm_executor_aborts_total (\S+)$", text, re.MULTILINE)
    assert match is not None
    return float(match.group(1))


def _hang_up_during(server: RunningServer, path: str, body: dict[str, Any], generations: int) -> float:
    """POST ``body`` on a raw socket, close it once the executor runs ``generations`` generations of it;
    how long after the close the last of them was aborted."""
    executor: RecordingEcho = server.executor
    before = len(executor.requests)
    aborts_before = _aborts_metric(server)
    address = urlsplit(server.base_url)
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {address.hostname}\r\ncontent-type: application/json\r\n"
        f"anthropic-version: 2023-06-01\r\ncontent-length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection((address.hostname, address.port)) as sock:
        sock.sendall(head + data)
        _until(lambda: len(executor.requests) - before >= generations, 30, "the generations' start")
        mine = [r.request_id for r in executor.requests[before:]]
        assert len(mine) == generations
        written = {i: len(executor.outputs[i]) for i in mine}
    # The socket is closed here: the client is gone, every generation still running.
    aborted = _until(lambda: set(mine) <= set(executor.aborted), 10, "every generation's abort")
    assert all(len(executor.outputs[i]) - written[i] < 400 for i in mine), "generated to the end"
    assert _aborts_metric(server) - aborts_before >= generations
    return aborted


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_abort_when_the_client_hangs_up(paced: RunningServer, stream: bool) -> None:
    body = {"model": "m", "input": LONG, "stream": stream}
    assert _hang_up_during(paced, "/v1/responses", body, 1) < OUTLIVES_AT_MOST


@pytest.mark.parametrize("n", [1, 4, 16])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_completions_abort_every_choice_when_the_client_hangs_up(
    paced: RunningServer, n: int, stream: bool
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": LONG}], "n": n, "stream": stream}
    assert _hang_up_during(paced, "/v1/chat/completions", body, n) < OUTLIVES_AT_MOST


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_messages_abort_when_the_client_hangs_up(paced: RunningServer, stream: bool) -> None:
    body = {
        "model": "m",
        "max_tokens": 8000,
        "messages": [{"role": "user", "content": LONG}],
        "stream": stream,
    }
    assert _hang_up_during(paced, "/v1/messages", body, 1) < OUTLIVES_AT_MOST


def test_websocket_aborts_when_the_client_hangs_up(paced: RunningServer) -> None:
    executor: RecordingEcho = paced.executor
    before = len(executor.requests)
    url = paced.base_url.replace("http://", "ws://") + "/v1/responses"
    with ws_connect(url) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": LONG, "store": False}))
        _until(lambda: len(executor.requests) > before, 30, "the generation's start")
        mine = executor.requests[before].request_id
    assert _until(lambda: mine in executor.aborted, 10, "the abort") < OUTLIVES_AT_MOST


def test_a_background_response_outlives_its_client(paced: RunningServer) -> None:
    executor: RecordingEcho = paced.executor
    with httpx.Client(base_url=paced.base_url, timeout=30) as http:
        created = http.post("/v1/responses", json={"model": "m", "input": "#lorem 300", "background": True})
        assert created.status_code == 200
        response_id = created.json()["id"]
        # A streamed background response whose reader leaves: the generation goes on too.
        with http.stream(
            "POST",
            "/v1/responses",
            json={"model": "m", "input": "#lorem 300", "background": True, "stream": True},
        ) as streamed:
            first = next(streamed.iter_lines())
            assert first.startswith("event: response.created")
        followed = [r.request_id for r in executor.requests if r.request_id != response_id][-1]

        def ended(rid: str) -> bool:
            return http.get(f"/v1/responses/{rid}").json()["status"] == "completed"

        _until(lambda: ended(response_id) and ended(followed), 30, "both background responses' end")
    assert response_id not in executor.aborted and followed not in executor.aborted
