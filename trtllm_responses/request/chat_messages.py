"""Chat ``messages`` → the service's input items (the request edge of ``POST /v1/chat/completions``).

Each message becomes the items ``harmony/input_messages.py`` renders as gpt-oss reads them:
``system``/``developer``/``user`` messages stay messages (text only: gpt-oss reads no images,
audio or files); an ``assistant`` message becomes its reasoning (``reasoning_content``, or
``reasoning`` as vLLM and trtllm-serve send it), its text and one ``function_call`` per tool
call, in the order gpt-oss writes them; a ``tool`` message becomes the ``function_call_output``
of the earlier call its ``tool_call_id`` names. Errors name the chat field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import InvalidRequestError, Stepped
from .dialect import Items, each_message, object_at, string_at

__all__ = ["messages_to_items"]

_TEXT_PART = "text"
_NOT_TEXT = ("image_url", "input_audio", "file")


def _text(content: Any, where: str, *, refusal: bool = False) -> str:
    """The text of a message's ``content``: a string, or text parts (gpt-oss reads text only)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequestError(f"'{where}' must be a string or an array of content parts.", param=where)
    texts = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        part = object_at(part, at)
        kind = part.get("type")
        if kind == _TEXT_PART:
            texts.append(string_at(part, "text", at))
        elif kind == "refusal" and refusal:
            texts.append(string_at(part, "refusal", at))
        elif kind in _NOT_TEXT:
            raise InvalidRequestError(
                f"'{at}' is {kind}, but gpt-oss only reads text; send text parts instead.",
                param=at,
                code="unsupported_content_type",
            )
        else:
            raise InvalidRequestError(
                f"Unknown content part type {kind!r} at '{at}.type'.", param=f"{at}.type"
            )
    return "".join(texts)


def messages_to_items(messages: list[Any]) -> Stepped[Items]:
    """The input items of ``messages``, each with the chat field it came from; work that pauses after each
    message (``core.Stepped``)."""
    items = Items()
    for where, message, role in each_message(messages):
        yield
        if role in ("system", "developer", "user"):
            if "content" not in message:
                raise InvalidRequestError(f"'{where}.content' is required.", param=f"{where}.content")
            text = _text(message["content"], f"{where}.content")
            items.add({"type": "message", "role": role, "content": text}, where)
        elif role == "assistant":
            _assistant(message, where, items)
        elif role == "tool":
            call_id = items.answering(
                string_at(message, "tool_call_id", where), f"{where}.tool_call_id", "tool_calls"
            )
            items.output(call_id, _text(message.get("content", ""), f"{where}.content"), where)
        elif role == "function":
            raise InvalidRequestError(
                f"'{where}.role' 'function' is deprecated and not supported; send 'tool' messages.",
                param=f"{where}.role",
            )
        else:
            raise InvalidRequestError(
                f"'{where}.role' must be one of system, developer, user, assistant, tool; got {role!r}.",
                param=f"{where}.role",
            )
    return items


def _assistant(message: Mapping[str, Any], where: str, items: Items) -> None:
    """An assistant message: its reasoning, its text, its tool calls (the order gpt-oss writes them)."""
    for key in ("reasoning_content", "reasoning"):
        reasoning = message.get(key)
        if reasoning is None:
            continue
        if not isinstance(reasoning, str):
            raise InvalidRequestError(f"'{where}.{key}' must be a string.", param=f"{where}.{key}")
        if reasoning:
            items.add(
                {
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": reasoning}],
                },
                where,
            )
        break
    content = message.get("content")
    if content is not None:
        text = _text(content, f"{where}.content", refusal=True)
        if text:
            items.add({"type": "message", "role": "assistant", "content": text}, where)
    if message.get("function_call") is not None:
        raise InvalidRequestError(
            f"'{where}.function_call' is deprecated and not supported; send 'tool_calls'.",
            param=f"{where}.function_call",
        )
    calls = message.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise InvalidRequestError(f"'{where}.tool_calls' must be an array.", param=f"{where}.tool_calls")
    for k, call in enumerate(calls):
        at = f"{where}.tool_calls[{k}]"
        call = object_at(call, at)
        kind = call.get("type", "function")
        if kind != "function":
            raise InvalidRequestError(f"'{at}.type' must be 'function'; got {kind!r}.", param=f"{at}.type")
        call_id = string_at(call, "id", at)
        function = object_at(call.get("function"), f"{at}.function")
        name = string_at(function, "name", f"{at}.function")
        items.call(call_id, name, string_at(function, "arguments", f"{at}.function"), at)
