"""The grammar of a chat completions stream, checked on the raw SSE lines (used by every chat stream test).

Every ``data:`` line but the last is a ``chat.completion.chunk`` that validates against the
``openai`` SDK's ``ChatCompletionChunk`` (or, once, an ``{"error": …}`` chunk); the last is
``[DONE]``. Each choice starts with ``{"role": "assistant"}``, ends with exactly one chunk
carrying a ``finish_reason``, and its tool calls start with index, id, type and name before any
argument fragment. All chunks share one id, ``created``, model and ``service_tier``. With
``include_usage`` every chunk but the usage one says ``"usage": null`` (the SDK's docstring), so either
every choice chunk carries ``usage: null`` or none does. A choice's ``content`` starts ``null`` and
becomes a string with its first text: what the SDK's accumulation ends with is what the
non-streamed ``message.content`` is (``null`` for a tool-call-only answer).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from openai.types.chat import ChatCompletionChunk


def parse_chat_sse(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The ``data:`` payloads of a chat stream (``[DONE]`` as the string), checking the framing."""
    payloads: list[Any] = []
    for line in lines:
        if line == "":
            continue
        assert line.startswith("data: "), f"unexpected SSE line {line!r}"
        data = line[len("data: ") :]
        payloads.append(data if data == "[DONE]" else json.loads(data))
    return payloads


def check_chat_stream(payloads: list[Any]) -> dict[str, Any]:
    """Assert the grammar; return what the stream said: per choice its content, reasoning, tool
    calls and finish_reason, plus ``usage`` and ``error`` (None when absent)."""
    assert payloads and payloads[-1] == "[DONE]", "a chat stream ends with [DONE]"
    assert payloads.count("[DONE]") == 1
    chunks = payloads[:-1]
    errors = [c for c in chunks if "error" in c]
    if errors:
        assert len(errors) == 1 and chunks[-1] is errors[0], "one error chunk, right before [DONE]"
        chunks = chunks[:-1]
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    ids = {(c["id"], c["created"], c["model"], c.get("service_tier")) for c in chunks}
    assert len(ids) == 1, "every chunk has the same id, created, model and service_tier"
    with_usage = [c for c in chunks if c["choices"] and "usage" in c]
    assert not with_usage or len(with_usage) == len([c for c in chunks if c["choices"]]), (
        "usage: null on every chunk or none"
    )
    assert all(c["usage"] is None for c in with_usage)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
        assert chunk["object"] == "chat.completion.chunk"
        if not chunk["choices"]:
            assert usage is None and chunk is chunks[-1], "the usage chunk comes once, last"
            usage = chunk["usage"]
            continue
        assert usage is None
        for choice in chunk["choices"]:
            index = choice["index"]
            delta = choice["delta"]
            state = choices.get(index)
            if state is None:
                assert delta.get("role") == "assistant", "a choice's first chunk says role: assistant"
                state = choices[index] = {
                    "content": delta.get("content"),
                    "reasoning": "",
                    "tool_calls": [],
                    "finish_reason": None,
                    "logprobs": [],
                }
                continue
            assert state["finish_reason"] is None, "nothing after a choice's finish_reason"
            if choice.get("finish_reason") is not None:
                assert delta == {}
                state["finish_reason"] = choice["finish_reason"]
                continue
            if "content" in delta:
                assert isinstance(delta["content"], str), "content is null only in the first chunk"
                state["content"] = (state["content"] or "") + delta["content"]
            if "reasoning_content" in delta:
                assert delta["reasoning"] == delta["reasoning_content"]
                state["reasoning"] += delta["reasoning_content"]
            for call in delta.get("tool_calls") or []:
                if call["index"] == len(state["tool_calls"]):
                    assert call["id"] and call["type"] == "function" and call["function"]["name"]
                    state["tool_calls"].append(
                        {"id": call["id"], "name": call["function"]["name"], "arguments": ""}
                    )
                else:
                    assert call["index"] == len(state["tool_calls"]) - 1 and "id" not in call
                state["tool_calls"][call["index"]]["arguments"] += call["function"].get("arguments", "")
            if choice.get("logprobs"):
                state["logprobs"] += choice["logprobs"]["content"]
    if not errors:
        for index, state in choices.items():
            assert state["finish_reason"] is not None, f"choice {index} has no finish_reason"
    return {
        "choices": [choices[i] for i in sorted(choices)],
        "usage": usage,
        "error": errors[0]["error"] if errors else None,
    }
