"""responses/span_content.py: the text an operator opted into, in the GenAI conventions' shape and bounded."""

from __future__ import annotations

import json

from trtllm_responses.responses.span_content import (
    MAX_CONTENT_CHARS,
    bounded_json,
    input_messages,
    output_messages,
)


def test_items_become_genai_messages() -> None:
    items = [
        {"type": "message", "role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "input_text", "text": "weather?"}, {"type": "input_image"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "item_reference", "id": "msg_1"},
    ]
    assert input_messages(items) == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": "weather?"}, {"type": "input_image"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]},
    ]
    assert input_messages("hi") == [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    written = output_messages(
        [
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "think"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        ],
        "stop",
    )
    assert written == [
        {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": "think"}, {"type": "text", "content": "done"}],
            "finish_reason": "stop",
        }
    ]


def test_content_is_bounded_by_cutting_strings_then_the_oldest_messages() -> None:
    small = input_messages("hello")
    assert bounded_json(small) == json.dumps(small, separators=(",", ":"))
    huge = input_messages([{"role": "user", "content": "x" * 100_000}, {"role": "user", "content": "last"}])
    text = bounded_json(huge)
    assert len(text) <= MAX_CONTENT_CHARS
    kept = json.loads(text)
    assert kept[0]["parts"][0]["content"].endswith("…") and kept[1]["parts"][0]["content"] == "last"
    many = input_messages([{"role": "user", "content": f"message {i}"} for i in range(5_000)])
    kept = json.loads(bounded_json(many, limit=2_000))
    assert len(json.dumps(kept, separators=(",", ":"))) <= 2_000
    assert kept[-1]["parts"][0]["content"] == "message 4999"  # the newest kept, the oldest left out
