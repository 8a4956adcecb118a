"""Which session a response belongs to (``responses/sessions.py``), as a router and the engine see it: the
``x-session-id`` response header, and ``conversation_params`` on the fake TensorRT-LLM.

One key per response: the client's affinity header, else ``prompt_cache_key``, else the conversation,
else the key of the response it continues (stored with it), else its own id when it can be continued.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.server_harness import RunningServer, ServerFactory
from support.trtllm_harness import executor_for
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request import MAX_SESSION_KEY


@pytest.fixture
def http(echo_server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=echo_server.base_url, timeout=30) as c:
        yield c


def create(http: httpx.Client, body: dict[str, Any], **headers: str) -> httpx.Response:
    response = http.post("/v1/responses", json={"model": "m", **body}, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_a_chain_keeps_its_first_turns_key(http: httpx.Client) -> None:
    first = create(http, {"input": "hi"}, **{"x-session-id": "agent-7"})
    assert first.headers["x-session-id"] == "agent-7"
    previous = first.json()["id"]
    for turn in range(3):  # later turns send no header: each inherits the key stored with its predecessor
        answer = create(http, {"input": f"turn {turn}", "previous_response_id": previous})
        assert answer.headers["x-session-id"] == "agent-7"
        previous = answer.json()["id"]


def test_a_chain_without_a_key_is_keyed_by_its_root(http: httpx.Client) -> None:
    root = create(http, {"input": "hi"})
    root_id = root.json()["id"]
    assert root.headers["x-session-id"] == root_id
    second = create(http, {"input": "again", "previous_response_id": root_id})
    third = create(http, {"input": "more", "previous_response_id": second.json()["id"]})
    assert second.headers["x-session-id"] == third.headers["x-session-id"] == root_id


def test_the_order_header_cache_key_conversation_chain(http: httpx.Client) -> None:
    root = create(http, {"input": "hi"}).json()["id"]
    both = create(http, {"input": "x", "prompt_cache_key": "thread-1"}, **{"session-id": "codex-thread"})
    assert both.headers["x-session-id"] == "codex-thread"
    cache_key = create(http, {"input": "x", "prompt_cache_key": "thread-1", "previous_response_id": root})
    assert cache_key.headers["x-session-id"] == "thread-1"
    odd = create(http, {"input": "x", "prompt_cache_key": "my key, with spaces"})
    assert odd.headers["x-session-id"].startswith("pck_") and " " not in odd.headers["x-session-id"]
    conversation = http.post("/v1/conversations", json={}).json()["id"]
    turn = create(http, {"input": "x", "conversation": conversation})
    assert turn.headers["x-session-id"] == conversation


def test_streams_and_background_responses_carry_it(http: httpx.Client) -> None:
    with http.stream(
        "POST", "/v1/responses", json={"input": "hi", "stream": True}, headers={"x-correlation-id": "c-1"}
    ) as streamed:
        assert streamed.status_code == 200 and streamed.headers["x-session-id"] == "c-1"
        streamed.read()
    queued = create(http, {"input": "hi", "background": True}, **{"x-session-affinity": "bg-1"})
    assert queued.headers["x-session-id"] == "bg-1"


def test_nothing_to_continue_means_no_key(http: httpx.Client) -> None:
    assert "x-session-id" not in create(http, {"input": "hi", "store": False}).headers
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert "x-session-id" not in http.post("/v1/chat/completions", json=chat).headers
    keyed = http.post("/v1/chat/completions", json=chat, headers={"x-session-id": "chat-1"})
    assert keyed.status_code == 200 and keyed.headers["x-session-id"] == "chat-1"
    cached = http.post("/v1/chat/completions", json={**chat, "prompt_cache_key": "chat-2"})
    assert cached.headers["x-session-id"] == "chat-2"


def test_a_header_that_is_not_a_key_is_a_400_naming_it(http: httpx.Client) -> None:
    for value in ("k" * (MAX_SESSION_KEY + 1), "two words", "a,b"):
        refused = http.post("/v1/responses", json={"input": "hi"}, headers={"x-session-id": value})
        assert refused.status_code == 400 and "x-session-id" not in refused.headers
        error = refused.json()["error"]
        assert error["param"] == "x-session-id" and error["code"] == "invalid_session_id"
        assert value not in refused.text  # not echoed either
    at_bound = "k" * MAX_SESSION_KEY
    assert create(http, {"input": "hi"}, **{"x-session-id": at_bound}).headers["x-session-id"] == at_bound


def test_the_api_key_is_never_a_session_key(serve: ServerFactory) -> None:
    with serve(api_key="sk-very-secret") as running, httpx.Client(base_url=running.base_url) as http:
        auth = {"Authorization": "Bearer sk-very-secret", "Cookie": "session=cookie-value"}
        answer = http.post("/v1/responses", json={"input": "hi"}, headers=auth)
        assert answer.status_code == 200 and answer.headers["x-session-id"] == answer.json()["id"]
        assert not any("sk-very-secret" in v or "cookie-value" in v for v in answer.headers.values())


def test_every_generation_of_a_session_goes_to_tensorrt_llm_with_its_key(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conversation_params on the fake TensorRT-LLM: both turns of a chain; none for a response nobody can continue."""
    monkeypatch.setattr(fake_trtllm, "__version__", "1.3.0rc29")  # a release with conversation_params
    executor = executor_for(encoding)
    with serve(executor) as running, httpx.Client(base_url=running.base_url, timeout=30) as http:
        first = create(http, {"input": "hi"}, **{"session-id": "thread-9"}).json()["id"]
        create(http, {"input": "again", "previous_response_id": first})
        create(http, {"input": "solo", "store": False})
        assert executor._llm.conversation_ids == ["thread-9", "thread-9", None]


def test_a_websocket_takes_its_handshakes_key(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", "1.3.0rc29")  # a release with conversation_params
    executor = executor_for(encoding)
    with serve(executor) as running:
        url = running.base_url.replace("http://", "ws://") + "/v1/responses"
        with ws_connect(url, additional_headers={"x-session-id": "ws-1"}) as ws:
            for text in ("hi", "again"):
                ws.send(json.dumps({"type": "response.create", "model": "m", "input": text, "store": False}))
                while json.loads(ws.recv())["type"] != "response.completed":
                    pass
        with ws_connect(
            url
        ) as ws:  # no header: a store=false response continued on the socket keeps its root
            ids = []
            for text in ("hi", "again"):
                body: dict[str, Any] = {
                    "type": "response.create",
                    "model": "m",
                    "input": text,
                    "store": False,
                }
                if ids:
                    body["previous_response_id"] = ids[-1]
                ws.send(json.dumps(body))
                while (event := json.loads(ws.recv()))["type"] != "response.completed":
                    pass
                ids.append(event["response"]["id"])
        assert executor._llm.conversation_ids == ["ws-1", "ws-1", ids[0], ids[0]]
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(url, additional_headers={"x-session-id": "not a key"})
        assert refused.value.response.status_code == 400
        assert json.loads(refused.value.response.body or b"{}")["error"]["code"] == "invalid_session_id"
