"""Each backend counts the bytes stored under a scope exactly (``ResponseStore.scope_bytes``): every put,
replace, delete and eviction moves it by the entry's size, scopes apart; an SQLite file from before the
count reads its sums right; Redis reconciles what expired unseen (docs/tenants.md#limits)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator

import pytest
from support.store_urls import BACKENDS, backend_url

from trtllm_responses.adapter import EMPTY_HISTORY
from trtllm_responses.store import ResponseStore, StoredResponse, item_ids, open_store, scoped
from trtllm_responses.store.codec import encode_stored
from trtllm_responses.store.memory import accounted_bytes
from trtllm_responses.store.redis_scopes import PUT_SWEEP_EVERY
from trtllm_responses.store.sqlite import _INDEX_ROW


@pytest.fixture(params=BACKENDS)
async def backend(request, tmp_path) -> AsyncIterator[tuple[str, ResponseStore]]:  # type: ignore[no-untyped-def]
    opened = open_store(backend_url(request, tmp_path), max_responses=3, max_bytes=1 << 24)
    yield request.param, opened
    await opened.close()


def entry(response_id: str, text: str = "x") -> StoredResponse:
    """A response of ``text`` under ``response_id`` (a stored id: its scope first), with one input item."""
    content = [{"type": "input_text", "text": text}]
    response = {"id": response_id, "output": [], "text": text}
    return StoredResponse(
        id=response_id,
        response_json=json.dumps(response).encode(),
        input_item_ids=("msg_in",),
        input_items_json=(json.dumps({"id": "msg_in", "role": "user", "content": content}).encode(),),
        history=EMPTY_HISTORY,
    )


def size(kind: str, stored: StoredResponse) -> int:
    """What ``kind`` counts for an entry (as ``StoreStats.bytes`` does, Redis: its encoding)."""
    if kind == "memory":
        return accounted_bytes(stored)
    data = len(encode_stored(stored))  # a snapshot: it continues none
    if kind == "sqlite":
        data += sum(_INDEX_ROW + len(i) + len(stored.id) for i in item_ids(stored))
    return data


async def test_puts_replaces_and_deletes_move_each_scope_exactly(backend) -> None:  # type: ignore[no-untyped-def]
    kind, store = backend
    a1, a2, b1, open1 = entry("a/1"), entry("a/2", "y" * 300), entry("b/1", "z" * 50), entry("1")
    for e in (a1, a2, b1):
        assert await store.put(e)
    assert await store.scope_bytes("a/") == size(kind, a1) + size(kind, a2)
    assert await store.scope_bytes("b/") == size(kind, b1)
    assert await store.scope_bytes("") == 0 and await store.scope_bytes("c/") == 0
    bigger = entry("a/1", "w" * 1000)
    assert await store.put(bigger)  # a replace: the old size out, the new in
    assert await store.scope_bytes("a/") == size(kind, bigger) + size(kind, a2)
    assert await store.delete("a/2") and not await store.delete("a/2")
    assert await store.scope_bytes("a/") == size(kind, bigger)
    assert await store.scope_bytes("b/") == size(kind, b1)
    if kind != "redis":  # the scopes add up to the store's own total
        assert (await store.stats()).bytes == size(kind, bigger) + size(kind, b1)
    open2 = entry("2")
    assert await store.put(open1) and await store.put(open2)  # evicts b/1, the oldest, on memory and SQLite
    assert await store.scope_bytes("") == size(kind, open1) + size(kind, open2)
    assert await store.scope_bytes("a/") == size(kind, bigger)
    if kind == "redis":
        assert (await store.stats()).responses == 4  # the scopes' hashes are not counted as responses
    else:
        assert await store.scope_bytes("b/") == 0
    for response_id in ("a/1", "b/1", "1", "2"):
        await store.delete(response_id)
    assert [await store.scope_bytes(s) for s in ("a/", "b/", "")] == [0, 0, 0]


async def test_a_tenants_view_reads_its_own_scope(backend) -> None:  # type: ignore[no-untyped-def]
    kind, store = backend
    view = scoped(store, "team-a/")
    assert await view.put(entry("resp_1"))
    mine = await view.scope_bytes()
    assert mine == await store.scope_bytes("team-a/") > 0
    assert await scoped(store, "team-b/").scope_bytes() == 0
    assert await view.scope_bytes(limit=mine) == mine  # nothing to reconcile: every entry is there


async def test_an_sqlite_file_from_before_the_count_reads_its_sums(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = open_store(url, max_responses=10, max_bytes=1 << 20)
    entries = [entry("a/1"), entry("a/2", "y" * 100), entry("b/1"), entry("1", "q" * 10)]
    for e in entries:
        await store.put(e)
    await store.close()
    # The file as 071900c left it: no sums, no triggers keeping them.
    with sqlite3.connect(tmp_path / "old.db") as db:
        db.executescript(
            "DROP TRIGGER responses_scope_ins; DROP TRIGGER responses_scope_del; DROP TABLE scope_bytes;"
        )
    again = open_store(url, max_responses=10, max_bytes=1 << 20)
    assert await again.scope_bytes("a/") == size("sqlite", entries[0]) + size("sqlite", entries[1])
    assert await again.scope_bytes("b/") == size("sqlite", entries[2])
    assert await again.scope_bytes("") == size("sqlite", entries[3])
    await again.delete("a/1")  # kept by the triggers from now on
    assert await again.scope_bytes("a/") == size("sqlite", entries[1])
    await again.close()


async def test_redis_reconciles_what_expired(redis_server) -> None:  # type: ignore[no-untyped-def]
    redis_server.flush()
    store = open_store(redis_server.url, max_responses=10, max_bytes=1 << 20, ttl=1)
    gone, kept = entry("a/1"), entry("a/2", "y" * 100)
    await store.put(gone)
    await asyncio.sleep(1.6)  # its TTL ran out: nobody was told
    counted = await store.scope_bytes("a/")
    assert counted == size("redis", gone)  # the sum lags until reconciled...
    assert await store.scope_bytes("a/", limit=counted) == 0  # ...which a reading at its limit does
    await store.put(gone)
    await asyncio.sleep(1.6)
    for _ in range(PUT_SWEEP_EVERY):  # a sweep step of every so many puts drops the expired member too
        await store.put(kept)
    assert await store.scope_bytes("a/") == size("redis", kept)
    await store.close()
