"""Stored responses: the ResponseStore protocol and the LRU ConversationHistoryStore.

A :class:`StoredResponse` keeps what later requests need:

- the final response, serialized once (``GET /v1/responses/{id}`` returns these bytes);
- its input items, serialized, for ``GET /v1/responses/{id}/input_items``;
- the conversation history (Harmony messages with their rendered tokens, and the
  call ids seen) that ``previous_response_id`` continues.

Everything in an entry is immutable (bytes, tuples, a frozen history), so a
reader can never see an entry change, and concurrent continuations of one
response each extend it into a history of their own.

The LRU store is bounded by entry count and by bytes. ``nbytes`` of an entry
counts its whole history, even the part it shares with its predecessors, so
the accounted total is an upper bound of the memory really held: the bound
holds even when a predecessor is evicted and its successor keeps the shared
part alive.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from .harmony.adapter import ConversationHistory
from .wire import exact_bytes

__all__ = ["ConversationHistoryStore", "ResponseStore", "StoreStats", "StoredResponse"]

# The entry object (5 slots), and the store's bookkeeping for it (an ordered-dict
# node and a size entry), with headroom for allocator rounding.
_ENTRY_OVERHEAD = 512

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A finished response and what continuing it needs. Immutable."""

    id: str
    response_json: bytes
    input_item_ids: tuple[str, ...]
    input_items_json: tuple[bytes, ...]
    history: ConversationHistory

    def __post_init__(self) -> None:
        # Exact-size copies: what is stored must not keep a serializer's spare buffer alive.
        object.__setattr__(self, "response_json", exact_bytes(self.response_json))
        object.__setattr__(self, "input_items_json", tuple(exact_bytes(b) for b in self.input_items_json))

    @property
    def nbytes(self) -> int:
        """Bytes this entry may hold alive, an upper bound: its own objects, its whole history, store bookkeeping."""
        size = _ENTRY_OVERHEAD + sys.getsizeof(self.response_json) + self.history.nbytes
        size += sys.getsizeof(self.input_item_ids) + sum(sys.getsizeof(i) for i in self.input_item_ids)
        size += sys.getsizeof(self.input_items_json) + sum(sys.getsizeof(b) for b in self.input_items_json)
        return size


@dataclass(frozen=True, slots=True)
class StoreStats:
    """A snapshot of a store's counters."""

    responses: int
    bytes: int
    max_responses: int
    max_bytes: int
    evictions: int
    rejected: int


class ResponseStore(Protocol):
    """Where finished responses are kept for retrieval and continuation.

    Every method is a coroutine: backends that do I/O (a database, a network
    store) must never block the event loop; the in-memory one simply never awaits.
    """

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry, or None if unknown or evicted (a hit counts as a use)."""

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry; False if it cannot be kept (larger than the whole store)."""

    async def delete(self, response_id: str) -> bool:
        """Forget an entry; False if it was not there."""

    async def stats(self) -> StoreStats:
        """Counters for logs and benchmarks."""


class ConversationHistoryStore:
    """An LRU ResponseStore bounded by response count and total bytes; thread-safe, O(1) get/put/delete."""

    def __init__(self, max_responses: int = 10_000, max_bytes: int = 1 << 30) -> None:
        if max_responses < 1 or max_bytes < 1:
            raise ValueError("max_responses and max_bytes must be positive")
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self._evictions = 0
        self._rejected = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry, marked most recently used; None if unknown or evicted."""
        with self._lock:
            entry = self._entries.get(response_id)
            if entry is not None:
                self._entries.move_to_end(response_id)
            return entry

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry, evicting least recently used ones to stay within both bounds."""
        size = entry.nbytes
        if size > self.max_bytes:
            with self._lock:
                self._rejected += 1
            logger.warning(
                "Response %s (%d bytes) is larger than --max_store_bytes (%d); not stored",
                entry.id,
                size,
                self.max_bytes,
            )
            return False
        with self._lock:
            old = self._sizes.pop(entry.id, None)
            if old is not None:
                self._bytes -= old
                del self._entries[entry.id]
            self._entries[entry.id] = entry
            self._sizes[entry.id] = size
            self._bytes += size
            while len(self._entries) > self.max_responses or self._bytes > self.max_bytes:
                evicted, _ = self._entries.popitem(last=False)
                self._bytes -= self._sizes.pop(evicted)
                self._evictions += 1
        return True

    async def delete(self, response_id: str) -> bool:
        """Forget an entry."""
        with self._lock:
            if self._entries.pop(response_id, None) is None:
                return False
            self._bytes -= self._sizes.pop(response_id)
            return True

    async def stats(self) -> StoreStats:
        """Counts, bytes and evictions."""
        with self._lock:
            return StoreStats(
                responses=len(self._entries),
                bytes=self._bytes,
                max_responses=self.max_responses,
                max_bytes=self.max_bytes,
                evictions=self._evictions,
                rejected=self._rejected,
            )
