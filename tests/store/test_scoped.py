"""One tenant's view of a store (``store/scoped.py``) on every backend: another tenant's ids read as unknown.

The conformance suite (``test_store_backends.py``) runs on each backend whole and as a tenant sees it;
these tests put two tenants (and the unscoped open tenant) on one store and check that none reaches
what another holds: responses, their items in the index, conversations and their items.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from support.store_urls import BACKENDS, backend_url

from trtllm_responses.adapter import EMPTY_HISTORY
from trtllm_responses.store import ResponseStore, StoredConversation, StoredResponse, open_store, scoped


@pytest.fixture(params=BACKENDS)
async def backend(request, tmp_path) -> AsyncIterator[ResponseStore]:  # type: ignore[no-untyped-def]
    opened = open_store(backend_url(request, tmp_path), max_responses=100, max_bytes=1 << 24)
    yield opened
    await opened.close()


def entry(
    response_id: str, item_id: str, text: str, indexed: tuple[str, ...] | None = None
) -> StoredResponse:
    item = {
        "id": item_id,
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }
    output = [{"id": f"msg_out_{response_id}", "type": "message", "role": "assistant", "content": []}]
    return StoredResponse(
        id=response_id,
        response_json=json.dumps({"id": response_id, "output": output}).encode(),
        input_item_ids=(item_id,),
        input_items_json=(json.dumps(item).encode(),),
        history=EMPTY_HISTORY,
        indexed_item_ids=indexed,
    )


async def test_a_tenant_reads_none_of_anothers_responses(backend: ResponseStore) -> None:
    a, b = scoped(backend, "a/"), scoped(backend, "b/")
    assert await a.put(entry("resp_1", "msg_1", "secret of a"))
    got = await a.get("resp_1")
    assert got is not None and got.id == "resp_1" and b"secret of a" in got.input_items_json[0]
    assert await a.touch("resp_1")
    # b knows the id and gets nothing of it, nor can it touch or delete it; nor can the unscoped store
    assert await b.get("resp_1") is None and not await b.touch("resp_1") and not await b.delete("resp_1")
    assert await backend.get("resp_1") is None
    assert await b.item_responses(["msg_1", "msg_out_resp_1"]) == {}
    # a's index maps back to its own ids
    assert await a.item_responses(["msg_1", "msg_out_resp_1"]) == {
        "msg_1": "resp_1",
        "msg_out_resp_1": "resp_1",
    }
    # b stores its own resp_1: two entries, each its tenant's
    assert await b.put(entry("resp_1", "msg_1", "text of b"))
    a_got, b_got = await a.get("resp_1"), await b.get("resp_1")
    assert a_got is not None and b"secret of a" in a_got.input_items_json[0]
    assert b_got is not None and b"text of b" in b_got.input_items_json[0]
    assert await b.delete("resp_1") and await a.get("resp_1") is not None


async def test_only_the_ids_the_writer_names_are_indexed(backend: ResponseStore) -> None:
    a = scoped(backend, "a/")
    assert await a.put(entry("resp_1", "msg_client", "chosen by the client", indexed=("msg_out_resp_1",)))
    assert await a.item_responses(["msg_client", "msg_out_resp_1"]) == {"msg_out_resp_1": "resp_1"}


async def test_an_unscoped_entry_under_a_scopes_name_is_not_the_scopes(backend: ResponseStore) -> None:
    """The open tenant of an earlier run stored an item id that looks scoped: no tenant's view finds it."""
    assert await backend.put(entry("resp_old", "a/msg_1", "old"))
    assert await scoped(backend, "a/").item_responses(["msg_1"]) == {}


async def test_a_tenant_reads_none_of_anothers_conversations(backend: ResponseStore) -> None:
    a, b = scoped(backend, "a/"), scoped(backend, "b/")
    await a.create_conversation(StoredConversation("conv_1", 1, b'{"k":"a"}'), [("msg_1", b'{"t":"secret"}')])
    found = await a.get_conversation("conv_1")
    assert found is not None and found.id == "conv_1"
    assert await b.get_conversation("conv_1") is None
    assert await b.update_conversation("conv_1", b"{}") is None
    assert await b.conversation_items("conv_1") is None
    assert await b.conversation_head("conv_1") is None
    assert await b.conversation_holds("conv_1", ["msg_1"]) is None
    assert await b.conversation_page("conv_1", after=None, limit=10, order="asc") is None
    assert not await b.append_conversation_items("conv_1", [("msg_2", b"{}")])
    assert await b.delete_conversation_item("conv_1", "msg_1") is None
    assert not await b.delete_conversation("conv_1")
    assert await a.conversation_items("conv_1") == [("msg_1", b'{"t":"secret"}')]
    updated = await a.update_conversation("conv_1", b'{"k":"a2"}')
    assert updated is not None and updated.id == "conv_1"
    assert await a.delete_conversation("conv_1")


async def test_a_view_adds_no_copy_of_an_entrys_bytes() -> None:
    """Reading through a view costs O(1) more, whatever the entry's size: its bytes are the store's own."""
    from trtllm_responses.store import ConversationHistoryStore

    backend = ConversationHistoryStore()
    view = scoped(backend, "a/")
    assert await view.put(entry("resp_1", "msg_1", "x" * 100_000, indexed=("msg_1",)))
    held, got = await backend.get("a/resp_1"), await view.get("resp_1")
    assert held is not None and got is not None and held.indexed_item_ids == ("a/msg_1",)
    assert got.response_json is held.response_json and got.input_items_json is held.input_items_json
    assert (got.id, got.indexed_item_ids) == ("resp_1", ("msg_1",))
