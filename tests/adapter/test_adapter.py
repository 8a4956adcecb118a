"""Request → Harmony prompt: golden renders against openai-harmony's own rendering of hand-built conversations."""

from __future__ import annotations

from typing import Any

import pytest
from openai_harmony import (
    Author,
    DeveloperContent,
    Message,
    ReasoningEffort,
    Role,
    SystemContent,
    ToolDescription,
)
from support.harmony_helpers import FIXED_DATE, golden_conversation

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.core.errors import InvalidRequestError
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request

WEATHER_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "parameters": WEATHER_PARAMS,
}


def system(
    effort: ReasoningEffort = ReasoningEffort.MEDIUM, browser: bool = False, python: bool = False
) -> Message:
    content = SystemContent.new().with_reasoning_effort(effort).with_conversation_start_date(FIXED_DATE)
    if browser:
        content = content.with_browser_tool()
    if python:
        content = content.with_python_tool()
    return Message.from_role_and_content(Role.SYSTEM, content)


def developer(instructions: str | None = None, tools: list[ToolDescription] | None = None) -> Message:
    content = DeveloperContent.new()
    if instructions:
        content = content.with_instructions(instructions)
    if tools:
        content = content.with_function_tools(tools)
    return Message.from_role_and_content(Role.DEVELOPER, content)


WEATHER_DESC = ToolDescription.new("get_weather", "Weather now", parameters=WEATHER_PARAMS)


def user(text: str) -> Message:
    return Message.from_role_and_content(Role.USER, text)


def assistant(text: str, channel: str) -> Message:
    return Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)


def call(name: str, args: str) -> Message:
    return (
        Message.from_role_and_content(Role.ASSISTANT, args)
        .with_channel("commentary")
        .with_recipient(f"functions.{name}")
        .with_content_type("<|constrain|>json")
    )


def tool_output(name: str, output: str) -> Message:
    return (
        Message.from_author_and_content(Author.new(Role.TOOL, f"functions.{name}"), output)
        .with_recipient("assistant")
        .with_channel("commentary")
    )


def golden(encoding: HarmonyEncoding, messages: list[Message]) -> list[int]:
    return golden_conversation(encoding, messages)


def render(adapter: HarmonyAdapter, body: dict[str, Any]) -> list[int]:
    return adapter.build_prompt(parse_request(body)).token_ids


CASES: list[tuple[str, dict[str, Any], list[Message]]] = [
    ("string input", {"input": "Hi"}, [system(), user("Hi")]),
    (
        "effort and instructions",
        {"input": "Hi", "instructions": "Be terse.", "reasoning": {"effort": "high"}},
        [system(ReasoningEffort.HIGH), developer("Be terse."), user("Hi")],
    ),
    (
        "easy message without type, list content",
        {
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
                }
            ]
        },
        [system(), Message.from_role_and_contents(Role.USER, [user("a").content[0], user("b").content[0]])],
    ),
    (
        "system and developer input messages become instructions",
        {
            "instructions": "First.",
            "input": [
                {"role": "system", "content": "Second."},
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "Third."}],
                },
                {"role": "user", "content": "Hi"},
            ],
        },
        [system(), developer("First.\n\nSecond.\n\nThird."), user("Hi")],
    ),
    (
        "function tools",
        {"input": "Weather?", "tools": [WEATHER_TOOL]},
        [system(), developer(tools=[WEATHER_DESC]), user("Weather?")],
    ),
    (
        "tool_choice none renders no tools",
        {"input": "Hi", "tools": [WEATHER_TOOL], "tool_choice": "none"},
        [system(), user("Hi")],
    ),
    (
        "named tool_choice narrows the functions",
        {
            "input": "Hi",
            "tools": [
                WEATHER_TOOL,
                {"type": "function", "name": "other", "parameters": {"type": "object", "properties": {}}},
            ],
            "tool_choice": {"type": "function", "name": "get_weather"},
        },
        [system(), developer(tools=[WEATHER_DESC]), user("Hi")],
    ),
    (
        "hosted tools this server does not run are not shown",
        {
            "input": "Hi",
            "tools": [
                {"type": "web_search_preview"},
                {"type": "code_interpreter", "container": {"type": "auto"}},
            ],
        },
        [system(), user("Hi")],
    ),
    (
        "assistant, refusal and output_text content; preamble phase",
        {
            "input": [
                {"role": "user", "content": "Hi"},
                {
                    "type": "message",
                    "role": "assistant",
                    "phase": "commentary",
                    "content": [{"type": "output_text", "text": "Checking."}],
                },
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
                {"role": "user", "content": "Why?"},
            ]
        },
        [system(), user("Hi"), assistant("Checking.", "commentary"), assistant("No.", "final"), user("Why?")],
    ),
    (
        "function call and output, reasoning kept inside the tool-calling turn",
        {
            "tools": [WEATHER_TOOL],
            "input": [
                {"role": "user", "content": "Weather?"},
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "Call it."}],
                },
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city":"Paris"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "21C"},
            ],
        },
        [
            system(),
            developer(tools=[WEATHER_DESC]),
            user("Weather?"),
            assistant("Call it.", "analysis"),
            call("get_weather", '{"city":"Paris"}'),
            tool_output("get_weather", "21C"),
        ],
    ),
    (
        "reasoning before an earlier final is dropped; summary used when no content",
        {
            "input": [
                {"role": "user", "content": "Q1"},
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "Thought."}],
                },
                {"role": "assistant", "content": [{"type": "output_text", "text": "A1"}]},
                {"role": "user", "content": "Q2"},
            ]
        },
        [system(), user("Q1"), assistant("Thought.", "analysis"), assistant("A1", "final"), user("Q2")],
    ),
    (
        "function_call_output with a list of input_text parts",
        {
            "input": [
                {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "c",
                    "output": [{"type": "input_text", "text": "21"}, {"type": "input_text", "text": "C"}],
                },
            ],
            "tools": [WEATHER_TOOL],
        },
        [
            system(),
            developer(tools=[WEATHER_DESC]),
            call("get_weather", "{}"),
            tool_output("get_weather", "21C"),
        ],
    ),
]


@pytest.mark.parametrize("body, messages", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_prompt_equals_openai_harmony_render(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding, body: dict, messages: list[Message]
) -> None:
    ours = render(adapter, body)
    expected = golden(encoding, messages)
    assert encoding.decode(ours) == encoding.decode(expected)
    assert ours == expected


def test_prompt_ends_with_assistant_start_and_one_system_message(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    text = encoding.decode(
        render(adapter, {"input": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]})
    )
    assert text.endswith("<|start|>assistant")
    assert text.count("<|start|>system") == 1


def test_stop_tokens_are_harmony_assistant_action_stops(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    assert set(adapter.stop_token_ids) == {encoding.return_, encoding.call}


BAD_INPUTS = [
    (
        {"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]},
        "input[0].call_id",
        "No tool call found",
    ),
    (
        {"input": [{"type": "item_reference", "id": "msg_1"}]},
        "input[0].type",
        "Unknown or unsupported input item type",
    ),
    ({"input": [{"type": "banana"}]}, "input[0].type", "Unknown or unsupported"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]},
        "input[0].content[0]",
        "only reads text",
    ),
    (
        {
            "input": [
                {"role": "user", "content": "a"},
                {
                    "role": "user",
                    "content": [{"type": "input_text", "text": "b"}, {"type": "input_file", "file_id": "f"}],
                },
            ]
        },
        "input[1].content[1]",
        "only reads text",
    ),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role", "must be one of"),
    ({"input": [{"role": "user"}]}, "input[0].content", "is required"),
    (
        {"input": [{"type": "function_call", "call_id": "c", "name": "f"}]},
        "input[0].arguments",
        "must be a string",
    ),
    (
        {"input": "x", "tools": [{"type": "teleport", "destination": "moon"}]},
        "tools[0].type",
        "Unknown tool type",
    ),
    (
        {"input": "x", "tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "name": "nope"}},
        "tool_choice.name",
        "not in tools",
    ),
]


@pytest.mark.parametrize("body, param, message", BAD_INPUTS, ids=[b[1] + ":" + b[2] for b in BAD_INPUTS])
def test_bad_input_is_a_typed_error_naming_the_field(
    adapter: HarmonyAdapter, body: dict, param: str, message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message) as info:
        render(adapter, body)
    assert info.value.param == param
    assert info.value.status_code == 400


@pytest.mark.parametrize(
    "body, param",
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        ({"input": 5}, "input"),
        ({"input": "x", "temperature": 3}, "temperature"),
        ({"input": "x", "stream": "yes"}, "stream"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({"input": "x", "tool_choice": "sometimes"}, "tool_choice"),
        ({"input": "x", "background": True, "store": False}, "background"),
    ],
)
def test_bad_request_fields_are_typed_errors(body: Any, param: str | None) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request(body)
    assert info.value.param == param


def test_unknown_top_level_fields_are_ignored() -> None:
    assert parse_request({"input": "x", "some_new_field": 1}).input == "x"
