"""Text content on a ``chat`` span, only when the operator opted in (``tracing.capture_content()``).

docs/tracing-and-dashboards.md#spans. With ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` a
``chat`` span carries ``gen_ai.system_instructions``, ``gen_ai.input.messages`` (the turn's own input
items, not the history a ``previous_response_id`` or ``conversation`` brings) and
``gen_ai.output.messages`` (the items its generation wrote), as JSON in the GenAI conventions' shape:
``[{"role": ..., "parts": [{"type": "text", "content": ...}, {"type": "tool_call", "id", "name",
"arguments"}, {"type": "tool_call_response", "id", "response"}, ...]}]``. Each attribute is at most
:data:`MAX_CONTENT_CHARS` characters of JSON: past it, every string is cut to an equal share (ending
``…``), then the oldest messages are left out. Never called when the operator has not opted in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

__all__ = ["MAX_CONTENT_CHARS", "bounded_json", "input_messages", "output_messages", "system_instructions"]

#: The largest JSON one content attribute holds (characters).
MAX_CONTENT_CHARS = 32 << 10
_CUT = "…"
_ROLES = {"developer": "system"}


def _text(content: Any) -> list[dict[str, Any]]:
    """A message's content as text parts (its text, input_text, output_text parts; others by type)."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        text = part.get("text")
        if isinstance(text, str):
            parts.append({"type": "text", "content": text})
        else:
            parts.append({"type": str(part.get("type", "unknown"))})
    return parts


def _message(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """One item (an input item's or an output item's JSON) as a GenAI message; None: nothing to show."""
    kind = item.get("type", "message")
    if kind == "message":
        role = str(item.get("role", "user"))
        return {"role": _ROLES.get(role, role), "parts": _text(item.get("content"))}
    if kind in ("function_call", "custom_tool_call", "mcp_call"):
        arguments = item.get("arguments", item.get("input"))
        call = {"type": "tool_call", "id": item.get("call_id", item.get("id")), "name": item.get("name")}
        return {"role": "assistant", "parts": [{**call, "arguments": arguments}]}
    if kind in ("function_call_output", "custom_tool_call_output"):
        part = {"type": "tool_call_response", "id": item.get("call_id"), "response": item.get("output")}
        return {"role": "tool", "parts": [part]}
    if kind == "reasoning":
        texts = [c.get("text") for c in item.get("content") or () if isinstance(c, Mapping)]
        return {"role": "assistant", "parts": [{"type": "reasoning", "content": "".join(map(str, texts))}]}
    return None


def input_messages(items: str | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A request's ``input`` (its text, or its items' JSON) as GenAI input messages."""
    if isinstance(items, str):
        return [{"role": "user", "parts": [{"type": "text", "content": items}]}]
    return [m for m in map(_message, items) if m is not None]


def output_messages(items: Iterable[Mapping[str, Any]], finish_reason: str) -> list[dict[str, Any]]:
    """A generation's output items as one GenAI output message (the conventions' shape)."""
    parts = [part for m in map(_message, items) if m is not None for part in m["parts"]]
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason}]


def system_instructions(instructions: str) -> list[dict[str, Any]]:
    """``instructions`` as the conventions' ``gen_ai.system_instructions`` parts."""
    return [{"type": "text", "content": instructions}]


def _strings(value: Any) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, Mapping):
        return sum(_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(_strings(v) for v in value)
    return 0


def _cut(value: Any, share: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= share else value[: max(share - 1, 0)] + _CUT
    if isinstance(value, Mapping):
        return {k: _cut(v, share) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, share) for v in value]
    return value


def bounded_json(messages: Sequence[Any], limit: int = MAX_CONTENT_CHARS) -> str:
    """``messages`` as JSON of at most ``limit`` characters (the module docstring says how it is cut)."""
    text = orjson.dumps(messages).decode()
    if len(text) <= limit:
        return text
    share = max(limit // max(_strings(messages), 1) - 16, 16)
    cut = [orjson.dumps(m).decode() for m in _cut(list(messages), share)]
    size, first = 2, len(cut)  # "[" and "]"; the newest messages that fit, each with its comma
    while first > 0 and size + len(cut[first - 1]) + 1 <= limit:
        first -= 1
        size += len(cut[first]) + 1
    return "[" + ",".join(cut[first:]) + "]"
