"""Input items as ``GET /v1/responses/{id}/input_items`` lists them.

The request's ``input`` (a string or items in any accepted shape) becomes a
list of ``ResponseItem``-shaped dicts, each with an id: messages get their
content as typed parts, tool calls and outputs a ``status``. Items keep the
id the client gave; the others get a fresh one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import Stepped, at_once, new_id
from .items import (
    CodeInterpreterCall,
    FunctionCall,
    FunctionCallOutput,
    InputItem,
    Message,
    Reasoning,
    WebSearchCall,
)

__all__ = ["input_as_items", "normalize_input_items", "normalized_input_items", "normalized_item"]

_ID_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
    "web_search_call": "ws",
    "code_interpreter_call": "ci",
    "mcp_call": "mcp",
    "configuration_update": "cfg",
}


def _parts(content: Any, text_type: str) -> list[Any]:
    if isinstance(content, str):
        part: dict[str, Any] = {"type": text_type, "text": content}
        if text_type == "output_text":
            part["annotations"] = []
        return [part]
    parts = []
    for part in content:
        if text_type == "output_text" and part.get("type") == "output_text" and "annotations" not in part:
            part = {**part, "annotations": []}
        parts.append(part)
    return parts


def normalize_input_items(input: str | Sequence[InputItem]) -> list[dict[str, Any]]:
    """``input`` as a list of ResponseItem dicts with ids (input already checked by the adapter)."""
    return at_once(normalized_input_items(input))


def normalized_input_items(input: str | Sequence[InputItem]) -> Stepped[list[dict[str, Any]]]:
    """:func:`normalize_input_items` as work that pauses after each item (``core.Stepped``)."""
    items = []
    for typed in input_as_items(input):
        yield
        items.append(normalized_item(typed))
    return items


def input_as_items(input: str | Sequence[InputItem]) -> Sequence[InputItem]:
    """``input`` as items: a string is one user message."""
    if isinstance(input, str):
        return (Message({"type": "message", "role": "user", "content": input}),)
    return input


def normalized_item(typed: InputItem) -> dict[str, Any]:
    """One item as a ResponseItem dict, with the id the client gave or a fresh one."""
    item = dict(typed.data)
    kind = item.setdefault("type", typed.TYPE)
    item.setdefault("id", new_id(_ID_PREFIX.get(kind, "item")))
    if isinstance(typed, Message):
        assistant = item.get("role") == "assistant"
        item["content"] = _parts(item.get("content", ""), "output_text" if assistant else "input_text")
        item.setdefault("status", "completed")
    elif isinstance(typed, (FunctionCall, FunctionCallOutput, WebSearchCall, CodeInterpreterCall)):
        item.setdefault("status", "completed")
    elif isinstance(typed, Reasoning):
        item.setdefault("summary", [])
    return item
