"""``item_reference`` input items: resolved to the items they name before a prompt is rendered.

An ``{"type": "item_reference", "id": ...}`` (the SDK's ``ItemReference``; ``type`` may be left out)
stands for an item the server already holds, inserted where the reference is. It is looked up, in
order, among the items earlier in the same input, the request's conversation's items, the input
and output items of the stored responses of its ``previous_response_id`` chain (newest first, at most
:data:`MAX_CHAIN_RESPONSES` of them), and then, as OpenAI does, any stored response's: the store's item
index names the response holding each id still missing (``ResponseStore.item_responses``), which is
read. The index holds only ids the server minted, and only the tenant's (``store/scoped.py``): an id a
client chose is found in its own input, conversation and chain alone, so it never shadows another
session's item (docs/tenants.md#isolation). An id found nowhere is a 400 naming it and the reference's place.

A reference is a few bytes that stand for an item of any size, any number of times (150 references to
one 100 KB message in a 13.6 KB body), so the expansion is measured (the JSON bytes of each item a
reference stands for) before it is made, and refused past the caller's ``budget``; its size is returned,
so that the expanded input decides where it is rendered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from ..core import InvalidRequestError
from ..request import InputItem, ItemReference, ResponsesRequest, parse_items
from ..store import ResponseStore, StoredResponse
from .budget import InputBudget

__all__ = [
    "MAX_CHAIN_RESPONSES",
    "ConversationItems",
    "expand_references",
    "has_references",
    "resolve_references",
]

#: How many stored responses of a ``previous_response_id`` chain a reference is looked for in.
MAX_CHAIN_RESPONSES = 1000

#: Reads a conversation's items (called only when a reference needs them).
ConversationItems = Callable[[], Awaitable[Sequence[tuple[str, bytes]]]]


def _entry_items(entry: StoredResponse) -> dict[str, Any]:
    """A stored response's output and input items, by id."""
    items = {
        item["id"]: item for item in orjson.loads(entry.response_json).get("output") or () if "id" in item
    }
    for item_id, data in zip(entry.input_item_ids, entry.input_items_json, strict=True):
        items.setdefault(item_id, data)
    return items


async def _from_index(store: ResponseStore, missing: list[str], found: dict[str, Any]) -> None:
    """Add to ``found`` the items of ``missing`` that stored responses outside the chain hold (the store's
    item index names them; each response holding one is read once)."""
    holders: dict[str, list[str]] = {}
    for item_id, response_id in (await store.item_responses(missing)).items():
        holders.setdefault(response_id, []).append(item_id)
    for response_id, ids in holders.items():
        entry = await store.get(response_id)
        if entry is None:  # gone since the index was read
            continue
        items = _entry_items(entry)
        for item_id in ids:
            item = items.get(item_id)
            if item is not None:
                found[item_id] = orjson.loads(item) if isinstance(item, bytes) else item


async def expand_references(
    request: ResponsesRequest,
    store: ResponseStore,
    budget: InputBudget,
    conversation_items: ConversationItems | None = None,
) -> ResponsesRequest:
    """``request`` with its ``item_reference`` items replaced by the items they name, the bytes that added
    spent from ``budget`` (a 400 before expanding past what it has left: :func:`resolve_references`).

    ``conversation_items``: what reads its conversation's items (None: no conversation), called only
    when a reference is not found among the input's own items.
    """
    if not has_references(request.input):
        return request
    resolved, added = await resolve_references(
        request.input,  # type: ignore[arg-type]
        store=store,
        previous_response_id=request.previous_response_id,
        conversation_items=conversation_items,
        budget=budget.left,
    )
    budget.spend(added)
    return request.model_copy(update={"input": resolved})


def has_references(input: str | Sequence[InputItem]) -> bool:
    """Whether ``input`` holds any item reference (cheap: one pass over the item types)."""
    return not isinstance(input, str) and any(isinstance(item, ItemReference) for item in input)


async def resolve_references(
    input: Sequence[InputItem],
    *,
    store: ResponseStore,
    previous_response_id: str | None,
    conversation_items: ConversationItems | None,
    budget: int | None = None,
) -> tuple[tuple[InputItem, ...], int]:
    """``input`` with each item reference replaced by the item it names, and the bytes that added (the JSON
    of each item a reference stands for); InvalidRequestError for an unknown id, or (``context_length_exceeded``,
    naming the reference that crossed it) for an expansion over ``budget`` bytes."""
    wanted: dict[str, int] = {}
    for i, item in enumerate(input):
        if isinstance(item, ItemReference):
            ref = item.data.get("id")
            if not isinstance(ref, str) or not ref:
                raise InvalidRequestError(
                    f"'input[{i}].id' must be a non-empty string.", param=f"input[{i}].id"
                )
            wanted.setdefault(ref, i)
    found: dict[str, Any] = {}
    for item in input:  # earlier items of the same input (an id given by the client)
        if not isinstance(item, ItemReference) and item.data.get("id") in wanted:
            found.setdefault(item.data["id"], dict(item.data))
    if conversation_items is not None and len(found) < len(wanted):
        for item_id, data in await conversation_items():
            if item_id in wanted and item_id not in found:
                found[item_id] = orjson.loads(data)
    response_id = previous_response_id
    for _ in range(MAX_CHAIN_RESPONSES):
        if response_id is None or len(found) == len(wanted):
            break
        entry = await store.get(response_id)
        if entry is None:
            break
        response = orjson.loads(entry.response_json)
        for item in response.get("output") or ():
            if item.get("id") in wanted and item["id"] not in found:
                found[item["id"]] = item
        for item_id, data in zip(entry.input_item_ids, entry.input_items_json, strict=True):
            if item_id in wanted and item_id not in found:
                found[item_id] = orjson.loads(data)
        response_id = response.get("previous_response_id")
    if len(found) < len(wanted):
        await _from_index(store, [i for i in wanted if i not in found], found)
    out: list[Any] = []
    sizes: dict[str, int] = {}  # each found item's JSON bytes, measured once however often it is named
    added = 0
    for i, item in enumerate(input):
        if not isinstance(item, ItemReference):
            out.append(item)
            continue
        resolved = found.get(item.data["id"])
        if resolved is None:
            raise InvalidRequestError(
                f"Item with id '{item.data['id']}' not found.", param=f"input[{i}].id", code="item_not_found"
            )
        size = sizes.get(item.data["id"])
        if size is None:
            size = sizes[item.data["id"]] = len(orjson.dumps(resolved))
        added += size
        if budget is not None and added > budget:
            raise InvalidRequestError(
                f"The items 'input' references expand to more than the {max(budget, 0)} bytes this request has "
                f"room for within --max_input_bytes (at 'input[{i}]').",
                param=f"input[{i}]",
                code="context_length_exceeded",
            )
        out.append(resolved)
    return parse_items(out), added
