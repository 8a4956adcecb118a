"""The store seam: what a stored response is, and the protocol every backend implements.

A :class:`StoredResponse` keeps what later requests need:

- the final response, serialized once (``GET /v1/responses/{id}`` returns these bytes);
- its input items, serialized, for ``GET /v1/responses/{id}/input_items``;
- the conversation history (Harmony messages with their rendered tokens, and the
  call ids seen) that ``previous_response_id`` continues;
- its session key (``request/affinity.py``), which a response continuing it inherits, so the root
  of a ``previous_response_id`` chain is known without walking the chain, on any replica;
- the stored response it continues (:class:`Parent`), when its history begins with that one's: a backend
  then writes only what is new (:func:`own_part`), and a read assembles the history from at most
  :data:`SNAPSHOT_EVERY` entries (docs/sessions-and-kv-cache.md#what-the-store-keeps).

Every backend also indexes item ids of each stored response (``item_responses``), so an ``item_reference``
finds an item the store holds whichever chain it was in; the index lives and dies with the responses
(docs/stores-and-frontends.md#stores). Which ids are indexed is the writer's to say
(``indexed_item_ids``): the service names only ids the server minted, so an id a client chose never
shadows another session's (docs/tenants.md#isolation).

Everything in an entry is immutable (bytes, tuples, a frozen history), so a
reader can never see an entry change, and concurrent continuations of one
response each extend it into a history of their own.

Backends (``memory``, ``sqlite``, ``redis``) raise
:class:`~trtllm_responses.core.errors.ServiceUnavailableError` when their storage
cannot be reached in time: the client gets a 503, never a hang or a 500.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..tenants import Counters

import orjson

from ..adapter import ConversationHistory, RenderedMessage
from ..core import Stepped, at_once, exact_bytes

__all__ = [
    "ConversationHead",
    "ConversationItem",
    "ConversationPage",
    "Parent",
    "ResponseStore",
    "StoreStats",
    "StoredConversation",
    "SNAPSHOT_EVERY",
    "SIZES_A_STEP",
    "StoredResponse",
    "item_ids",
    "own_part",
    "scope_of",
    "summed_sizes",
]

#: One conversation item: its id and its JSON.
ConversationItem = tuple[str, bytes]
#: A page of conversation items (in the order asked) and whether more follow.
ConversationPage = tuple[list[ConversationItem], bool]

#: A stored history is written whole (a snapshot) at least every this many entries of a chain: a read
#: assembles at most this many, and a chain of T turns stores about 1 + T / (2 × this) times its history.
SNAPSHOT_EVERY = 64

# The entry object (7 slots), and the store's bookkeeping for it (an ordered-dict
# node and a size entry), with headroom for allocator rounding.
_ENTRY_OVERHEAD = 512
#: Sizes summed between two pauses of :func:`summed_sizes` (~20 µs of work at C speed).
SIZES_A_STEP = 256


def summed_sizes(objects: Sequence[object]) -> Stepped[int]:
    """``sys.getsizeof`` of each of ``objects``, summed, pausing every :data:`SIZES_A_STEP` (``core.Stepped``)."""
    total = 0
    for start in range(0, len(objects), SIZES_A_STEP):
        yield
        total += sum(map(sys.getsizeof, objects[start : start + SIZES_A_STEP]))
    return total


@dataclass(frozen=True, slots=True)
class Parent:
    """The stored response an entry continues (its ``previous_response_id``, as the store keys it) and that
    response's history, which the entry's history begins with when the writer built it by extending it."""

    id: str
    history: ConversationHistory


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A finished response and what continuing it needs. Immutable."""

    id: str
    response_json: bytes
    input_item_ids: tuple[str, ...]
    input_items_json: tuple[bytes, ...]
    history: ConversationHistory
    session_key: str | None = None  # None: stored before session keys were kept
    #: The output items' ids, when the writer knows them (None: :func:`item_ids` reads them from the JSON).
    output_item_ids: tuple[str, ...] | None = None
    #: The ids the item index maps to this entry, when the writer names them (None: :func:`item_ids` takes
    #: every input and output item's, as entries written before the writer named them).
    indexed_item_ids: tuple[str, ...] | None = None
    #: The response it continues, when the writer knows it (None: it is written whole). Never read back: a
    #: backend keeps the reference in its own form.
    parent: Parent | None = None

    def __post_init__(self) -> None:
        # An exact-size copy: what is stored must not keep a serializer's spare buffer alive. (The input
        # items' JSON is the writer's to copy so, in steps: ``responses/prepare.py`` ``keep_input``; a
        # backend's read makes each its own bytes.)
        object.__setattr__(self, "response_json", exact_bytes(self.response_json))

    @property
    def nbytes(self) -> int:
        """Bytes this entry may hold alive, an upper bound: its own objects, its whole history, store bookkeeping."""
        return at_once(self.sizing())

    def sizing(self) -> Stepped[int]:
        """:attr:`nbytes` as work that pauses every :data:`SIZES_A_STEP` sizes (``core.Stepped``: a 20,000-item
        entry's 60,000 sizes are ~6 ms)."""
        size = _ENTRY_OVERHEAD + sys.getsizeof(self.response_json) + self.history.nbytes
        size += sys.getsizeof(self.session_key) if self.session_key is not None else 0
        for part in (self.input_item_ids, self.input_items_json, self.output_item_ids, self.indexed_item_ids):
            if part is not None:
                size += sys.getsizeof(part)
                size += yield from summed_sizes(part)
        return size


def item_ids(entry: StoredResponse) -> tuple[str, ...]:
    """What the item index maps to an entry, each once: its ``indexed_item_ids`` when named, else the ids of
    its input items and output items.

    The output's are read from the response's JSON unless the entry names them (the service does: a
    response with large logprobs is megabytes of JSON, parsed in one step of the event loop)."""
    if entry.indexed_item_ids is not None:
        return tuple(dict.fromkeys(entry.indexed_item_ids))
    if entry.output_item_ids is not None:
        return tuple(dict.fromkeys((*entry.input_item_ids, *entry.output_item_ids)))
    try:
        response = orjson.loads(entry.response_json)
    except orjson.JSONDecodeError:  # not a response (a test's filler bytes): its input items only
        response = None
    output = (response.get("output") if isinstance(response, dict) else None) or ()
    ids = [*entry.input_item_ids]
    ids += [item["id"] for item in output if isinstance(item, dict) and isinstance(item.get("id"), str)]
    return tuple(dict.fromkeys(ids))


def own_part(entry: StoredResponse) -> tuple[tuple[RenderedMessage, ...], dict[str, str]] | None:
    """What ``entry``'s history adds to its parent's: the messages after the parent's and the calls the
    parent's lacks (or names otherwise); None when it has no parent or its history does not begin with the
    parent's very messages (truncated, compacted, rebuilt). O(the parent's message count) pointer compares."""
    parent = entry.parent
    if parent is None:
        return None
    base, messages = parent.history.messages, entry.history.messages
    if len(messages) < len(base) or any(a is not b for a, b in zip(base, messages, strict=False)):
        return None
    known = parent.history.calls
    calls = {k: v for k, v in entry.history.calls.items() if known.get(k) != v}
    if any(k not in entry.history.calls for k in known):
        return None  # a call the parent had is gone: not an extension
    return messages[len(base) :], calls


def scope_of(response_id: str) -> str:
    """The scope a stored id is under (``store/scoped.py``): its prefix up to and including the first ``/``,
    ``""`` for an id of the open or one-key tenant."""
    return response_id[: response_id.find("/") + 1]


@dataclass(frozen=True, slots=True)
class StoredConversation:
    """A conversation's own fields (its items are kept beside it, in order). Immutable."""

    id: str
    created_at: int
    metadata_json: bytes  # a JSON object of at most 16 string pairs


@dataclass(frozen=True, slots=True)
class ConversationHead:
    """What a turn needs to know of a conversation without reading its items: how many it holds, the
    last one's id (together: whether a history rendered earlier is still its history), and the bytes
    of their JSON (the size refusal before anything is read or rendered). Kept up to date by every
    write, so reading it costs the same at any length."""

    count: int
    last_id: str | None
    nbytes: int  # the sum of the items' JSON lengths (ids not counted)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """A snapshot of a store's counters (``bytes`` is memory for ``memory``, encoded bytes elsewhere)."""

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
    Any method may raise ServiceUnavailableError (the storage is unreachable).
    """

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry, or None if unknown or evicted (a hit counts as a use)."""

    async def touch(self, response_id: str) -> bool:
        """Whether the entry is there, marked used as ``get`` marks it (its TTL renewed); reads none of it."""

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry (replacing one of its id); False if it cannot be kept (larger than the whole store;
        on Redis, replacing a response others extend). A replaced response others extend stays theirs: they
        read the history they were written on (docs/sessions-and-kv-cache.md#what-the-store-keeps)."""

    async def delete(self, response_id: str) -> bool:
        """Forget an entry; False if it was not there."""

    async def item_responses(self, item_ids: Collection[str]) -> dict[str, str]:
        """For each of ``item_ids`` that an input or output item of a stored response has, that response's id
        (the one stored last, when several have it). Reads no entry; a response deleted, evicted or expired
        is no longer named (the index goes with it)."""

    async def stats(self) -> StoreStats:
        """Counters for logs and benchmarks."""

    async def scope_bytes(self, scope: str, limit: int | None = None) -> int:
        """The bytes of the responses stored under ``scope`` (:func:`scope_of`; conversations not counted),
        as ``StoreStats.bytes`` counts them: kept by every put, replace, delete and eviction, so reading it
        reads one number. ``limit``: the caller refuses at it, so a backend whose count can lag behind
        (Redis: entries expire unseen) checks its count first when it is at or over ``limit``
        (docs/tenants.md#limits)."""

    async def ping(self) -> None:
        """Raise ServiceUnavailableError if the store cannot be reached now (a store in this process always can)."""

    async def close(self) -> None:
        """Flush and release the storage (at server shutdown)."""

    def counters(self) -> Counters:
        """The counts tenants' limits are kept in (``tenants.Counters``; docs/tenants.md#limits): shared by
        every process of this store (``store/counters.py``)."""

    # -- conversations (the Conversations API): a conversation and its ordered items ------------

    async def create_conversation(
        self, conversation: StoredConversation, items: list[ConversationItem]
    ) -> None:
        """Keep a new conversation with its first items."""

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        """The conversation, or None."""

    async def update_conversation(
        self, conversation_id: str, metadata_json: bytes
    ) -> StoredConversation | None:
        """Replace its metadata; None if unknown."""

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Forget a conversation and its items; False if unknown."""

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem] | None:
        """Every item, oldest first; None if the conversation is unknown."""

    async def conversation_head(self, conversation_id: str) -> ConversationHead | None:
        """Its item count, last item id and items' bytes, without reading the items; None if unknown."""

    async def conversation_holds(self, conversation_id: str, item_ids: Collection[str]) -> set[str] | None:
        """Which of ``item_ids`` are ids of its items (an index lookup, not a read of every item); None if
        the conversation is unknown."""

    async def conversation_page(
        self, conversation_id: str, *, after: str | None, limit: int, order: str
    ) -> ConversationPage | None:
        """One page of items (``order`` asc or desc, after the item ``after``) and whether more follow,
        reading the page rather than every item; None if the conversation is unknown; LookupError if
        ``after`` is not one of its items."""

    async def append_conversation_items(self, conversation_id: str, items: list[ConversationItem]) -> bool:
        """Append items atomically (concurrent appends never lose one); False if unknown."""

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool | None:
        """Remove one item; False if it is not there, None if the conversation is unknown."""
