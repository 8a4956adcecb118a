"""Anthropic ``system`` and ``messages`` → the service's input items (the request edge of ``POST /v1/messages``).

Each message becomes the items ``harmony/input_messages.py`` renders as gpt-oss reads them (gathered
in a ``dialect.Items``, as ``chat_messages.py`` does for chat): a ``user`` message's text blocks one
user message, its ``tool_result`` blocks the ``function_call_output`` of the earlier ``tool_use`` each names (an
``is_error`` result reads ``Error: ...``); an ``assistant`` message's ``thinking`` block becomes a
reasoning item whose ``encrypted_content`` is the block's ``signature`` (opened, so verified, by
the service's sealer as any encrypted reasoning is), a ``redacted_thinking`` block the same from
its ``data``, its text blocks an assistant message and each ``tool_use`` a ``function_call``, in
the order written. A ``system`` message in ``messages`` (Claude Code sends them mid-conversation)
joins the instructions. Errors name the Anthropic field (``messages[2].content[0].tool_use_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ..core import InvalidRequestError, Stepped
from .dialect import Items, each_message, object_at, string_at

__all__ = ["BILLING_HEADER", "IMAGE_OMITTED", "anthropic_items", "system_text"]

#: Claude Code's first system block, ``x-anthropic-billing-header: cc_version=2.1.332.28c; …``: a header for
#: Anthropic's billing, not a prompt, whose suffix changes with every request. Left in, it would make each
#: prompt differ from its first instructions on, and no request would reuse another's KV cache.
BILLING_HEADER = "x-anthropic-billing-header:"

#: What an image or document inside a tool result reads as (gpt-oss reads text only; a 400 would break
#: every later turn of a client that replays its history, as on ``/v1/responses``).
IMAGE_OMITTED = "[{kind} omitted: this model reads text only]"
_NOT_TEXT = frozenset({"image", "document", "search_result", "container_upload"})


def system_text(system: Any) -> str:
    """The text of ``system``: a string, or text blocks (joined by blank lines; a :data:`BILLING_HEADER`
    block is left out)."""
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise InvalidRequestError("'system' must be a string or an array of text blocks.", param="system")
    texts = []
    for j, block in enumerate(system):
        at = f"system[{j}]"
        block = object_at(block, at)
        if block.get("type") != "text":
            raise InvalidRequestError(
                f"'{at}.type' must be 'text'; got {block.get('type')!r}.", param=f"{at}.type"
            )
        text = string_at(block, "text", at)
        if not text.startswith(BILLING_HEADER):
            texts.append(text)
    return "\n\n".join(texts)


def _blocks(content: Any, where: str) -> list[Mapping[str, Any]]:
    """A message's ``content`` as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidRequestError(f"'{where}' must be a string or an array of content blocks.", param=where)
    return [object_at(block, f"{where}[{j}]") for j, block in enumerate(content)]


def _not_text(kind: str, at: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"'{at}' is {kind}, but gpt-oss only reads text; send text blocks instead.",
        param=at,
        code="unsupported_content_type",
    )


def _unknown(kind: Any, at: str, role: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"Unknown or unsupported content block type {kind!r} in a {role} message at '{at}.type'.",
        param=f"{at}.type",
    )


def _tool_result_text(block: Mapping[str, Any], at: str) -> str:
    """What a ``tool_result`` says: its text; images and documents as a placeholder; ``is_error`` marked."""
    content = block.get("content", "")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            part = object_at(part, f"{at}.content[{k}]")
            kind = part.get("type")
            if kind == "text":
                parts.append(string_at(part, "text", f"{at}.content[{k}]"))
            else:  # an image, a document, a tool reference: nothing gpt-oss reads
                parts.append(IMAGE_OMITTED.format(kind=kind if isinstance(kind, str) else "content"))
        text = "\n".join(parts)
    else:
        raise InvalidRequestError(
            f"'{at}.content' must be a string or an array of content blocks.", param=f"{at}.content"
        )
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise InvalidRequestError(f"'{at}.is_error' must be a boolean.", param=f"{at}.is_error")
    return f"Error: {text}" if is_error else text


def anthropic_items(messages: list[Any]) -> Stepped[Items]:
    """The input items of ``messages``, each with the Anthropic field it came from; work that pauses after
    each message (``core.Stepped``)."""
    items = Items()
    for where, message, role in each_message(messages):
        yield
        if "content" not in message:
            raise InvalidRequestError(f"'{where}.content' is required.", param=f"{where}.content")
        blocks = _blocks(message["content"], f"{where}.content")
        if role == "user":
            _user(blocks, f"{where}.content", items)
        elif role == "assistant":
            _assistant(blocks, f"{where}.content", items)
        elif role == "system":
            texts = []
            for j, block in enumerate(blocks):
                at = f"{where}.content[{j}]"
                if block.get("type") != "text":
                    raise _unknown(block.get("type"), at, "system")
                texts.append(string_at(block, "text", at))
            items.add({"type": "message", "role": "system", "content": "\n\n".join(texts)}, where)
        else:
            raise InvalidRequestError(
                f"'{where}.role' must be one of user, assistant; got {role!r}.", param=f"{where}.role"
            )
    return items


def _user(blocks: list[Mapping[str, Any]], where: str, items: Items) -> None:
    """A user message: its tool results (in order, as tool messages), then its text as one user message."""
    texts: list[str] = []
    first_text = None
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type")
        if kind == "text":
            texts.append(string_at(block, "text", at))
            first_text = first_text or at
        elif kind == "tool_result":
            call_id = items.answering(
                string_at(block, "tool_use_id", at), f"{at}.tool_use_id", "tool_use block"
            )
            items.output(call_id, _tool_result_text(block, at), at)
        elif kind in _NOT_TEXT:
            raise _not_text(kind, at)
        else:
            raise _unknown(kind, at, "user")
    if texts:
        items.add({"type": "message", "role": "user", "content": "\n\n".join(texts)}, first_text or where)


def _assistant(blocks: list[Mapping[str, Any]], where: str, items: Items) -> None:
    """An assistant message: its thinking, text and tool uses, in the order written."""
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type")
        if kind == "text":
            text = string_at(block, "text", at)
            if text:
                items.add({"type": "message", "role": "assistant", "content": text}, at)
        elif kind == "thinking":
            string_at(block, "thinking", at)  # the text is what the signature seals: it is read from there
            signature = string_at(block, "signature", at)
            items.add({"type": "reasoning", "summary": [], "encrypted_content": signature}, f"{at}.signature")
        elif kind == "redacted_thinking":
            data = string_at(block, "data", at)
            items.add({"type": "reasoning", "summary": [], "encrypted_content": data}, f"{at}.data")
        elif kind == "tool_use":
            call_id = string_at(block, "id", at)
            name = string_at(block, "name", at)
            arguments = block.get("input", {})
            if not isinstance(arguments, Mapping):
                raise InvalidRequestError(f"'{at}.input' must be an object.", param=f"{at}.input")
            items.call(call_id, name, orjson.dumps(arguments).decode(), at)
        else:
            raise _unknown(kind, at, "assistant")
