"""A tenant's ``max_stored_bytes`` on the wire (docs/tenants.md#limits): a turn that would store, of a tenant
whose stored responses are at its limit, is a 429 ``insufficient_quota`` before it runs (HTTP, background,
WebSocket; the ``openai`` SDK does not retry it); a turn that stores nothing is let in; deleting a response
lets the tenant store again; another tenant is unaffected. On memory and SQLite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.server_harness import RunningServer
from websockets.sync.client import connect as ws_connect

from trtllm_responses.store import open_store
from trtllm_responses.tenants import hash_key


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def server(serve, tmp_path_factory, request) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("stored")
    tenants = {
        "small": {"keys": [hash_key("key-small")], "max_stored_bytes": 1},
        "other": {"keys": [hash_key("key-other")], "max_stored_bytes": 1 << 30},
        "ops": {"keys": [hash_key("key-ops")], "admin": True},
    }
    (folder / "tenants.json").write_text(json.dumps({"tenants": tenants}))
    url = "memory" if request.param == "memory" else f"sqlite:///{folder / 'store.db'}"
    store = open_store(url, max_responses=1000, max_bytes=1 << 26)
    with serve(tenants_file=str(folder / "tenants.json"), store=store) as running:
        yield running


def post(server: RunningServer, tenant: str, path: str = "/v1/responses", **body: Any) -> httpx.Response:
    return httpx.post(
        server.base_url + path,
        json={"model": "m", "input": "hi", **body},
        headers={"Authorization": f"Bearer key-{tenant}"},
        timeout=30,
    )


def refused(answer: httpx.Response) -> None:
    assert answer.status_code == 429, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "insufficient_quota",
        "insufficient_quota",
        None,
    )
    assert "stored bytes" in error["message"] and "delete responses" in error["message"]
    assert answer.headers["x-should-retry"] == "false"


def test_a_tenant_at_its_stored_bytes_is_refused_until_it_deletes(server: RunningServer) -> None:
    first = post(server, "small")
    assert first.status_code == 200  # under the limit: stored, overshooting it by its own bytes
    refused(post(server, "small"))
    refused(post(server, "small", stream=True))  # a plain 429, never a started stream
    refused(post(server, "small", background=True))
    with ws_connect(
        server.base_url.replace("http", "ws") + "/v1/responses",
        additional_headers={"Authorization": "Bearer key-small"},
    ) as socket:
        socket.send(json.dumps({"type": "response.create", "model": "m", "input": "hi"}))
        event = json.loads(socket.recv(timeout=30))
        assert event["type"] == "error" and "insufficient_quota" in json.dumps(event)
    # What stores nothing is let in: store false, chat completions, messages.
    assert post(server, "small", store=False).status_code == 200
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    assert post(server, "small", "/v1/chat/completions", **chat).status_code == 200
    messages = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
    assert post(server, "small", "/v1/messages", **messages).status_code == 200
    assert post(server, "other").status_code == 200  # another tenant stores on
    headers = {"Authorization": "Bearer key-small"}
    deleted = httpx.delete(f"{server.base_url}/v1/responses/{first.json()['id']}", headers=headers)
    assert deleted.status_code == 200
    assert post(server, "small").status_code == 200  # its bytes are free again


def test_the_openai_sdk_does_not_retry_it(server: RunningServer) -> None:
    post(server, "small")  # at its limit whatever ran before
    statuses: list[int] = []
    hooks = {"response": [lambda response: statuses.append(response.status_code)]}
    with httpx.Client(event_hooks=hooks) as http:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="key-small", http_client=http)
        with pytest.raises(openai.RateLimitError) as caught:
            client.responses.create(model="m", input="again")
    assert statuses == [429]  # once: waiting frees no bytes
    assert caught.value.code == "insufficient_quota"


def test_stats_and_metrics_say_what_each_tenant_stores(server: RunningServer) -> None:
    kept = post(server, "other", input="x" * 2000)
    assert kept.status_code == 200
    stats = httpx.get(server.base_url + "/stats", headers={"Authorization": "Bearer key-ops"}).json()
    stored = {name: counts.get("stored_bytes") for name, counts in stats["tenants"].items()}
    assert stored["other"] > 2000 and stored["small"] > 0 and stored["ops"] == 0
    metrics = httpx.get(server.base_url + "/metrics").text
    assert f'trtllm_tenant_stored_bytes{{tenant="other"}} {float(stored["other"])}' in metrics
    httpx.delete(
        f"{server.base_url}/v1/responses/{kept.json()['id']}", headers={"Authorization": "Bearer key-other"}
    )
    after = httpx.get(server.base_url + "/stats", headers={"Authorization": "Bearer key-ops"}).json()
    assert after["tenants"]["other"]["stored_bytes"] < stored["other"] - 2000
