"""Tenants cannot see each other (docs/tenants.md#isolation): the cross-tenant matrix.

Tenant A stores a response (reasoning and a function call), a conversation with items, a background
response still streaming and a multi-agent response; tenant B tries every path on them with A's ids, and
each answer is the one an id that never existed gets (404, or 400 where an unknown id is a 400), body and
all; A still reads its own after. One server per backend (memory, SQLite, a real Redis), driven with the
``openai`` SDK, httpx and a WebSocket. The group of frontends is ``tests/cli/test_frontend_tenants.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.redis_harness import RedisServer, redis_binary
from support.server_harness import RecordingEcho, RunningServer, ServerFactory, plain_event, steps
from websockets.sync.client import connect as ws_connect

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.store import open_store
from trtllm_responses.tenants import hash_key

KEYS = {"a": "key-of-a", "b": "key-of-b"}
TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
BETA = {"openai-beta": "responses_multi_agent=v1"}


def write_tenants(folder: Path) -> Path:
    """A tenants file of two tenants, ``a`` and ``b``, one key each."""
    path = folder / "tenants.json"
    path.write_text(json.dumps({"tenants": {n: {"keys": [hash_key(k)]} for n, k in KEYS.items()}}))
    return path


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    if redis_binary() is None:
        pytest.fail("redis-server is not installed: run `make test` (it installs it)")
    running = RedisServer().start()
    yield running.url
    running.stop()


@pytest.fixture(scope="module", params=["memory", "sqlite", "redis"])
def server(
    request: pytest.FixtureRequest,
    serve: ServerFactory,
    encoding: HarmonyEncoding,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp(f"isolation-{request.param}")
    store = {
        "memory": "memory",
        "sqlite": f"sqlite:///{folder / 'store.db'}",
        "redis": request.getfixturevalue("redis_url") if request.param == "redis" else "",
    }[request.param]
    executor = RecordingEcho(encoding, tokens_per_second=400)  # a `#lorem 8000` runs ~20 s
    tenants = str(write_tenants(folder))
    with serve(
        executor, store=open_store(store, max_responses=1000, max_bytes=1 << 28), tenants_file=tenants
    ) as running:
        yield running


_OPEN: list[httpx.Client | openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Each test's clients are closed when it ends (their sockets with them)."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def http(server: RunningServer, tenant: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    client = httpx.Client(base_url=server.base_url, headers=headers, timeout=60)
    _OPEN.append(client)
    return client


def sdk(server: RunningServer, tenant: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEYS[tenant], max_retries=0)
    _OPEN.append(client)
    return client


def same_as_unknown(client: httpx.Client, method: str, path: str, owned: str, unknown: str, **kw: Any) -> int:
    """``method path`` with another tenant's id answers exactly as with an id that never existed (status
    and body, the id aside); the status."""

    def ask(the_id: str) -> httpx.Response:
        body = kw.get("json")
        sent = json.loads(json.dumps(body).replace("{ID}", the_id)) if body is not None else None
        return client.request(method, path.replace("{ID}", the_id), json=sent)

    theirs, none = ask(owned), ask(unknown)
    assert theirs.status_code == none.status_code and theirs.status_code in (400, 404), (path, theirs.text)
    assert theirs.text.replace(owned, "<id>") == none.text.replace(unknown, "<id>"), (path, theirs.text)
    return theirs.status_code


def test_another_tenant_reaches_nothing_of_a_tenants(server: RunningServer) -> None:
    a, b = http(server, "a"), http(server, "b")
    # -- what A owns ----------------------------------------------------------------------------
    stored = sdk(server, "a").responses.create(
        model="m",
        input='call lookup {"q": 1}',
        tools=TOOLS,
        store=True,  # type: ignore[arg-type]
    )
    kinds = [item.type for item in stored.output]
    assert kinds == ["reasoning", "function_call"], kinds
    minted = stored.output[-1].id  # the function call's id: minted by the server
    conv = a.post(
        "/v1/conversations", json={"items": [{"type": "message", "role": "user", "content": "A's secret"}]}
    )
    conv_id = conv.json()["id"]
    item_id = a.get(f"/v1/conversations/{conv_id}/items").json()["data"][0]["id"]
    background = a.post(
        "/v1/responses", json={"model": "m", "input": "#lorem 8000", "background": True, "store": True}
    ).json()["id"]
    resp, fake_resp, fake_conv = stored.id, "resp_" + "0" * 32, "conv_" + "0" * 32

    # -- B on each of them: as unknown ------------------------------------------------------------
    for method, path in [
        ("GET", "/v1/responses/{ID}"),
        ("GET", "/v1/responses/{ID}/input_items"),
        ("DELETE", "/v1/responses/{ID}"),
        ("POST", "/v1/responses/{ID}/cancel"),
    ]:
        for owned in (resp, background):
            assert same_as_unknown(b, method, path, owned, fake_resp) == 404
    assert (
        same_as_unknown(b, "GET", "/v1/responses/{ID}?stream=true&starting_after=0", background, fake_resp)
        == 404
    )
    follow = {"model": "m", "input": "go on", "previous_response_id": "{ID}"}
    for path in ("/v1/responses", "/v1/responses/compact", "/v1/responses/input_tokens"):
        assert same_as_unknown(b, "POST", path, resp, fake_resp, json=follow) == 404
    for method, path, body in [
        ("GET", "/v1/conversations/{ID}", None),
        ("POST", "/v1/conversations/{ID}", {"metadata": {"k": "v"}}),
        ("GET", "/v1/conversations/{ID}/items", None),
        (
            "POST",
            "/v1/conversations/{ID}/items",
            {"items": [{"type": "message", "role": "user", "content": "x"}]},
        ),
        ("GET", f"/v1/conversations/{{ID}}/items/{item_id}", None),
        ("DELETE", f"/v1/conversations/{{ID}}/items/{item_id}", None),
        ("DELETE", "/v1/conversations/{ID}", None),
    ]:
        assert same_as_unknown(b, method, path, conv_id, fake_conv, json=body) == 404
    in_conv = {"model": "m", "input": "hi", "conversation": "{ID}"}
    assert same_as_unknown(b, "POST", "/v1/responses", conv_id, fake_conv, json=in_conv) == 404
    reference = {"model": "m", "input": [{"type": "item_reference", "id": "{ID}"}]}
    for owned in (minted, item_id):
        assert same_as_unknown(b, "POST", "/v1/responses", owned, "fc_" + "0" * 32, json=reference) == 400

    # A's response as the comparison of B's prompt cache diagnostics: not found
    for the_id in (resp, fake_resp):
        compared = b.post(
            "/v1/responses",
            json={"model": "m", "input": "hi", "prompt_cache_options": {"comparison_response_id": the_id}},
        )
        assert compared.json()["prompt_cache_diagnostics"]["type"] == "comparison_response_not_found", (
            compared.text
        )

    # -- a WebSocket of B's continuing A's response ----------------------------------------------
    url = server.base_url.replace("http://", "ws://") + "/v1/responses"
    with ws_connect(url, additional_headers={"Authorization": f"Bearer {KEYS['b']}"}) as ws:
        answers = []
        for the_id in (resp, fake_resp):
            ws.send(
                json.dumps(
                    {"type": "response.create", "model": "m", "input": "hi", "previous_response_id": the_id}
                )
            )
            answers.append(plain_event(json.loads(ws.recv())))
        assert answers[0]["type"] == "error" and answers[0]["error"]["code"] == "previous_response_not_found"
        assert json.dumps(answers[0]).replace(resp, "<id>") == json.dumps(answers[1]).replace(
            fake_resp, "<id>"
        )

    # -- A still has all of it ----------------------------------------------------------------------
    assert a.get(f"/v1/responses/{resp}").json()["output"][-1]["id"] == minted
    assert a.get(f"/v1/responses/{resp}/input_items").status_code == 200
    assert a.get(f"/v1/conversations/{conv_id}/items/{item_id}").json()["content"][0]["text"] == "A's secret"
    assert (
        a.post("/v1/responses/input_tokens", json=follow | {"previous_response_id": resp}).status_code == 200
    )
    referenced = a.post(
        "/v1/responses", json={"model": "m", "input": [{"type": "item_reference", "id": minted}]}
    )
    assert referenced.status_code == 200, referenced.text
    with a.stream(
        "GET", f"/v1/responses/{background}", params={"stream": "true", "starting_after": "0"}
    ) as s:
        assert s.status_code == 200 and next(s.iter_lines()).startswith("event: ")
    cancelled = a.post(f"/v1/responses/{background}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
    assert a.delete(f"/v1/responses/{resp}").json()["deleted"] is True


def test_a_client_chosen_item_id_never_shadows_another(server: RunningServer) -> None:
    """The shadowing attack (issue 40, "Why" 1): ids clients chose are found only in their own input,
    conversation and chain; the store-wide index holds only ids the server minted."""
    a, b = http(server, "a"), http(server, "b")

    def store_message(client: httpx.Client, text: str) -> dict[str, Any]:
        item = {"id": "msg_1", "type": "message", "role": "user", "content": text}
        answer = client.post("/v1/responses", json={"model": "m", "input": [item], "store": True})
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    first = store_message(a, "A's secret")
    store_message(a, "A's other session")  # the same tenant, another session
    store_message(b, "B's injection")  # another tenant
    bare = {
        "model": "m",
        "input": [{"type": "item_reference", "id": "msg_1"}, {"role": "user", "content": "#prompt"}],
    }
    for client in (a, b):
        answer = client.post("/v1/responses", json=bare)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "item_not_found", answer.text
        assert "secret" not in answer.text and "injection" not in answer.text
    # in its own chain, the id is the client's own item
    chained = a.post("/v1/responses", json=bare | {"previous_response_id": first["id"]})
    assert chained.status_code == 200 and "A's secret" in chained.text and "injection" not in chained.text
    # a server-minted output id is found store-wide by its owner alone
    minted = first["output"][-1]["id"]
    by_owner = a.post(
        "/v1/responses", json={"model": "m", "input": [{"type": "item_reference", "id": minted}]}
    )
    assert by_owner.status_code == 200, by_owner.text
    by_other = b.post(
        "/v1/responses", json={"model": "m", "input": [{"type": "item_reference", "id": minted}]}
    )
    assert by_other.status_code == 400 and by_other.json()["error"]["code"] == "item_not_found"
    # so is an input item's id the server minted (the client gave none)
    plain = a.post("/v1/responses", json={"model": "m", "input": "A's minted input", "store": True}).json()
    input_id = a.get(f"/v1/responses/{plain['id']}/input_items").json()["data"][0]["id"]
    reference = {"model": "m", "input": [{"type": "item_reference", "id": input_id}]}
    by_owner = a.post("/v1/responses", json=reference)
    assert by_owner.status_code == 200 and "A's minted input" in by_owner.text, by_owner.text
    by_other = b.post("/v1/responses", json=reference)
    assert by_other.status_code == 400 and "minted input" not in by_other.text


def test_sub_agents_are_their_tenants(server: RunningServer) -> None:
    """A multi-agent response's sub-agent turns run as its tenant: their ids and items are A's alone."""
    a, b = http(server, "a"), http(server, "b")
    spawn = 'call multi_agent.spawn_agent {"task": "Hello from the child", "name": "kid"}'
    body = {"model": "m", "input": steps(spawn, "call multi_agent.wait_agent {}", "Done."), "store": True}
    executor = server.executor
    assert isinstance(executor, RecordingEcho)
    before = len(executor.requests)
    root = a.post("/v1/responses", json=body | {"multi_agent": {"enabled": True}}, headers=BETA)
    assert root.status_code == 200, root.text
    # a generation's request id is its response's id (a later step of its tool loop adds ``.N``)
    turns = {r.request_id for r in executor.requests[before:] if "." not in r.request_id}
    root_id = root.json()["id"]
    sub_ids = [t for t in turns if t != root_id]
    assert sub_ids  # the kid's turn
    kid = next(i for i in root.json()["output"] if i.get("agent", {}).get("agent_name") == "kid")
    for sub in sub_ids:
        got = b.get(f"/v1/responses/{sub}")
        assert got.status_code == 404, got.text
    reference = {"model": "m", "input": [{"type": "item_reference", "id": kid["id"]}]}
    assert b.post("/v1/responses", json=reference).status_code == 400
    assert a.post("/v1/responses", json=reference).status_code == 200


def test_a_running_sub_agent_is_its_tenants(server: RunningServer) -> None:
    """While a sub-agent's turn runs, its id shows its owner the live response and is unknown to another."""
    a, b = http(server, "a"), http(server, "b")
    executor = server.executor
    assert isinstance(executor, RecordingEcho)
    before = len(executor.requests)
    spawn = 'call multi_agent.spawn_agent {"task": "#lorem 20000", "name": "slow"}'  # ~50 s
    body = {
        "model": "m",
        "input": steps(spawn, "call multi_agent.wait_agent {}", "Done."),
        "background": True,
    }
    root = a.post(
        "/v1/responses", json=body | {"multi_agent": {"enabled": True}, "store": True}, headers=BETA
    )
    root_id = root.json()["id"]
    deadline = time.monotonic() + 20
    subs: list[str] = []
    while not subs and time.monotonic() < deadline:
        subs = [r.request_id for r in executor.requests[before:] if r.request_id.split(".")[0] != root_id]
        time.sleep(0.05)
    assert subs, "the sub-agent's turn did not start"
    sub = subs[0].split(".")[0]
    assert a.get(f"/v1/responses/{sub}").json()["status"] == "in_progress"
    assert same_as_unknown(b, "GET", "/v1/responses/{ID}", sub, "resp_" + "0" * 32) == 404
    assert same_as_unknown(b, "POST", "/v1/responses/{ID}/cancel", sub, "resp_" + "0" * 32) == 404
    assert a.post(f"/v1/responses/{root_id}/cancel").json()["status"] == "cancelled"
