"""Rendered input items found again by their content (docs/agents-and-long-sessions.md#replayed-histories).

Clients that replay the whole conversation every turn (Codex, the Agents SDK: ``store: false``, no
``previous_response_id``) send the same items again and again. :class:`ItemRenders` keeps what an
item rendered to (its Harmony messages' tokens, the calls it declared), keyed by the item's JSON
itself (found again only when equal to the byte: no digest can collide) and what its rendering read
from the conversation (a tool output's recipient), so a turn converts and tokenizes only the items
the process has not seen. Bounded in bytes (an LRU);
admitted only with an accepted prompt, like the developer-message cache.

Only items whose rendering reads nothing but themselves (and, for outputs, their call's recipient)
are kept: user and assistant messages, function and custom tool calls and their outputs, and
reasoning. Everything else converts as before, every time. Harmony's rules that depend on a
message's position (earlier turns' analysis dropped) are applied when the prompt is assembled,
over the cached and new messages alike, so a prompt is the same token for token either way.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core import ByteBoundedCache, Stepped, at_once
from ..harmony import ConvertedInput, convert_item, input_to_messages
from ..request import (
    CustomToolCall,
    CustomToolCallOutput,
    FunctionCall,
    FunctionCallOutput,
    InputItem,
    Message,
    Reasoning,
)
from .prompt import CachedItem, ItemKey, RenderedMessage

__all__ = [
    "DEFAULT_RENDER_CACHE_BYTES",
    "ConvertedItems",
    "ItemKey",
    "ItemRenders",
    "convert_items",
    "converted_items",
]

#: ``--render_cache_bytes`` when not set: ~170 Codex sessions of 120k tokens (~1.5 MB of renders each).
DEFAULT_RENDER_CACHE_BYTES = 256 << 20

_CALLS = (FunctionCall, CustomToolCall)


@dataclass(slots=True)
class ConvertedItems:
    """A request's input converted with the cache: new messages to render, and where cached ones go.

    ``layout`` is the conversation's new messages in order: a :class:`RenderedMessage` found in the
    cache, or the index of a message of ``converted.messages`` still to render. ``pending`` says
    which rendered messages make up each item missed, to admit once the prompt is accepted.
    """

    converted: ConvertedInput
    layout: list[RenderedMessage | int] = field(default_factory=list)
    pending: list[tuple[ItemKey, int, int, tuple[tuple[str, str], ...]]] = field(default_factory=list)
    hits: int = 0
    #: JSON bytes of the items converted here (not found): what rendering them will cost.
    new_bytes: int = 0


class ItemRenders:
    """The process's rendered input items, by content, bounded by ``max_bytes``."""

    def __init__(self, max_bytes: int = DEFAULT_RENDER_CACHE_BYTES) -> None:
        self._cache: ByteBoundedCache[CachedItem] = ByteBoundedCache(max_bytes)
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        """Bytes held now (the entries' own accounting: messages, tokens, keys)."""
        return self._cache.bytes

    @property
    def max_bytes(self) -> int:
        return self._cache.max_bytes

    def __len__(self) -> int:
        return len(self._cache)

    def get(self, key: ItemKey) -> CachedItem | None:
        return self._cache.get(key)

    def admit(self, entries: Sequence[tuple[ItemKey, CachedItem]]) -> None:
        """Keep the renders of an accepted prompt's new items (each counts its key: the item's JSON)."""
        at_once(self.admitting(entries))

    def admitting(self, entries: Sequence[tuple[ItemKey, CachedItem]]) -> Stepped[None]:
        """:meth:`admit` as work that pauses after each item (``core.Stepped``)."""
        for key, entry in entries:
            yield
            _, kind, context, raw = key
            size = sys.getsizeof(key) + sys.getsizeof(context) + sys.getsizeof(raw)
            self._cache.admit(key, entry, entry.nbytes + size)


#: Item kinds whose render is kept, by type: what their render reads besides the item itself.
_SELF, _ROLE, _RECIPIENT = 0, 1, 2
_KEPT: dict[type[InputItem], tuple[str, int]] = {
    Message: ("message", _ROLE),
    FunctionCall: ("function_call", _SELF),
    CustomToolCall: ("custom_tool_call", _SELF),
    Reasoning: ("reasoning", _SELF),
    FunctionCallOutput: ("function_call_output", _RECIPIENT),
    CustomToolCallOutput: ("custom_tool_call_output", _RECIPIENT),
}


def _context(item: InputItem, reads: int, converted: ConvertedInput, known: Mapping[str, str]) -> str | None:
    """What rendering ``item`` reads besides itself ("" for nothing), or None if it is not kept."""
    if reads == _SELF:
        return ""
    if reads == _ROLE:  # system and developer messages become instructions, not messages
        return "" if item.data.get("role") in ("user", "assistant") else None
    call_id = item.data.get("call_id")
    if not isinstance(call_id, str):
        return None  # an output without a call (Codex's goals): converted every time
    return converted.calls.get(call_id) or known.get(call_id)


def convert_items(
    items: str | Sequence[InputItem],
    known_calls: Mapping[str, str],
    cache: ItemRenders | None,
    param: str = "input",
    scope: str = "",
) -> ConvertedItems:
    """:func:`converted_items` run whole."""
    return at_once(converted_items(items, known_calls, cache, param, scope))


def converted_items(
    items: str | Sequence[InputItem],
    known_calls: Mapping[str, str],
    cache: ItemRenders | None,
    param: str = "input",
    scope: str = "",
) -> Stepped[ConvertedItems]:
    """Convert ``items`` into Harmony messages, taking each cached item's render instead of converting it;
    work that pauses after each item (``core.Stepped``: 20,000 items are ~0.3 s of it).

    Only renders cached for ``scope`` (the requesting tenant's, ``Tenant.scope``) are found, and those made
    here are kept for it: a tenant's hits (``/stats``, and how fast its prompt renders) say nothing of
    what another tenant sent.

    Errors are those of converting the items one by one (``harmony.convert_item``): an item found in the
    cache converted without one before, in the same context. A string input is one user message.
    """
    if isinstance(items, str):
        plain = ConvertedItems(input_to_messages(items, known_calls, param))
        plain.layout.extend(range(len(plain.converted.messages)))
        # What decides where it renders: counted as nothing, a 1 MB string was tokenized on the loop (~60 ms).
        plain.new_bytes = len(items)
        return plain
    out = ConvertedItems(ConvertedInput())
    converted = out.converted
    layout = out.layout
    for i, item in enumerate(items):
        yield
        kept = _KEPT.get(type(item)) if cache is not None else None
        context = _context(item, kept[1], converted, known_calls) if kept is not None else None
        if context is None:
            before = len(converted.messages)
            convert_item(item, f"{param}[{i}]", known_calls, converted)
            layout.extend(range(before, len(converted.messages)))
            out.new_bytes += len(item.json())
            continue
        assert cache is not None and kept is not None
        raw = item.json()  # made once an item: a replay's repeated items are the same objects
        # The item's JSON itself (found again only when equal to the byte), for its tenant alone.
        key = (scope, kept[0], context, raw)
        found = cache.get(key)
        if found is not None:
            layout.extend(found.messages)
            if found.calls:
                converted.calls.update(found.calls)
            out.hits += 1
            continue
        before = len(converted.messages)
        convert_item(item, f"{param}[{i}]", known_calls, converted)
        calls: tuple[tuple[str, str], ...] = ()
        if isinstance(item, _CALLS):
            call_id = item.data["call_id"]
            calls = ((call_id, converted.calls[call_id]),)
        layout.extend(range(before, len(converted.messages)))
        out.pending.append((key, before, len(converted.messages) - before, calls))
        out.new_bytes += len(raw)
    if cache is not None:
        cache.hits += out.hits
        cache.misses += len(out.pending)
    return out
