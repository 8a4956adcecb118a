"""The in-memory LRU ConversationHistoryStore (``--store memory``, the default).

Entries are kept as objects, never serialized: ``get`` hands back the very
entry ``put`` stored, so continuing a conversation costs nothing here.

The store is bounded by entry count and by bytes. An entry that continues a stored response whose
history its own begins with (``StoredResponse.parent``, :func:`~.base.own_part`) shares that
history's messages: it counts only what it adds, and the parent, which holds the rest, is kept counted
while any such entry depends on it. Deleting or evicting a response others depend on hides it (it reads
as unknown, its items leave the index) and keeps its bytes counted to its scope until the last dependant
goes; then it goes too (docs/sessions-and-kv-cache.md#what-the-store-keeps). So the accounted total is
still an upper bound of the memory really held.

The item index (item id → the response holding it) is kept beside the entries and counted in
their bytes (:data:`_INDEX_ENTRY` and the id, per item): evicting or deleting an entry drops its
items from the index, so it is bounded by the same two limits.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Collection

from ..core import LoopSteps, Stepped, at_once
from ..request import page_of
from .base import (
    ConversationHead,
    ConversationItem,
    ConversationPage,
    StoredConversation,
    StoredResponse,
    StoreStats,
    item_ids,
    own_part,
    scope_of,
    summed_sizes,
)
from .counters import MemoryCounters

__all__ = ["ConversationHistoryStore", "accounted_bytes"]

logger = logging.getLogger(__name__)

# A conversation's own objects and bookkeeping; each item adds its two strings, a tuple, a list slot and
# an entry in the id index.
_CONVERSATION_OVERHEAD = 512
_ITEM_OVERHEAD = 224
#: One item of the item index: its dict slot and the entry's tuple slot (the id string is counted apart).
_INDEX_ENTRY = 128
#: Entries with at most this many item ids (input and indexed) are counted in one go, larger ones in steps.
_COUNTED_AT_ONCE = 1024


def accounted_bytes(entry: StoredResponse, ids: tuple[str, ...] | None = None) -> int:
    """What an entry counts against ``max_bytes``: its own ``nbytes`` and its item index entries (``ids``,
    its :func:`item_ids` when not given)."""
    return at_once(_accounting(entry, item_ids(entry) if ids is None else ids))


def _accounting(entry: StoredResponse, ids: tuple[str, ...]) -> Stepped[int]:
    """:func:`accounted_bytes` as work that pauses every ``SIZES_A_STEP`` sizes (``core.Stepped``)."""
    size = yield from entry.sizing()
    return size + _INDEX_ENTRY * len(ids) + (yield from summed_sizes(ids))


def _without_parent(entry: StoredResponse) -> StoredResponse:
    """``entry`` without its parent reference (a shallow copy: its bytes are shared, not copied again)."""
    kept = copy.copy(entry)
    object.__setattr__(kept, "parent", None)
    return kept


def _items_size(items: list[ConversationItem]) -> int:
    return sum(_ITEM_OVERHEAD + len(item_id) + len(data) for item_id, data in items)


class _Conversation:
    """A conversation's fields, its items in order, and what answers a turn without reading them: an
    index of its ids (how many items carry each) and the running total of its items' JSON bytes."""

    __slots__ = ("data_bytes", "fields", "ids", "items")

    def __init__(self, fields: StoredConversation) -> None:
        self.fields = fields
        self.items: list[ConversationItem] = []
        self.ids: dict[str, int] = {}
        self.data_bytes = 0

    def extend(self, items: list[ConversationItem]) -> None:
        self.items.extend(items)
        for item_id, data in items:
            self.ids[item_id] = self.ids.get(item_id, 0) + 1
            self.data_bytes += len(data)

    def remove(self, index: int) -> ConversationItem:
        item_id, data = item = self.items.pop(index)
        left = self.ids.pop(item_id) - 1
        if left:
            self.ids[item_id] = left
        self.data_bytes -= len(data)
        return item


class ConversationHistoryStore:
    """An LRU ResponseStore bounded by response count and total bytes; thread-safe, O(1) get/put/delete."""

    def __init__(self, max_responses: int = 10_000, max_bytes: int = 1 << 30) -> None:
        if max_responses < 1 or max_bytes < 1:
            raise ValueError("max_responses and max_bytes must be positive")
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()
        self._sizes: dict[str, int] = {}  # every entry kept, hidden ones included
        #: Deleted or evicted entries others still depend on (by id), each one's parent (by id), and
        #: how many entries depend on each.
        self._hidden: dict[str, StoredResponse] = {}
        self._parents: dict[str, str] = {}
        self._dependants: dict[str, int] = {}
        # The item index: item id → the response holding it (the last stored), and each response's item ids.
        self._items: dict[str, str] = {}
        self._item_ids: dict[str, tuple[str, ...]] = {}
        self._bytes = 0
        #: Each scope's part of ``_bytes`` (``scope_bytes``), moved with it by every put, delete and eviction.
        self._scope_bytes: dict[str, int] = {}
        self._evictions = 0
        self._rejected = 0
        self._lock = threading.Lock()
        self._counters = MemoryCounters()
        # Conversations: least recently used dropped past max_responses of them, or past max_bytes of
        # items (a budget of their own, beside the responses').
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._conversation_sizes: dict[str, int] = {}
        self._conversation_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry, marked most recently used; None if unknown or evicted."""
        with self._lock:
            entry = self._entries.get(response_id)
            if entry is not None:
                self._entries.move_to_end(response_id)
            return entry

    async def touch(self, response_id: str) -> bool:
        """Whether the entry is there, marked most recently used."""
        with self._lock:
            if response_id not in self._entries:
                return False
            self._entries.move_to_end(response_id)
            return True

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry and index its items, evicting least recently used ones to stay within both bounds."""
        ids = item_ids(entry)
        counting = _accounting(entry, ids)
        # A large entry is counted in steps on the event loop, before the lock (20,000 items: ~80,000 sizes,
        # ~7 ms); a small one at once (a few µs: nothing to pause for).
        large = len(entry.input_item_ids) + len(ids) > _COUNTED_AT_ONCE
        size = await LoopSteps().through(counting) if large else at_once(counting)
        with self._lock:
            parent = self._shared_parent(entry)
            if parent is not None:
                size -= entry.parent.history.message_bytes if entry.parent is not None else 0
            if size > self.max_bytes:
                self._rejected += 1
                logger.warning(
                    "Response %s (%d bytes) is larger than --max_store_bytes (%d); not stored",
                    entry.id,
                    size,
                    self.max_bytes,
                )
                return False
            if entry.parent is not None:  # kept without it: the parent's own objects are not held by it
                entry = _without_parent(entry)
            if entry.id in self._sizes:  # replaced: those depending on it now depend on the new one
                if self._entries.pop(entry.id, None) is None:
                    del self._hidden[entry.id]
                self._forget(entry.id)
                self._unlink(entry.id)
            self._entries[entry.id] = entry
            self._sizes[entry.id] = size
            self._bytes += size
            scope = scope_of(entry.id)
            self._scope_bytes[scope] = self._scope_bytes.get(scope, 0) + size
            self._item_ids[entry.id] = ids
            self._items.update(zip(ids, itertools.repeat(entry.id)))
            if parent is not None:
                self._parents[entry.id] = parent
                self._dependants[parent] = self._dependants.get(parent, 0) + 1
            while len(self._entries) > self.max_responses or self._bytes > self.max_bytes:
                evicted, gone = self._entries.popitem(last=False)
                self._drop(evicted, gone)
                self._evictions += 1
        return True

    def _shared_parent(self, entry: StoredResponse) -> str | None:
        """The id of the kept entry whose very messages ``entry``'s history begins with, or None."""
        parent = entry.parent
        if parent is None or own_part(entry) is None:
            return None
        kept = self._entries.get(parent.id) or self._hidden.get(parent.id)
        return parent.id if kept is not None and kept.history.messages is parent.history.messages else None

    def _drop(self, response_id: str, entry: StoredResponse) -> None:
        """An entry leaves the API (deleted, evicted, replaced): hidden while others depend on it, else gone
        (and with it each hidden ancestor nothing else depends on)."""
        if self._dependants.get(response_id):
            self._hidden[response_id] = entry
            self._unindex(response_id)
            return
        self._forget(response_id)
        self._unlink(response_id)

    def _unlink(self, response_id: str) -> None:
        """``response_id`` depends on its parent no more: a hidden parent nothing else depends on goes (and so
        on up its chain)."""
        parent = self._parents.pop(response_id, None)
        while parent is not None:
            left = self._dependants[parent] - 1
            if left:
                self._dependants[parent] = left
                return
            del self._dependants[parent]
            if self._hidden.pop(parent, None) is None:
                return
            self._forget(parent)
            parent = self._parents.pop(parent, None)

    def _forget(self, response_id: str) -> None:
        """Take a response whose entry is gone out of the totals and the item index."""
        size = self._sizes.pop(response_id)
        self._bytes -= size
        scope = scope_of(response_id)
        left = self._scope_bytes[scope] - size
        if left:
            self._scope_bytes[scope] = left
        else:
            del self._scope_bytes[scope]
        self._unindex(response_id)

    def _unindex(self, response_id: str) -> None:
        """Drop a response's items from the item index (those another response took since stay its)."""
        for item_id in self._item_ids.pop(response_id, ()):
            if self._items.get(item_id) == response_id:
                del self._items[item_id]

    async def delete(self, response_id: str) -> bool:
        """Forget an entry (and its items in the index)."""
        with self._lock:
            entry = self._entries.pop(response_id, None)
            if entry is None:
                return False
            self._drop(response_id, entry)
            return True

    async def item_responses(self, item_ids: Collection[str]) -> dict[str, str]:
        """The stored responses holding ``item_ids``, from the index (no entry is read or marked used)."""
        with self._lock:
            index = self._items
            return {i: index[i] for i in item_ids if i in index}

    async def scope_bytes(self, scope: str, limit: int | None = None) -> int:
        """The accounted bytes (``accounted_bytes``) of the responses under ``scope``: exact, one lookup."""
        return self._scope_bytes.get(scope, 0)

    def counters(self) -> MemoryCounters:
        """This process's counts of tenants' limits (the memory store serves one process)."""
        return self._counters

    async def ping(self) -> None:
        """In this process: always reachable."""

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

    # -- conversations --------------------------------------------------------------------------

    async def create_conversation(
        self, conversation: StoredConversation, items: list[ConversationItem]
    ) -> None:
        """Keep a conversation (least recently used ones go past ``max_responses`` of them or ``max_bytes``)."""
        with self._lock:
            self._drop_conversation(conversation.id)
            kept = self._conversations[conversation.id] = _Conversation(conversation)
            kept.extend(items)
            self._conversation_sizes[conversation.id] = 0
            self._grow(
                conversation.id, _CONVERSATION_OVERHEAD + len(conversation.metadata_json) + _items_size(items)
            )

    def _grow(self, conversation_id: str, size: int) -> None:
        """Account ``size`` more bytes to a conversation, then evict others (never it) to fit the bounds."""
        self._conversation_sizes[conversation_id] += size
        self._conversation_bytes += size
        while len(self._conversations) > 1 and (
            len(self._conversations) > self.max_responses or self._conversation_bytes > self.max_bytes
        ):
            oldest = next(iter(self._conversations))
            if oldest == conversation_id:
                self._conversations.move_to_end(oldest)
                continue
            self._drop_conversation(oldest)
            self._evictions += 1

    def _drop_conversation(self, conversation_id: str) -> bool:
        if self._conversations.pop(conversation_id, None) is None:
            return False
        self._conversation_bytes -= self._conversation_sizes.pop(conversation_id)
        return True

    def _conversation(self, conversation_id: str) -> _Conversation | None:
        found = self._conversations.get(conversation_id)
        if found is not None:
            self._conversations.move_to_end(conversation_id)
        return found

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        """The conversation, or None."""
        with self._lock:
            found = self._conversation(conversation_id)
            return found.fields if found else None

    async def update_conversation(
        self, conversation_id: str, metadata_json: bytes
    ) -> StoredConversation | None:
        """Replace its metadata."""
        with self._lock:
            found = self._conversation(conversation_id)
            if found is None:
                return None
            old = found.fields
            new = found.fields = StoredConversation(old.id, old.created_at, metadata_json)
            self._grow(conversation_id, len(metadata_json) - len(old.metadata_json))
            return new

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Forget a conversation."""
        with self._lock:
            return self._drop_conversation(conversation_id)

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem] | None:
        """Its items, oldest first (a copy)."""
        with self._lock:
            found = self._conversation(conversation_id)
            return list(found.items) if found else None

    async def conversation_head(self, conversation_id: str) -> ConversationHead | None:
        """Its length, last id and bytes, as kept by every write (no item is looked at)."""
        with self._lock:
            found = self._conversation(conversation_id)
            if found is None:
                return None
            last = found.items[-1][0] if found.items else None
            return ConversationHead(len(found.items), last, found.data_bytes)

    async def conversation_holds(self, conversation_id: str, item_ids: Collection[str]) -> set[str] | None:
        """The ids among ``item_ids`` that its id index holds."""
        with self._lock:
            found = self._conversation(conversation_id)
            return None if found is None else {i for i in item_ids if i in found.ids}

    async def conversation_page(
        self, conversation_id: str, *, after: str | None, limit: int, order: str
    ) -> ConversationPage | None:
        """One page: a slice of the list (only ``after``'s position is searched for; nothing is copied but the page)."""
        with self._lock:
            found = self._conversation(conversation_id)
            if found is None:
                return None
            return page_of(found.items, after=after, limit=limit, order=order)

    async def append_conversation_items(self, conversation_id: str, items: list[ConversationItem]) -> bool:
        """Append items (older conversations are evicted to make room; never this one)."""
        with self._lock:
            found = self._conversation(conversation_id)
            if found is None:
                return False
            found.extend(items)
            self._grow(conversation_id, _items_size(items))
            return True

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool | None:
        """Remove one item."""
        with self._lock:
            found = self._conversation(conversation_id)
            if found is None:
                return None
            if item_id not in found.ids:
                return False
            for i, (iid, _) in enumerate(found.items):
                if iid == item_id:
                    size = _items_size([found.remove(i)])
                    self._conversation_sizes[conversation_id] -= size
                    self._conversation_bytes -= size
                    return True
            return False
