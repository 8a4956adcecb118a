"""One session identity on every API (``request/affinity.py``, docs/sessions-and-kv-cache.md#identity).

Every identity header gives the same key on Responses (HTTP and a WebSocket's handshake), Chat Completions and
Messages, driven with the openai and anthropic SDKs (httpx for the raw answers); the key comes back as
``x-session-id`` (streams too) and reaches the executor with the parent and the end-of-session flag; a header
that is not a key is refused alike everywhere, never echoed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from support.lazy import lazy_import
from support.server_harness import RecordingEcho, RunningServer, ServerFactory
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from trtllm_responses.executors import GenerationRequest
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request import AFFINITY_HEADERS, MAX_SESSION_KEY

anthropic = lazy_import("anthropic")  # the clients extra (not in TensorRT-LLM's container)

TREE = "0199aaaa-1111-7000-8000-000000000001"
THREAD = "0199aaaa-2222-7000-8000-000000000002"

#: (headers sent, the key, the parent): each identity family, a root and a sub-agent where it has both.
CASES: dict[str, tuple[dict[str, str], str, str | None]] = {
    "x-session-id": ({"x-session-id": "trt-1"}, "trt-1", None),
    "x-correlation-id": ({"x-correlation-id": "trt-2"}, "trt-2", None),
    "x-session-affinity": ({"x-session-affinity": "trt-3"}, "trt-3", None),
    "x-multi-turn-session-id": ({"x-multi-turn-session-id": "trt-4"}, "trt-4", None),
    "codex-0.169": ({"session-id": TREE}, TREE, None),
    "codex-root": ({"session-id": TREE, "thread-id": TREE}, TREE, None),
    "codex-subagent": ({"session-id": TREE, "thread-id": THREAD}, THREAD, TREE),
    "codex-named-parent": (
        {"session-id": TREE, "thread-id": THREAD, "x-codex-parent-thread-id": "0199-mid"},
        THREAD,
        "0199-mid",
    ),
    "claude-code-main": ({"x-claude-code-session-id": TREE}, TREE, None),
    "claude-code-subagent": (
        {"x-claude-code-session-id": TREE, "x-claude-code-agent-id": "a1b2c3"},
        "a1b2c3",
        TREE,
    ),
    "claude-code-nested": (
        {
            "x-claude-code-session-id": TREE,
            "x-claude-code-agent-id": "a1b2c3",
            "x-claude-code-parent-agent-id": "a0",
        },
        "a1b2c3",
        "a0",
    ),
    "dynamo": ({"x-dynamo-session-id": "run-42:planner"}, "run-42:planner", None),
    "dynamo-child": (
        {"x-dynamo-session-id": "run-42:researcher", "x-dynamo-parent-session-id": "run-42:planner"},
        "run-42:researcher",
        "run-42:planner",
    ),
    "order": ({"x-correlation-id": "trt-2", "session-id": TREE, "x-dynamo-session-id": "d"}, "trt-2", None),
}

#: An API: (headers) -> (status, the x-session-id it answered with or None).
Call = Callable[[dict[str, str]], tuple[int, str | None]]


@pytest.fixture(scope="module")
def recording(encoding: HarmonyEncoding) -> RecordingEcho:
    return RecordingEcho(encoding)


@pytest.fixture(scope="module")
def running(serve: ServerFactory, recording: RecordingEcho) -> Iterator[RunningServer]:
    with serve(recording) as server:
        yield server


def _responses(server: RunningServer, stream: bool) -> Call:
    def call(headers: dict[str, str]) -> tuple[int, str | None]:
        with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
            if stream:
                with client.responses.with_streaming_response.create(
                    model="m", input="hi", store=False, stream=True, extra_headers=headers
                ) as raw:
                    raw.read()
                    return raw.status_code, raw.headers.get("x-session-id")
            answer = client.responses.with_raw_response.create(
                model="m", input="hi", store=False, extra_headers=headers
            )
            return answer.status_code, answer.headers.get("x-session-id")

    return call


def _chat(server: RunningServer, stream: bool) -> Call:
    def call(headers: dict[str, str]) -> tuple[int, str | None]:
        messages: Any = [{"role": "user", "content": "hi"}]
        with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
            if stream:
                with client.chat.completions.with_streaming_response.create(
                    model="m", messages=messages, stream=True, extra_headers=headers
                ) as raw:
                    raw.read()
                    return raw.status_code, raw.headers.get("x-session-id")
            answer = client.chat.completions.with_raw_response.create(
                model="m", messages=messages, extra_headers=headers
            )
            return answer.status_code, answer.headers.get("x-session-id")

    return call


def _messages(server: RunningServer, stream: bool) -> Call:
    def call(headers: dict[str, str]) -> tuple[int, str | None]:
        messages: Any = [{"role": "user", "content": "hi"}]
        with anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0) as client:
            if stream:
                with client.messages.with_streaming_response.create(
                    model="claude-sonnet-4-6",
                    max_tokens=64,
                    messages=messages,
                    stream=True,
                    extra_headers=headers,
                ) as raw:
                    raw.read()
                    return raw.status_code, raw.headers.get("x-session-id")
            answer = client.messages.with_raw_response.create(
                model="claude-sonnet-4-6", max_tokens=64, messages=messages, extra_headers=headers
            )
            return answer.status_code, answer.headers.get("x-session-id")

    return call


def _websocket(server: RunningServer) -> Call:
    """A WebSocket's handshake headers name the session of every response on it (none is returned: the
    handshake's 101 carries no x-session-id; the key is read off what the executor received)."""

    def call(headers: dict[str, str]) -> tuple[int, str | None]:
        url = server.base_url.replace("http://", "ws://") + "/v1/responses"
        with ws_connect(url, additional_headers=headers) as ws:
            ws.send(json.dumps({"type": "response.create", "model": "m", "input": "hi", "store": False}))
            while json.loads(ws.recv())["type"] != "response.completed":
                pass
        return 200, None

    return call


APIS = {
    "responses": lambda s: _responses(s, False),
    "responses-stream": lambda s: _responses(s, True),
    "chat": lambda s: _chat(s, False),
    "chat-stream": lambda s: _chat(s, True),
    "messages": lambda s: _messages(s, False),
    "messages-stream": lambda s: _messages(s, True),
    "websocket": _websocket,
}


def _last(recording: RecordingEcho) -> GenerationRequest:
    return recording.requests[-1]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("api", sorted(APIS))
def test_every_header_gives_the_same_key_on_every_api(
    api: str, case: str, running: RunningServer, recording: RecordingEcho
) -> None:
    headers, key, parent = CASES[case]
    status, returned = APIS[api](running)(headers)
    assert status == 200
    if api != "websocket":
        assert returned == key
    generation = _last(recording)
    assert (generation.session_key, generation.session_parent) == (key, parent)
    assert generation.session_final is False


def test_the_headers_are_read_in_the_stated_order() -> None:
    assert AFFINITY_HEADERS == (
        "x-session-id",
        "x-correlation-id",
        "x-session-affinity",
        "x-multi-turn-session-id",
        "thread-id",
        "session-id",
        "x-claude-code-agent-id",
        "x-claude-code-session-id",
        "x-dynamo-session-id",
    )


@pytest.mark.parametrize("api", ["responses", "chat", "messages"])
def test_the_end_of_a_session_reaches_the_executor(
    api: str, running: RunningServer, recording: RecordingEcho
) -> None:
    final = {"x-dynamo-session-id": "run-7", "x-dynamo-session-final": "true"}
    assert APIS[api](running)(final) == (200, "run-7")
    assert _last(recording).session_final is True
    assert APIS[api](running)({"x-dynamo-session-id": "run-7", "x-dynamo-session-final": "false"}) == (
        200,
        "run-7",
    )
    assert _last(recording).session_final is False


def test_a_websocket_never_ends_its_session_at_the_first_response(
    running: RunningServer, recording: RecordingEcho
) -> None:
    _websocket(running)({"x-dynamo-session-id": "ws-run", "x-dynamo-session-final": "true"})
    assert (_last(recording).session_key, _last(recording).session_final) == ("ws-run", False)


INVALID = {
    "x-session-id": "k" * (MAX_SESSION_KEY + 1),
    "thread-id": "two words",
    "session-id": "a,b",
    "x-claude-code-session-id": "caf\xe9",
    "x-claude-code-agent-id": "a;b",
    "x-dynamo-session-id": 'a"b',
    "x-dynamo-parent-session-id": "a b",
    "x-dynamo-session-final": "maybe",
}


def _context(header: str) -> dict[str, str]:
    """What a refused header comes with (a parent is read only beside its family's key)."""
    return {"x-dynamo-session-id": "ok"} if header == "x-dynamo-parent-session-id" else {}


@pytest.mark.parametrize("header", sorted(INVALID))
def test_a_header_that_is_not_a_key_is_refused_alike_everywhere(header: str, running: RunningServer) -> None:
    value = INVALID[header]
    headers = {**_context(header), header: value}
    sent = {k: v.encode("latin-1") for k, v in headers.items()}
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    message = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": chat["messages"]}
    with httpx.Client(base_url=running.base_url, timeout=30) as http:
        answers = {
            "responses": http.post("/v1/responses", json={"model": "m", "input": "hi"}, headers=sent),
            "chat": http.post("/v1/chat/completions", json=chat, headers=sent),
            "messages": http.post("/v1/messages", json=message, headers=sent),
            "compact": http.post("/v1/responses/compact", json={"model": "m", "input": "hi"}, headers=sent),
        }
    messages = set()
    for api, answer in answers.items():
        assert answer.status_code == 400, (api, answer.text)
        assert "x-session-id" not in answer.headers and value not in answer.text
        error = answer.json()["error"]
        messages.add(error["message"])
        if api != "messages":  # OpenAI's envelope names the field and the code; Anthropic's has neither
            assert (error["param"], error["code"]) == (header, "invalid_session_id")
    assert len(messages) == 1 and f"'{header}'" in messages.pop()
    url = running.base_url.replace("http://", "ws://") + "/v1/responses"
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(url, additional_headers=headers)
    assert refused.value.response.status_code == 400
    body = json.loads(refused.value.response.body or b"{}")
    assert (body["error"]["param"], body["error"]["code"]) == (header, "invalid_session_id")


def test_a_header_of_a_family_that_gave_no_key_is_not_read(
    running: RunningServer, recording: RecordingEcho
) -> None:
    """The first family with a key decides; a later family's headers are not read (nor refused)."""
    call = APIS["chat"](running)
    assert call({"x-session-id": "mine", "thread-id": "not a key"}) == (200, "mine")
    assert call({"x-dynamo-parent-session-id": "p"}) == (200, None)  # a parent alone names no session
    assert _last(recording).session_parent is None


def test_claude_codes_headers_through_messages_return_the_key(running: RunningServer) -> None:
    """What Claude Code sends (2.1.332: ``X-Claude-Code-Session-Id`` on every request, the agent headers on a
    sub-agent's), answered with ``x-session-id`` on a stream and a message alike."""
    headers = {"X-Claude-Code-Session-Id": TREE, "anthropic-version": "2023-06-01"}
    message = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with httpx.Client(base_url=running.base_url, timeout=30, headers=headers) as http:
        assert http.post("/v1/messages", json=message).headers["x-session-id"] == TREE
        with http.stream("POST", "/v1/messages", json={**message, "stream": True}) as streamed:
            assert streamed.headers["x-session-id"] == TREE
            streamed.read()
        counted = http.post("/v1/messages/count_tokens", json=message)
        assert counted.status_code == 200 and counted.headers["x-session-id"] == TREE


def test_a_compaction_runs_in_the_session_its_headers_name(
    running: RunningServer, recording: RecordingEcho
) -> None:
    """The summarization generation of a compacted response, and of ``/v1/responses/compact``, is the session's:
    its key, its parent and its end flag, as the response's own generation."""
    headers = {"session-id": TREE, "thread-id": THREAD, "x-dynamo-session-final": "true"}
    body = {
        "model": "m",
        "input": "Plan the refactor of module X, then compact",
        "store": False,
        "context_management": [{"type": "compaction", "compact_threshold": 10}],
    }
    with httpx.Client(base_url=running.base_url, timeout=30, headers=headers) as http:
        before = len(recording.requests)
        assert http.post("/v1/responses", json=body).status_code == 200
        generations = recording.requests[before:]
        assert len(generations) == 2  # the summary, then the answer
        assert {(g.session_key, g.session_parent, g.session_final) for g in generations} == {
            (THREAD, TREE, True)
        }
        before = len(recording.requests)
        compacted = http.post(
            "/v1/responses/compact", json={"model": "m", "input": "Compact this conversation."}
        )
        assert compacted.status_code == 200
        (summary,) = recording.requests[before:]
        assert (summary.session_key, summary.session_parent, summary.session_final) == (THREAD, TREE, True)
