"""What a session's turns tell TensorRT-LLM about their KV cache, through a real server on the fake
(docs/sessions-and-kv-cache.md#retention): a turn that may wait for a client tool is sent raised, its tool call
leaves it so, a final answer demotes it, a compacted history and an ended session are released."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from support.server_harness import ServerFactory
from support.trtllm_harness import executor_for

from trtllm_responses.executors.base import GenerationRequest, SamplingSettings
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.responses.kv_release import settle_turn

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _post(http: httpx.Client, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    reply = http.post("/v1/responses", json={"model": "m", **body}, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


def _releases(llm: Any, count: int) -> list[Any]:
    """The retention configs of the one-token release requests the fake received (waiting for ``count``)."""
    for _ in range(300):
        found = [c for c, p in zip(llm.retention_configs, llm.received, strict=True) if p.max_tokens == 1]
        if len(found) >= count:
            return found
        time.sleep(0.01)
    return found


def _priorities(llm: Any, tokens: list[int], done: Any) -> list[int]:
    """The pool's block priorities for ``tokens`` once ``done(priorities)`` holds (the release request ran to its
    end in the engine: the server does not wait for it), or as they are after 3 s."""
    for _ in range(300):
        priorities = [p for _, p in llm.kv.state(tokens)]
        if done(priorities):
            break
        time.sleep(0.01)
    return priorities


def test_a_tool_call_keeps_the_turn_raised_and_the_final_answer_demotes_it(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding)
    with serve(executor) as running, httpx.Client(base_url=running.base_url, timeout=30) as http:
        call = _post(
            http,
            {"input": 'call get_weather {"city": "Paris"}', "tools": [WEATHER]},
            **{"x-session-id": "agent-1"},
        )
        assert call["output"][-1]["type"] == "function_call"
        llm = executor._llm
        (paused,) = llm.retention_configs
        assert (
            paused.token_range_retention_configs[0].priority == 60
        )  # sent raised: it may wait for the client
        assert _releases(llm, 1) == []  # it does wait: nothing released, the pause holds
        output = {"type": "function_call_output", "call_id": call["output"][-1]["call_id"], "output": "sunny"}
        answer = _post(http, {"input": [output], "previous_response_id": call["id"], "tools": [WEATHER]})
        assert answer["output"][-1]["type"] == "message"
        (demoted,) = _releases(llm, 1)  # the final answer: back to the default priority
        (span,) = demoted.token_range_retention_configs
        assert span.priority == 35 and span.token_start > 0  # the shared system/developer start is kept out
        prompt = llm.prompts[-1]
        blocks = _priorities(llm, prompt, lambda b: b and b[-1] == 35)
        assert blocks[-1] == 35 and blocks[0] == 60
        # A session without client tools is sent at 35 and needs nothing after.
        _post(http, {"input": "hello"}, **{"x-session-id": "chat-2"})
        assert llm.retention_configs[-1].token_range_retention_configs[0].priority == 35
        assert len(_releases(llm, 2)) == 1


def test_compacted_history_is_released(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding)
    with serve(executor) as running, httpx.Client(base_url=running.base_url, timeout=30) as http:
        first = _post(http, {"input": "Plan the refactor of module X " * 20}, **{"x-session-id": "long-1"})
        _post(
            http,
            {
                "previous_response_id": first["id"],
                "input": "#prompt",
                "context_management": [{"type": "compaction", "compact_threshold": 50}],
            },
        )
        llm = executor._llm
        (released,) = _releases(llm, 1)
        (span,) = released.token_range_retention_configs
        assert span.priority == 0 and span.token_start > 0
        assert (
            llm.conversation_ids[-1] is None
        )  # 1.2.0: no conversation_params; salted and placed as the turns


@pytest.mark.parametrize(
    ("final", "client_tools", "why"), [(True, False, "ended"), (False, True, "answered")]
)
def test_settle_turn_says_why(final: bool, client_tools: bool, why: str, adapter: Any) -> None:
    """The turn's end, as ``kv_release.settle_turn`` reads it: the client ended the session (released), a raised
    turn answered (demoted); the shared start (system and developer messages) is kept."""
    from trtllm_responses.request.protocol import parse_request

    prompt = adapter.build_prompt(parse_request({"input": "hi"}))
    seen: list[tuple[Any, ...]] = []

    class Recorder:
        def release(self, key: Any, tokens: Any, salt: Any, *, keep: int, why: str) -> None:
            seen.append((key, len(tokens), salt, keep, why))

    generation = GenerationRequest(
        "r",
        prompt.token_ids,
        SamplingSettings(16, ()),
        session_key="s",
        cache_salt="t",
        client_tools=client_tools,
        session_final=final,
    )
    settle_turn(Recorder(), generation, prompt, None)  # type: ignore[arg-type]
    keep = len(prompt.system.tokens) + (len(prompt.developer.tokens) if prompt.developer else 0)
    assert seen == [("s", len(prompt.token_ids), "t", keep, why)]


def test_deleting_a_response_releases_its_turn(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    """DELETE /v1/responses/{id}: the turn rendered again as its continuation would start, released past the shared
    system and developer messages; its first turn's blocks are at 0 in the engine's pool after."""
    executor = executor_for(encoding)
    with serve(executor) as running, httpx.Client(base_url=running.base_url, timeout=30) as http:
        text = "Remember these numbers: " + " ".join(str(i) for i in range(300))
        first = _post(http, {"input": text, "instructions": "Be brief."}, **{"x-session-id": "del-1"})
        llm = executor._llm
        prompt = llm.prompts[0]
        assert http.delete(f"/v1/responses/{first['id']}").status_code == 200
        (released,) = _releases(llm, 1)
        (span,) = released.token_range_retention_configs
        assert span.priority == 0 and 0 < span.token_start < len(prompt) // 2
        priorities = _priorities(llm, prompt, lambda b: len(b) > 2 and b[-2] == 0)
        assert len(priorities) == len(prompt) // 32, priorities
        # The shared start kept; the user's message released (the block its end shares with the turn's output,
        # re-rendered as a continuation renders it, may differ).
        assert priorities[0] == 35 and priorities[-2] == 0 and priorities.count(0) >= len(priorities) - 3, (
            priorities
        )
        assert http.delete(f"/v1/responses/{first['id']}").status_code == 404  # and nothing more
        assert len(_releases(llm, 2)) == 1
