"""The in-memory LRU ConversationHistoryStore (``--store memory``, the default).

Entries are kept as objects, never serialized: ``get`` hands back the very
entry ``put`` stored, so continuing a conversation costs nothing here.

The store is bounded by entry count and by bytes. ``nbytes`` of an entry
counts its whole history, even the part it shares with its predecessors, so
the accounted total is an upper bound of the memory really held: the bound
holds even when a predecessor is evicted and its successor keeps the shared
part alive.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from .base import StoredResponse, StoreStats

__all__ = ["ConversationHistoryStore"]

logger = logging.getLogger(__name__)


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

    async def close(self) -> None:
        """Nothing to flush: memory goes with the process."""
