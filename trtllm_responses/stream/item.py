"""The item a ResponseStream is streaming, and the error an illegal transition raises."""

from __future__ import annotations

from typing import Any, Protocol

from ..harmony import ItemKind, ItemTarget, JsonCut
from .events import DELTA_EVENTS, event_type_name

__all__ = ["JSON_CALLS", "OpenItem", "StreamStateError", "TextParts", "TextRewriter"]

#: Calls whose body is JSON arguments (custom tools and python take raw text).
JSON_CALLS = frozenset(
    {
        ItemKind.FUNCTION_CALL,
        ItemKind.MCP_CALL,
        ItemKind.MCP_APPROVAL_REQUEST,
        ItemKind.WEB_SEARCH_CALL,
        ItemKind.UNDECLARED_FUNCTION,
        ItemKind.MULTI_AGENT_CALL,
        ItemKind.TOOL_SEARCH_CALL,
    }
)


#: Deltas an item keeps apart before joining them into one string (:class:`TextParts`).
PACK = 256


class TextParts:
    """An item's text as it streams, a delta at a time, kept compact until the item is done.

    Each delta is a string of a token or so. Kept one object each until the end (what this replaced),
    100k tokens were 100k small strings, 5 MB of the small-object allocator's arenas, and 20 concurrent
    runs of 100k tokens left 123 MiB of arenas behind them (pinned by whatever long-lived object was
    allocated among the strings). Here every :data:`PACK` deltas are joined into one string, so a few hundred
    small strings are alive at a time, whatever the item's length.
    """

    __slots__ = ("_packed", "parts")

    def __init__(self) -> None:
        self._packed: list[str] = []
        #: The deltas since the last pack. The per-token path appends here itself and calls :meth:`pack`
        #: once there are :data:`PACK` (a method call a token cost 2 % of the pipeline's time).
        self.parts: list[str] = []

    def append(self, text: str) -> None:
        parts = self.parts
        parts.append(text)
        if len(parts) >= PACK:
            self.pack()

    def pack(self) -> None:
        """Join the deltas since the last pack into one string."""
        self._packed.append("".join(self.parts))
        self.parts.clear()

    def text(self) -> str:
        """Everything appended, in order."""
        return "".join(self._packed + self.parts if self._packed else self.parts)


class TextRewriter(Protocol):
    """Rewrites a message's text as it streams (``feed`` each delta, ``flush`` at its end).

    ``feed`` returns the text to emit now and the annotations completed by it (dicts of
    the SDK's annotation types, offsets into the rewritten text); ``annotations`` holds all.
    """

    annotations: list[dict[str, Any]]

    def feed(self, text: str) -> tuple[str, list[dict[str, Any]]]: ...

    def flush(self) -> str: ...


class StreamStateError(RuntimeError):
    """A transition that the stream's state does not allow (a bug in the caller)."""


class OpenItem:
    """The item being streamed, and the fixed fields of its delta events (computed once per item)."""

    __slots__ = (
        "call_id",
        "chunks",
        "cutter",
        "delta_fields",
        "delta_type",
        "fields",
        "id",
        "output_index",
        "rewriter",
        "target",
    )

    def __init__(self, target: ItemTarget, item_id: str, call_id: str | None, output_index: int) -> None:
        self.target = target
        self.id = item_id
        self.call_id = call_id
        self.output_index = output_index
        self.chunks = TextParts()
        self.fields: dict[str, Any] = {}  # extra fields of the done item (tool items)
        self.rewriter: TextRewriter | None = None  # messages: rewrites their text (citations)
        # JSON arguments: cut at the end of their first complete value
        self.cutter: JsonCut | None = JsonCut() if target.kind in JSON_CALLS else None
        self.delta_type: type[Any] | None = DELTA_EVENTS.get(target.kind)
        fields: dict[str, Any] = {}
        if self.delta_type is not None:
            fields = {
                "type": event_type_name(self.delta_type),
                "item_id": item_id,
                "output_index": output_index,
            }
            if target.kind in (ItemKind.MESSAGE, ItemKind.REASONING):
                fields["content_index"] = 0
            if target.kind is ItemKind.MESSAGE:
                fields["logprobs"] = []
        self.delta_fields = fields
