"""Pages of conversation items read only the page, in every store backend (one conformance test).

Before: ``GET /v1/conversations/{id}/items?limit=1`` loaded every item of the conversation (10,000
of them) from the store. ``conversation_page`` reads the page: a slice in memory, an indexed
``LIMIT`` query in SQLite, a ranged ``LRANGE`` in Redis (with ``after``, Redis also reads the items
before it: ids are not indexed there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from support.store_urls import BACKENDS, backend_url

from trtllm_responses.store import ResponseStore, StoredConversation, open_store

N = 1000


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path) -> AsyncIterator[ResponseStore]:  # type: ignore[no-untyped-def]
    backend = open_store(backend_url(request, tmp_path), max_responses=100, max_bytes=1 << 26)
    yield backend
    await backend.close()


def ids(page: Any) -> list[str]:
    return [item_id for item_id, _ in page[0]]


async def test_pages_in_both_orders_with_after(store: ResponseStore) -> None:
    items = [(f"msg_{i:04d}", b'{"i":%d}' % i) for i in range(N)]
    await store.create_conversation(StoredConversation("conv_p", 1, b"{}"), items[:20])
    for start in range(20, N, 20):
        await store.append_conversation_items("conv_p", items[start : start + 20])
    assert ids(await store.conversation_page("conv_p", after=None, limit=1, order="desc")) == ["msg_0999"]
    first = await store.conversation_page("conv_p", after=None, limit=3, order="asc")
    assert first is not None and ids(first) == ["msg_0000", "msg_0001", "msg_0002"] and first[1] is True
    assert first[0][0][1] == b'{"i":0}'
    middle = await store.conversation_page("conv_p", after="msg_0500", limit=2, order="desc")
    assert ids(middle) == ["msg_0499", "msg_0498"]
    assert ids(await store.conversation_page("conv_p", after="msg_0500", limit=2, order="asc")) == [
        "msg_0501",
        "msg_0502",
    ]
    last = await store.conversation_page("conv_p", after="msg_0997", limit=5, order="asc")
    assert last is not None and ids(last) == ["msg_0998", "msg_0999"] and last[1] is False
    end = await store.conversation_page("conv_p", after="msg_0000", limit=5, order="desc")
    assert end is not None and ids(end) == [] and end[1] is False
    with pytest.raises(LookupError):
        await store.conversation_page("conv_p", after="msg_nope", limit=5, order="asc")
    assert await store.conversation_page("conv_none", after=None, limit=5, order="asc") is None
    # The page agrees with the full read it replaces.
    everything = await store.conversation_items("conv_p")
    assert everything is not None
    assert ids(await store.conversation_page("conv_p", after="msg_0100", limit=100, order="asc")) == [
        item_id for item_id, _ in everything[101:201]
    ]


async def test_the_conversations_service_reads_a_page_not_every_item(store: ResponseStore, adapter) -> None:  # type: ignore[no-untyped-def]
    from trtllm_responses.responses.conversations import ConversationsService

    items = [(f"msg_{i:04d}", b'{"id":"msg_%04d"}' % i) for i in range(N)]
    await store.create_conversation(StoredConversation("conv_s", 1, b"{}"), items)
    full_reads = 0
    original = store.conversation_items

    async def counting(conversation_id: str) -> Any:
        nonlocal full_reads
        full_reads += 1
        return await original(conversation_id)

    store.conversation_items = counting  # type: ignore[method-assign]
    service = ConversationsService(store, adapter)
    page = await service.list_items("conv_s", after=None, limit=1, order="desc")
    assert page.startswith(b'{"object":"list","data":[{"id":"msg_0999"}]') and b'"has_more":true' in page
    assert full_reads == 0
