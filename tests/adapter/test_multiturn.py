"""Multi-turn fidelity: replaying output items statelessly renders exactly what a stored continuation renders."""

from __future__ import annotations

from typing import Any

import pytest
from openai_harmony import Message, Role
from support.harmony_helpers import golden_conversation, harmony

from trtllm_responses.adapter import EMPTY_HISTORY, HarmonyAdapter
from trtllm_responses.harmony import HarmonyEncoding, completion_to_output_items, parse_completion
from trtllm_responses.request.protocol import parse_request

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]

# Each turn: the new input items, and the Harmony completion the model answers with.
FIXTURES: dict[str, list[tuple[list[dict[str, Any]], str]]] = {
    "plain chat": [
        ([{"role": "user", "content": "Hi"}], "<|channel|>final<|message|>Hello!<|return|>"),
        ([{"role": "user", "content": "How are you?"}], "<|channel|>final<|message|>Fine.<|return|>"),
        ([{"role": "user", "content": "Bye"}], "<|channel|>final<|message|>Bye!<|return|>"),
    ],
    "reasoning then final": [
        (
            [{"role": "user", "content": "2+2?"}],
            "<|channel|>analysis<|message|>Simple sum.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>",
        ),
        (
            [{"role": "user", "content": "Times 3?"}],
            "<|channel|>analysis<|message|>4*3.<|end|><|start|>assistant<|channel|>final<|message|>12<|return|>",
        ),
        ([{"role": "user", "content": "Thanks"}], "<|channel|>final<|message|>Welcome.<|return|>"),
    ],
    "tool call, output, final": [
        (
            [{"role": "user", "content": "Weather in Paris?"}],
            "<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
        ),
        (
            [{"type": "function_call_output", "call_id": "$call0", "output": '{"temp": 21}'}],
            "<|channel|>analysis<|message|>21 degrees.<|end|><|start|>assistant<|channel|>final<|message|>21°C in Paris.<|return|>",
        ),
        (
            [{"role": "user", "content": "And tomorrow?"}],
            "<|channel|>final<|message|>I can only see now.<|return|>",
        ),
    ],
    "preamble then tool call": [
        (
            [{"role": "user", "content": "Weather in Oslo?"}],
            "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>',
        ),
        (
            [{"type": "function_call_output", "call_id": "$call0", "output": "-3"}],
            "<|channel|>final<|message|>-3°C.<|return|>",
        ),
    ],
    "multibyte unicode": [
        (
            [{"role": "user", "content": "Grüße 你好 😀"}],
            "<|channel|>analysis<|message|>Ünïcödé 🤔<|end|><|start|>assistant<|channel|>final<|message|>你好！😀 ∑x²<|return|>",
        ),
        ([{"role": "user", "content": "Ещё раз"}], "<|channel|>final<|message|>Ещё 😀<|return|>"),
    ],
}


def without_finished_analysis(messages: list[Message]) -> list[Message]:
    """The documented gpt-oss rule, written out by hand: drop analysis that precedes the last final."""
    finals = [i for i, m in enumerate(messages) if m.author.role == Role.ASSISTANT and m.channel == "final"]
    last = finals[-1] if finals else -1
    return [m for i, m in enumerate(messages) if not (m.channel == "analysis" and i < last)]


def _resolve(items: list[dict[str, Any]], calls: list[str]) -> list[dict[str, Any]]:
    return [
        {**item, "call_id": calls[int(item["call_id"][5:])]}
        if str(item.get("call_id", "")).startswith("$call")
        else item
        for item in items
    ]


@pytest.mark.parametrize("name", list(FIXTURES))
def test_stateless_replay_equals_stored_continuation(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding, name: str
) -> None:
    history = EMPTY_HISTORY
    replayed: list[dict[str, Any]] = []
    calls: list[str] = []
    for new_input, completion in FIXTURES[name]:
        new_input = _resolve(new_input, calls)
        body = {"tools": TOOLS, "instructions": "Be brief."}
        stored = adapter.build_prompt(parse_request({**body, "input": new_input}), history)
        replayed += new_input
        stateless = adapter.build_prompt(parse_request({**body, "input": replayed}))
        assert encoding.decode(stateless.token_ids) == encoding.decode(stored.token_ids)
        assert stateless.token_ids == stored.token_ids

        # And both equal openai-harmony's own render of the conversation with finished turns' analysis removed.
        golden = golden_conversation(encoding, without_finished_analysis(stored.messages))
        assert stored.token_ids == golden

        items = [
            i.model_dump(mode="json", exclude_none=True)
            for i in completion_to_output_items(parse_completion(encoding, harmony(encoding, completion)))
        ]
        calls += [i["call_id"] for i in items if i["type"] == "function_call"]
        history = adapter.continue_history(stored, items)
        replayed += items


def test_chain_of_thought_follows_harmony_rules(adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    history = EMPTY_HISTORY
    turns = FIXTURES["tool call, output, final"]
    texts = []
    calls: list[str] = []
    for new_input, completion in turns:
        prompt = adapter.build_prompt(
            parse_request({"tools": TOOLS, "input": _resolve(new_input, calls)}), history
        )
        texts.append(encoding.decode(prompt.token_ids))
        items = [
            i.model_dump(mode="json", exclude_none=True)
            for i in completion_to_output_items(parse_completion(encoding, harmony(encoding, completion)))
        ]
        calls += [i["call_id"] for i in items if i["type"] == "function_call"]
        history = adapter.continue_history(prompt, items)
    # Turn 2 continues the tool-calling turn: its analysis is kept.
    assert "Need the tool." in texts[1]
    # Turn 3 comes after a final: the earlier turn's analysis is dropped, the final kept.
    assert "Need the tool." not in texts[2] and "21 degrees." not in texts[2]
    assert "21°C in Paris." in texts[2]


def test_function_call_output_matches_calls_from_history(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    new_input, completion = FIXTURES["tool call, output, final"][0]
    prompt = adapter.build_prompt(parse_request({"tools": TOOLS, "input": new_input}))
    items = [
        i.model_dump(mode="json", exclude_none=True)
        for i in completion_to_output_items(parse_completion(encoding, harmony(encoding, completion)))
    ]
    history = adapter.continue_history(prompt, items)
    call_id = items[-1]["call_id"]
    assert history.calls[call_id] == "functions.get_weather"
    follow = adapter.build_prompt(
        parse_request({"input": [{"type": "function_call_output", "call_id": call_id, "output": "1"}]}),
        history,
    )
    assert encoding.decode(follow.token_ids).endswith(
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>1<|end|><|start|>assistant"
    )


def test_every_finished_turn_loses_its_analysis(adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    """openai-harmony 0.0.8 only drops analysis before the *first* final; gpt-oss wants every finished turn's dropped."""
    history = EMPTY_HISTORY
    texts = []
    for new_input, completion in FIXTURES["reasoning then final"]:
        prompt = adapter.build_prompt(parse_request({"input": new_input}), history)
        texts.append(encoding.decode(prompt.token_ids))
        items = [
            i.model_dump(mode="json", exclude_none=True)
            for i in completion_to_output_items(parse_completion(encoding, harmony(encoding, completion)))
        ]
        history = adapter.continue_history(prompt, items)
    assert "Simple sum." not in texts[1]
    assert "Simple sum." not in texts[2] and "4*3." not in texts[2]
    assert (
        "<|channel|>final<|message|>4<|end|>" in texts[2]
        and "<|channel|>final<|message|>12<|end|>" in texts[2]
    )


def test_a_new_tool_calling_turn_keeps_only_its_own_analysis(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    body = {
        "tools": TOOLS,
        "input": [
            {"role": "user", "content": "Hi"},
            {
                "type": "reasoning",
                "id": "rs_a",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "OLD"}],
            },
            {"role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
            {"role": "user", "content": "Weather?"},
            {
                "type": "reasoning",
                "id": "rs_b",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "NEW"}],
            },
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
    }
    text = encoding.decode(adapter.build_prompt(parse_request(body)).token_ids)
    assert "OLD" not in text and "<|channel|>analysis<|message|>NEW<|end|>" in text


def test_long_stored_conversation_equals_a_full_render_every_turn(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """~30k tokens of turns (plain, reasoning, tool calls answered), continued from the stored history each time."""
    from trtllm_responses.executors.echo import EchoExecutor

    echo = EchoExecutor(encoding)
    history = EMPTY_HISTORY
    pending_call = None
    turn = 0
    while history.num_tokens < 30_000:
        if pending_call:
            new_input = [{"type": "function_call_output", "call_id": pending_call, "output": "ok " * 50}]
        elif turn % 3 == 1:
            new_input = [{"role": "user", "content": f"weather {turn}"}]
        else:
            new_input = [{"role": "user", "content": f"Turn {turn}: " + "lorem ipsum dolor " * 400}]
        body = {"input": new_input, "tools": TOOLS if turn % 3 == 1 else []}
        prompt = adapter.build_prompt(parse_request(body), history)
        golden = golden_conversation(encoding, without_finished_analysis(prompt.messages))
        assert prompt.token_ids == golden, f"turn {turn}"
        items = [
            i.model_dump(mode="json", exclude_none=True)
            for i in completion_to_output_items(parse_completion(encoding, echo.plan(prompt.token_ids)))
        ]
        calls = [i["call_id"] for i in items if i["type"] == "function_call"]
        pending_call = calls[-1] if calls else None
        history = adapter.continue_history(prompt, items)
        turn += 1
    assert turn > 10
