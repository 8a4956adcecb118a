"""Harmony → Responses output items: the mapping of each header, and every item valid as its openai type."""

from __future__ import annotations

import re

import pytest
from openai.types.responses import (
    ResponseCodeInterpreterToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_item import McpCall
from support.contract import validate_output_item
from support.harmony_helpers import harmony

from trtllm_responses.harmony import HarmonyEncoding, completion_to_output_items, parse_completion


def items_of(encoding: HarmonyEncoding, completion: str) -> list:
    return completion_to_output_items(parse_completion(encoding, harmony(encoding, completion)))


def test_analysis_becomes_reasoning_with_reasoning_text(encoding: HarmonyEncoding) -> None:
    [item] = items_of(encoding, "<|channel|>analysis<|message|>Let me think.<|end|>")
    assert isinstance(item, ResponseReasoningItem)
    assert item.id.startswith("rs_")
    assert [(c.type, c.text) for c in item.content or []] == [("reasoning_text", "Let me think.")]
    assert item.summary == []


def test_final_becomes_message_with_output_text(encoding: HarmonyEncoding) -> None:
    [item] = items_of(encoding, "<|channel|>final<|message|>Hello!<|return|>")
    assert isinstance(item, ResponseOutputMessage)
    assert item.id.startswith("msg_") and item.role == "assistant" and item.status == "completed"
    assert item.phase == "final_answer"
    assert [(c.type, c.text) for c in item.content] == [("output_text", "Hello!")]


def test_commentary_without_recipient_is_a_preamble_message(encoding: HarmonyEncoding) -> None:
    [item] = items_of(encoding, "<|channel|>commentary<|message|>Checking…<|end|>")
    assert isinstance(item, ResponseOutputMessage)
    assert item.phase == "commentary" and item.content[0].text == "Checking…"


def test_commentary_to_functions_is_a_function_call(encoding: HarmonyEncoding) -> None:
    [item] = items_of(
        encoding,
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
    )
    assert isinstance(item, ResponseFunctionToolCall)
    assert item.name == "get_weather" and item.arguments == '{"city":"Paris"}'
    assert re.fullmatch(r"fc_[0-9a-f]{48}", item.id or "") and re.fullmatch(
        r"call_[0-9a-f]{48}", item.call_id
    )


def test_browser_is_a_web_search_call(encoding: HarmonyEncoding) -> None:
    [item] = items_of(
        encoding, '<|channel|>analysis to=browser.search code<|message|>{"query":"gpt-oss"}<|call|>'
    )
    assert isinstance(item, ResponseFunctionWebSearch)
    assert item.id.startswith("ws_") and item.action.type == "search" and item.action.query == "gpt-oss"


def test_python_is_a_code_interpreter_call(encoding: HarmonyEncoding) -> None:
    [item] = items_of(encoding, "<|channel|>analysis to=python code<|message|>print(2)<|call|>")
    assert isinstance(item, ResponseCodeInterpreterToolCall)
    assert item.id.startswith("ci_") and item.code == "print(2)"


def test_other_recipients_are_mcp_calls(encoding: HarmonyEncoding) -> None:
    [item] = items_of(
        encoding,
        '<|channel|>commentary to=github.search_issues <|constrain|>json<|message|>{"q":"x"}<|call|>',
    )
    assert isinstance(item, McpCall)
    assert item.id.startswith("mcp_") and item.server_label == "github" and item.name == "search_issues"
    assert item.arguments == '{"q":"x"}'


def test_a_message_cut_off_is_incomplete(encoding: HarmonyEncoding) -> None:
    [item] = items_of(encoding, "<|channel|>final<|message|>Half a sent")
    assert item.status == "incomplete" and item.content[0].text == "Half a sent"


def test_ids_are_unique(encoding: HarmonyEncoding) -> None:
    completion = "<|channel|>final<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y<|return|>"
    ids = [item.id for _ in range(50) for item in items_of(encoding, completion)]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    "completion",
    [
        "<|channel|>analysis<|message|>a<|end|>",
        "<|channel|>final<|message|>b<|return|>",
        "<|channel|>commentary<|message|>c<|end|>",
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
        '<|channel|>analysis to=browser.open code<|message|>{"url":"https://x"}<|call|>',
        '<|channel|>analysis to=browser.find code<|message|>{"pattern":"p"}<|call|>',
        "<|channel|>analysis to=python code<|message|>1<|call|>",
        "<|channel|>commentary to=srv.tool json<|message|>{}<|call|>",
    ],
)
def test_every_output_item_validates(encoding: HarmonyEncoding, completion: str) -> None:
    for item in items_of(encoding, completion):
        validate_output_item(item.model_dump(mode="json", exclude_none=True))
