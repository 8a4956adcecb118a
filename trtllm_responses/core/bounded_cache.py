"""ByteBoundedCache: a least-recently-used cache bounded by the bytes of what it holds.

Caches of client-controlled values (a rendered developer message keyed by its
instructions and tools) must not grow with what clients send: each entry states
its size, the total stays within ``max_bytes``, and an entry larger than
``max_entry_bytes`` is never kept. Callers admit an entry only once the request
that produced it was accepted, so refused requests leave nothing behind.
Not thread-safe: use it from the event loop.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["ByteBoundedCache"]

V = TypeVar("V")


class ByteBoundedCache(Generic[V]):
    """LRU by bytes: ``get`` marks use, ``admit`` keeps an entry and evicts the least recently used."""

    def __init__(self, max_bytes: int, max_entry_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes if max_entry_bytes is not None else max_bytes // 4
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> V | None:
        """The cached value, or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def admit(self, key: Hashable, value: V, nbytes: int) -> bool:
        """Keep ``value`` (``nbytes`` its size, key included); False if it is too large to keep."""
        if nbytes > self.max_entry_bytes:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._entries[key] = (value, nbytes)
        self.bytes += nbytes
        while self.bytes > self.max_bytes:
            _, (_, size) = self._entries.popitem(last=False)
            self.bytes -= size
        return True
