"""The Conversations API, transport-free: conversations and their items, kept in the response store.

A conversation is an ordered list of items (messages, function calls and their
outputs, reasoning). ``responses.create(conversation=ID)`` renders its items
before the request's input (:meth:`ConversationsService.history`), and when the
response ends, its input and output items are appended
(:meth:`ConversationsService.append`). Items are checked with the same
conversion the adapter applies to a request's input, so whatever a
conversation holds can be rendered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

import orjson

from ..adapter import EMPTY_HISTORY, ConversationHistory, HarmonyAdapter, RenderedMessage
from ..core import ByteBoundedCache, InvalidRequestError, NotFoundError, check_id, new_id
from ..harmony import input_to_messages, items_to_messages
from ..request import BodyDecoder, list_page_json, normalize_input_items, page_json, parse_items
from ..store import ConversationHead, ConversationItem, ResponseStore, StoredConversation, scoped
from ..tenants import OPEN, Tenant

__all__ = ["MAX_ITEMS_PER_REQUEST", "ConversationsService", "conversation_id"]

#: Items one create/add request may carry (OpenAI's limit).
MAX_ITEMS_PER_REQUEST = 20
#: Items one conversation may hold.
MAX_ITEMS_PER_CONVERSATION = 10_000
#: Bytes of rendered conversation histories remembered in this process.
HISTORY_CACHE_BYTES = 256 << 20
#: JSON an item carries besides the text the model reads (its id, type, role, status, part types): the
#: size check before rendering a conversation allows this much per item on top of --max_input_bytes.
ITEM_OVERHEAD_BYTES = 256
#: Items whose JSON is larger than this are converted to Harmony messages in a thread, not on the loop.
INLINE_CONVERT_BYTES = 16 << 10

#: Renders Harmony messages (given the size of their items' JSON) into RenderedMessages.
Render = Callable[[list[Any], int], Awaitable[list[RenderedMessage]]]


def conversation_id(value: Any) -> str:
    """The id in a request's ``conversation`` (``"conv_…"`` or ``{"id": "conv_…"}``)."""
    if isinstance(value, Mapping):
        value = value.get("id")
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(
            "'conversation' must be a conversation id or an object with an 'id'.", param="conversation"
        )
    return check_id(value, "conversation", "conv")


def _metadata(value: Any) -> bytes:
    if value is None:
        return b"{}"
    if (
        not isinstance(value, dict)
        or len(value) > 16
        or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512
            for k, v in value.items()
        )
    ):
        raise InvalidRequestError(
            "'metadata' must be an object of at most 16 string pairs (keys up to 64, values up to 512 characters).",
            param="metadata",
        )
    return orjson.dumps(value)


def _conversation_json(conversation: StoredConversation) -> bytes:
    return b"".join(
        [
            b'{"id":',
            orjson.dumps(conversation.id),
            b',"object":"conversation","created_at":',
            str(conversation.created_at).encode(),
            b',"metadata":',
            conversation.metadata_json,
            b"}",
        ]
    )


class ConversationsService:
    """Creates, reads, updates and deletes conversations and their items."""

    def __init__(
        self,
        store: ResponseStore,
        adapter: HarmonyAdapter,
        render: Render | None = None,
        max_input_bytes: int | None = None,
        decoder: BodyDecoder | None = None,
    ) -> None:
        self.store = store
        self.decoder = decoder or BodyDecoder()
        self.adapter = adapter
        self._render = render
        self.max_input_bytes = max_input_bytes
        #: One conversation's items may not grow past the store's ``--max_store_bytes`` (every backend
        #: keeps the one being written whole, evicting others: this bounds it).
        self.max_conversation_bytes: int | None = getattr(store, "max_bytes", None)
        # Rendered histories of recent conversations, keyed by conversation id and checked against the
        # stored items (their count and last id): a turn in a conversation renders only what is new.
        self._histories: ByteBoundedCache[tuple[int, str | None, ConversationHistory]] = ByteBoundedCache(
            HISTORY_CACHE_BYTES, HISTORY_CACHE_BYTES // 4
        )

    def _items(self, raw: Any, param: str = "items") -> list[ConversationItem]:
        """Checked items with ids, as stored."""
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise InvalidRequestError(f"'{param}' must be an array of items.", param=param)
        if len(raw) > MAX_ITEMS_PER_REQUEST:
            raise InvalidRequestError(
                f"'{param}' can hold at most {MAX_ITEMS_PER_REQUEST} items per request.", param=param
            )
        typed = parse_items(raw, param)
        input_to_messages(typed, _AnyCall(), param=param)  # raises, naming the item, for what cannot render
        items = [(item["id"], orjson.dumps(item)) for item in normalize_input_items(typed)]
        _refuse_duplicates([item_id for item_id, _ in items], (), param)
        return items

    async def _body(self, raw: bytes) -> dict[str, Any]:
        """A body parsed and checked once (``request/body.py``: off the event loop when large); empty: ``{}``."""
        if not raw.strip():
            return {}
        return (await self.decoder.decode(raw)).data

    def _store(self, tenant: Tenant) -> ResponseStore:
        """The tenant's part of the store: another tenant's conversation reads as unknown
        (docs/tenants.md#isolation)."""
        return scoped(self.store, tenant.scope)

    async def _conversation(self, conversation_id: str, tenant: Tenant) -> StoredConversation:
        conversation = await self._store(tenant).get_conversation(conversation_id)
        if conversation is None:
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        return conversation

    async def create(self, raw: bytes, tenant: Tenant = OPEN) -> bytes:
        """``POST /v1/conversations``: a new conversation (``items``, ``metadata``), ``tenant``'s (as every
        conversation a method here names: another tenant's is a 404)."""
        body = await self._body(raw)
        items = self._items(body.get("items"))
        self._refuse_past_store(None, 0, _held_bytes(items), "items")
        conversation = StoredConversation(new_id("conv"), int(time.time()), _metadata(body.get("metadata")))
        await self._store(tenant).create_conversation(conversation, items)
        return _conversation_json(conversation)

    async def retrieve(self, conversation_id: str, tenant: Tenant = OPEN) -> bytes:
        """``GET /v1/conversations/{id}``."""
        return _conversation_json(await self._conversation(conversation_id, tenant))

    async def update(self, conversation_id: str, raw: bytes, tenant: Tenant = OPEN) -> bytes:
        """``POST /v1/conversations/{id}``: replace its metadata."""
        body = await self._body(raw)
        if "metadata" not in body:
            raise InvalidRequestError("'metadata' is required.", param="metadata")
        updated = await self._store(tenant).update_conversation(conversation_id, _metadata(body["metadata"]))
        if updated is None:
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        return _conversation_json(updated)

    async def delete(self, conversation_id: str, tenant: Tenant = OPEN) -> bytes:
        """``DELETE /v1/conversations/{id}``."""
        if not await self._store(tenant).delete_conversation(conversation_id):
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        return orjson.dumps({"id": conversation_id, "object": "conversation.deleted", "deleted": True})

    async def _all_items(self, conversation_id: str, tenant: Tenant) -> list[ConversationItem]:
        items = await self._store(tenant).conversation_items(conversation_id)
        if items is None:
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        return items

    async def list_items(
        self, conversation_id: str, *, after: str | None, limit: int, order: str, tenant: Tenant = OPEN
    ) -> bytes:
        """``GET /v1/conversations/{id}/items``: a page, newest first unless ``order=asc``."""
        store = self._store(tenant)
        try:
            found = await store.conversation_page(conversation_id, after=after, limit=limit, order=order)
        except LookupError:
            raise InvalidRequestError(
                f"No item with id '{after}' in this conversation.", param="after"
            ) from None
        if found is None:
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        return page_json(*found)

    async def add_items(self, conversation_id: str, raw: bytes, tenant: Tenant = OPEN) -> bytes:
        """``POST /v1/conversations/{id}/items``: append items; the list of those added."""
        body = await self._body(raw)
        if "items" not in body:
            raise InvalidRequestError("'items' is required.", param="items")
        items = self._items(body["items"])
        store = self._store(tenant)
        await self._check_room(store, conversation_id, items)
        if not await store.append_conversation_items(conversation_id, items):
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        return list_page_json(items, after=None, limit=len(items), order="asc", where="the added items")

    async def _check_room(
        self, store: ResponseStore, conversation_id: str, adding: list[ConversationItem]
    ) -> None:
        """400 for items past the conversation's bound or whose ids it holds (its head and an id lookup:
        no item is read)."""
        head = await store.conversation_head(conversation_id)
        if head is None:
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        if head.count + len(adding) > MAX_ITEMS_PER_CONVERSATION:
            raise InvalidRequestError(
                f"A conversation can hold at most {MAX_ITEMS_PER_CONVERSATION} items.", param="items"
            )
        self._refuse_past_store(conversation_id, _held_bytes_of(head), _held_bytes(adding), "items")
        ids = [item_id for item_id, _ in adding]
        held = await store.conversation_holds(conversation_id, ids)
        if held is None:
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        _refuse_duplicates(ids, held, "items")

    async def get_item(self, conversation_id: str, item_id: str, tenant: Tenant = OPEN) -> bytes:
        """``GET /v1/conversations/{id}/items/{item_id}``."""
        for iid, data in await self._all_items(conversation_id, tenant):
            if iid == item_id:
                return data
        raise NotFoundError(f"Item with id '{item_id}' not found in conversation '{conversation_id}'.")

    async def delete_item(self, conversation_id: str, item_id: str, tenant: Tenant = OPEN) -> bytes:
        """``DELETE /v1/conversations/{id}/items/{item_id}``: the conversation."""
        deleted = await self._store(tenant).delete_conversation_item(conversation_id, item_id)
        if deleted is None:
            raise NotFoundError(f"Conversation with id '{conversation_id}' not found.")
        if not deleted:
            raise NotFoundError(f"Item with id '{item_id}' not found in conversation '{conversation_id}'.")
        return await self.retrieve(conversation_id, tenant)

    # -- responses in a conversation ---------------------------------------------------------

    async def history(
        self, conversation_id: str, new_ids: Collection[str] = (), input_bytes: int = 0, tenant: Tenant = OPEN
    ) -> tuple[ConversationHistory, tuple[int, str | None], Sequence[ConversationItem] | None]:
        """The conversation's items as a Harmony history, to render before a request's input, what
        was rendered (item count, last item id), and the items as stored if they were read (None when
        the history was remembered: :meth:`items_reader` reads them if an ``item_reference`` needs them).

        What is read from the store is bounded, whatever the conversation's length: its head (count,
        last id, bytes) and, when the request's input carries ids (``new_ids``, which must not be in
        the conversation), which of them it holds. A conversation whose last turn ran here is not read
        or rendered again: its history is remembered and checked against the head. Otherwise one whose
        items, with ``input_bytes`` of input, are larger than ``max_input_bytes`` allows (plus
        ITEM_OVERHEAD_BYTES an item) is refused before anything is read, converted or rendered; its
        items are read once, converted (large ones in a thread) and rendered (large ones in the render
        worker), off the event loop.
        """
        store, key = self._store(tenant), tenant.scope + conversation_id
        head = await store.conversation_head(conversation_id)
        if head is None:
            raise _not_found(conversation_id)
        if new_ids:
            held = await store.conversation_holds(conversation_id, new_ids)
            if held is None:
                raise _not_found(conversation_id)
            _refuse_duplicates(list(new_ids), held, "input")
        self._refuse_past_store(conversation_id, _held_bytes_of(head), input_bytes, "input")
        seen = (head.count, head.last_id)
        if not head.count:
            return EMPTY_HISTORY, seen, ()
        cached = self._histories.get(key)
        if cached is not None and cached[:2] == seen:
            return cached[2], seen, None
        self._refuse_too_large(conversation_id, head.nbytes, head.count, input_bytes)
        items = await store.conversation_items(conversation_id)
        if items is None:
            raise _not_found(conversation_id)
        seen = (len(items), items[-1][0] if items else None)  # what is rendered: it may have grown since
        if not items:
            return EMPTY_HISTORY, seen, items
        size = sum(len(data) for _, data in items)
        self._refuse_too_large(conversation_id, size, len(items), input_bytes)

        def convert() -> Any:
            return items_to_messages(
                [orjson.loads(data) for _, data in items], _AnyCall(), param="conversation"
            )

        converted = await asyncio.to_thread(convert) if size > INLINE_CONVERT_BYTES else convert()
        if self._render is not None:
            rendered = await self._render(converted.messages, size)
        else:
            rendered = self.adapter.render_messages(converted.messages)
        history = EMPTY_HISTORY.extended(rendered, converted.calls)
        self._histories.admit(key, (*seen, history), history.nbytes)
        return history, seen, items

    def _refuse_past_store(self, conversation_id: str | None, held: int, adding: int, param: str) -> None:
        """400 ``conversation_too_large`` when a conversation holding ``held`` bytes would grow past
        ``--max_store_bytes`` by ``adding`` more (a turn's input; its output, within its
        ``max_output_tokens``, is appended after it)."""
        limit = self.max_conversation_bytes
        if limit is not None and held + adding > limit:
            which = f"Conversation '{conversation_id}'" if conversation_id else "The conversation"
            raise InvalidRequestError(
                f"{which} would hold {held + adding} bytes, more than the store keeps for one conversation "
                f"(--max_store_bytes {limit}).",
                param=param,
                code="conversation_too_large",
            )

    def _refuse_too_large(self, conversation_id: str, size: int, count: int, input_bytes: int) -> None:
        """400 ``context_length_exceeded`` for items of ``size`` bytes no context window can hold."""
        limit = self.max_input_bytes
        if limit is not None and size + input_bytes - ITEM_OVERHEAD_BYTES * count > limit:
            raise InvalidRequestError(
                f"Conversation '{conversation_id}' holds {size} bytes of items, more than this model's context "
                f"window can hold (--max_input_bytes {limit}).",
                param="conversation",
                code="context_length_exceeded",
            )

    def items_reader(
        self, conversation_id: str, items: Sequence[ConversationItem] | None, tenant: Tenant = OPEN
    ) -> Callable[[], Awaitable[Sequence[ConversationItem]]]:
        """What reads the conversation's items for ``item_reference``s: ``items`` if :meth:`history`
        read them, else the store, only when called."""

        async def read() -> Sequence[ConversationItem]:
            if items is not None:
                return items
            found = await self._store(tenant).conversation_items(conversation_id)
            if found is None:
                raise _not_found(conversation_id)
            return found

        return read

    async def append(
        self,
        conversation_id: str,
        items: list[ConversationItem],
        history: ConversationHistory | None = None,
        seen: tuple[int, str | None] = (0, None),
        tenant: Tenant = OPEN,
    ) -> bool:
        """Append a response's input and output items; False if the conversation is gone.

        ``history`` is the conversation's history after them (the turn's prompt history plus its
        output) when ``seen`` is what the turn rendered; it is remembered for the next turn.
        """
        appended = await self._store(tenant).append_conversation_items(conversation_id, items)
        if appended and history is not None and items:
            self._histories.admit(
                tenant.scope + conversation_id, (seen[0] + len(items), items[-1][0], history), history.nbytes
            )
        return appended


def _held_bytes(items: Sequence[ConversationItem]) -> int:
    """What items cost a store, as the conversation bound counts it: their JSON, plus ids and framing."""
    return sum(ITEM_OVERHEAD_BYTES + len(data) for _, data in items)


def _held_bytes_of(head: ConversationHead) -> int:
    """:func:`_held_bytes` of a conversation's items, from its head (none is read)."""
    return head.nbytes + ITEM_OVERHEAD_BYTES * head.count


def _not_found(conversation_id: str) -> NotFoundError:
    return NotFoundError(f"Conversation with id '{conversation_id}' not found.", param="conversation")


def _refuse_duplicates(ids: list[str], held: Collection[str], param: str) -> None:
    """400 for an item id given twice, or already in the conversation."""
    seen: set[str] = set()
    for i, item_id in enumerate(ids):
        if item_id in seen or item_id in held:
            raise InvalidRequestError(
                f"Item id '{item_id[:128]}' is already used in this conversation; item ids must be unique.",
                param=f"{param}[{i}].id",
                code="duplicate_item_id",
            )
        seen.add(item_id)


class _AnyCall(dict):  # type: ignore[type-arg]
    """Known-calls mapping for checking items alone: any call id is known (its call may be an earlier item)."""

    def __contains__(self, key: object) -> bool:
        return True

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(key, "function")

    def __getitem__(self, key: Any) -> Any:
        return "function"
