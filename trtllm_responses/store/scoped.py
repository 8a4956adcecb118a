"""One tenant's part of a store: its ids carry its scope (docs/tenants.md#isolation).

:func:`scoped` gives a :class:`~.base.ResponseStore` in which every response id, conversation id and
item-index id is the tenant's ``scope`` (``"team-a/"``) followed by the id the tenant knows, on the way
in, and the id the tenant knows on the way out: entries and conversations read back carry the caller's
ids, and ``item_responses`` names responses by them. Another tenant's id is simply not a key of this
view, so it reads as unknown (a 404, as for an id that never existed) on every backend alike; no
backend changes. Items inside a conversation keep their ids (the conversation is scoped).

A scope is a tenant name and a ``/``, and a name holds no ``/``, so no scope is a prefix of another.
The empty scope (the open or one-key tenant) is the store itself: nothing is added per call, and what
was stored before tenants existed stays readable.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from dataclasses import replace

from ..tenants import Counters
from .base import (
    ConversationHead,
    ConversationItem,
    ConversationPage,
    Parent,
    ResponseStore,
    StoredConversation,
    StoredResponse,
    StoreStats,
    item_ids,
)

__all__ = ["ScopedStore", "scoped"]


def _renamed(entry: StoredResponse, entry_id: str, indexed: tuple[str, ...] | None) -> StoredResponse:
    """``entry`` under another id (and index ids): a shallow copy, its bytes shared, not copied again as
    its constructor would (a view adds O(1) to each read and write, whatever the entry's size)."""
    renamed = copy.copy(entry)
    object.__setattr__(renamed, "id", entry_id)
    object.__setattr__(renamed, "indexed_item_ids", indexed)
    return renamed


def scoped(store: ResponseStore, scope: str) -> ResponseStore:
    """``store`` as the tenant of ``scope`` sees it: the store itself for ``""``, else a :class:`ScopedStore`."""
    return store if not scope else ScopedStore(store, scope)


class ScopedStore:
    """A view of ``store`` holding only the ids under ``scope`` (each method as ``ResponseStore`` states it)."""

    __slots__ = ("scope", "store")

    def __init__(self, store: ResponseStore, scope: str) -> None:
        self.store = store
        self.scope = scope

    def _own(self, key: str) -> str | None:
        """The tenant's id of a store key, or None if the key is not under this scope."""
        return key[len(self.scope) :] if key.startswith(self.scope) else None

    async def get(self, response_id: str) -> StoredResponse | None:
        entry = await self.store.get(self.scope + response_id)
        if entry is None:
            return None
        indexed = entry.indexed_item_ids  # the memory store's own entry: its index ids are scoped
        own = None if indexed is None else tuple(i for i in map(self._own, indexed) if i is not None)
        return _renamed(entry, response_id, own)

    async def touch(self, response_id: str) -> bool:
        return await self.store.touch(self.scope + response_id)

    async def put(self, entry: StoredResponse) -> bool:
        indexed = tuple(self.scope + i for i in item_ids(entry))
        renamed = _renamed(entry, self.scope + entry.id, indexed)
        if entry.parent is not None:  # the response it continues is this tenant's too
            object.__setattr__(renamed, "parent", Parent(self.scope + entry.parent.id, entry.parent.history))
        return await self.store.put(renamed)

    async def delete(self, response_id: str) -> bool:
        return await self.store.delete(self.scope + response_id)

    async def item_responses(self, item_ids: Collection[str]) -> dict[str, str]:
        found = await self.store.item_responses([self.scope + i for i in item_ids])
        owned = {self._own(item): self._own(response) for item, response in found.items()}
        return {
            item: response for item, response in owned.items() if item is not None and response is not None
        }

    async def stats(self) -> StoreStats:
        return await self.store.stats()

    async def scope_bytes(self, scope: str = "", limit: int | None = None) -> int:
        """The bytes under ``scope`` within this view (``""``: the tenant's own, all it can store)."""
        return await self.store.scope_bytes(self.scope + scope, limit)

    async def ping(self) -> None:
        await self.store.ping()

    async def close(self) -> None:
        await self.store.close()

    def counters(self) -> Counters:
        """The store's counts (tenants' limits name their tenant in each key already)."""
        return self.store.counters()

    # -- conversations: the conversation id is scoped, its items' ids are its own ---------------

    def _conversation(
        self, conversation: StoredConversation | None, conversation_id: str
    ) -> StoredConversation | None:
        return None if conversation is None else replace(conversation, id=conversation_id)

    async def create_conversation(
        self, conversation: StoredConversation, items: list[ConversationItem]
    ) -> None:
        await self.store.create_conversation(replace(conversation, id=self.scope + conversation.id), items)

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        found = await self.store.get_conversation(self.scope + conversation_id)
        return self._conversation(found, conversation_id)

    async def update_conversation(
        self, conversation_id: str, metadata_json: bytes
    ) -> StoredConversation | None:
        found = await self.store.update_conversation(self.scope + conversation_id, metadata_json)
        return self._conversation(found, conversation_id)

    async def delete_conversation(self, conversation_id: str) -> bool:
        return await self.store.delete_conversation(self.scope + conversation_id)

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem] | None:
        return await self.store.conversation_items(self.scope + conversation_id)

    async def conversation_head(self, conversation_id: str) -> ConversationHead | None:
        return await self.store.conversation_head(self.scope + conversation_id)

    async def conversation_holds(self, conversation_id: str, item_ids: Collection[str]) -> set[str] | None:
        return await self.store.conversation_holds(self.scope + conversation_id, item_ids)

    async def conversation_page(
        self, conversation_id: str, *, after: str | None, limit: int, order: str
    ) -> ConversationPage | None:
        return await self.store.conversation_page(
            self.scope + conversation_id, after=after, limit=limit, order=order
        )

    async def append_conversation_items(self, conversation_id: str, items: list[ConversationItem]) -> bool:
        return await self.store.append_conversation_items(self.scope + conversation_id, items)

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool | None:
        return await self.store.delete_conversation_item(self.scope + conversation_id, item_id)
