"""One conformance suite for every ResponseStore backend: memory, SQLite and a real Redis."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import AsyncIterator

import pytest
from support.store_urls import BACKENDS, backend_url

from trtllm_responses.adapter import EMPTY_HISTORY, HarmonyAdapter
from trtllm_responses.core.errors import ServiceUnavailableError
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.store import (
    CodecError,
    ResponseStore,
    StoredResponse,
    decode_entry,
    encode_entry,
    open_store,
    scoped,
)
from trtllm_responses.store.codec import encode_stored
from trtllm_responses.store.sqlite import _INDEX_ROW


@pytest.fixture(params=BACKENDS)
async def backend(request, tmp_path) -> AsyncIterator[ResponseStore]:  # type: ignore[no-untyped-def]
    opened = open_store(backend_url(request, tmp_path), max_responses=100, max_bytes=1 << 24)
    yield opened
    await opened.close()


@pytest.fixture(params=["", "team-a/"], ids=["whole", "scoped"])
def store(request, backend: ResponseStore) -> ResponseStore:  # type: ignore[no-untyped-def]
    """Each backend, and each backend as one tenant sees it (``store/scoped.py``): the same contract."""
    return scoped(backend, request.param)


def turn(
    adapter: HarmonyAdapter, text: str, history=EMPTY_HISTORY, response_id: str = "resp_1"
) -> StoredResponse:  # type: ignore[no-untyped-def]
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    prompt = adapter.build_prompt(parse_request({"input": text, "tools": tools}), history)
    output = [
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "thinking about " + text}]},
        {
            "type": "function_call",
            "call_id": f"call_{response_id}",
            "name": "lookup",
            "arguments": '{"q": 1}',
        },
    ]
    item = {
        "id": "msg_in",
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }
    return StoredResponse(
        id=response_id,
        response_json=json.dumps({"id": response_id, "output": output}).encode(),
        input_item_ids=("msg_in",),
        input_items_json=(json.dumps(item).encode(),),
        history=adapter.continue_history(prompt, output),
    )


def same(a: StoredResponse, b: StoredResponse) -> None:
    assert (a.id, a.response_json, a.input_item_ids, a.input_items_json) == (
        b.id,
        b.response_json,
        b.input_item_ids,
        b.input_items_json,
    )
    assert a.history.messages == b.history.messages  # sources, token tuples and flags
    assert dict(a.history.calls) == dict(b.history.calls)


async def test_put_get_delete_round_trip(store: ResponseStore, adapter: HarmonyAdapter) -> None:
    entry = turn(adapter, "Grüße 你好 " * 20)
    assert await store.get(entry.id) is None
    assert await store.put(entry)
    got = await store.get(entry.id)
    assert got is not None
    same(got, entry)
    assert (await store.stats()).responses == 1
    assert await store.delete(entry.id) and not await store.delete(entry.id)
    assert await store.get(entry.id) is None


async def test_continuing_from_any_backend_renders_the_same_tokens(
    store: ResponseStore, adapter: HarmonyAdapter
) -> None:
    first = turn(adapter, "first question")
    await store.put(first)
    loaded = await store.get(first.id)
    assert loaded is not None
    follow = parse_request(
        {"input": [{"type": "function_call_output", "call_id": "call_resp_1", "output": "42"}], "tools": []}
    )
    # The call id is known from the stored history, and the prompt is the one memory would render.
    assert (
        adapter.build_prompt(follow, loaded.history).token_ids
        == adapter.build_prompt(follow, first.history).token_ids
    )


async def test_an_entry_keeps_its_session_key(store: ResponseStore, adapter: HarmonyAdapter) -> None:
    """The key a continuing response inherits (responses/sessions.py) is stored with the entry, on every backend;
    an entry without one (written before keys were kept) reads back without one."""
    keyed = dataclasses.replace(turn(adapter, "hi", response_id="keyed"), session_key="agent-7")
    plain = turn(adapter, "hi", response_id="plain")
    assert await store.put(keyed) and await store.put(plain)
    got_keyed, got_plain = await store.get("keyed"), await store.get("plain")
    assert got_keyed is not None and got_keyed.session_key == "agent-7"
    assert got_plain is not None and got_plain.session_key is None
    assert b'"session"' not in encode_entry(plain)  # the old layout, byte for byte


async def test_replacing_an_entry_keeps_one(store: ResponseStore, adapter: HarmonyAdapter) -> None:
    await store.put(turn(adapter, "a"))
    await store.put(turn(adapter, "b"))
    got = await store.get("resp_1")
    assert got is not None and b'"b"' not in got.response_json  # response_json names no input
    assert got.history.messages == turn(adapter, "b").history.messages
    assert (await store.stats()).responses == 1


async def test_concurrent_puts_and_gets(store: ResponseStore, adapter: HarmonyAdapter) -> None:
    entries = [turn(adapter, f"q{i}", response_id=f"resp_{i}") for i in range(30)]
    await asyncio.gather(*(store.put(e) for e in entries))
    got = await asyncio.gather(*(store.get(e.id) for e in entries))
    for a, b in zip(got, entries, strict=True):
        assert a is not None
        same(a, b)


@pytest.mark.parametrize("url", ["memory", "sqlite"])
async def test_bounded_backends_evict_the_least_recently_used(
    url: str, tmp_path, adapter: HarmonyAdapter
) -> None:  # type: ignore[no-untyped-def]
    store = open_store(
        url if url == "memory" else f"sqlite:///{tmp_path / 'lru.db'}", max_responses=2, max_bytes=1 << 30
    )
    for name in "ab":
        await store.put(turn(adapter, name, response_id=name))
    assert await store.get("a") is not None  # a is now more recent than b
    await store.put(turn(adapter, "c", response_id="c"))
    assert (
        await store.get("b") is None and await store.get("a") is not None and await store.get("c") is not None
    )
    stats = await store.stats()
    assert stats.evictions == 1 and stats.responses == 2
    await store.close()


async def test_touch_says_whether_an_entry_is_there(store: ResponseStore, adapter: HarmonyAdapter) -> None:
    assert not await store.touch("resp_1")
    await store.put(turn(adapter, "hello"))
    assert await store.touch("resp_1")
    await store.delete("resp_1")
    assert not await store.touch("resp_1")


@pytest.mark.parametrize("url", ["memory", "sqlite"])
async def test_touch_marks_an_entry_used_as_get_does(url: str, tmp_path, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    store = open_store(
        url if url == "memory" else f"sqlite:///{tmp_path / 'touch.db'}", max_responses=2, max_bytes=1 << 30
    )
    for name in "ab":
        await store.put(turn(adapter, name, response_id=name))
    assert await store.touch("a")  # a is now more recent than b
    await store.put(turn(adapter, "c", response_id="c"))
    assert not await store.touch("b") and await store.touch("a") and await store.touch("c")
    await store.close()


async def test_redis_touch_renews_the_ttl(redis_server, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    store = open_store(redis_server.url, max_responses=1, max_bytes=1 << 20, ttl=2)
    await store.put(turn(adapter, "kept alive"))
    for _ in range(3):
        await asyncio.sleep(1.0)
        assert await store.touch("resp_1")  # 3 s after put: alive only because each touch renewed it
    await asyncio.sleep(2.5)
    assert not await store.touch("resp_1")
    await store.close()


async def test_sqlite_byte_bound_and_rejection(tmp_path, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    # An entry's bytes: its encoding and its item index row (msg_in).
    size = (
        len(encode_stored(turn(adapter, "x" * 50, response_id="a"))) + _INDEX_ROW + len("msg_in") + len("a")
    )
    store = open_store(f"sqlite:///{tmp_path / 'b.db'}", max_responses=100, max_bytes=size * 3)
    for name in "abcde":
        await store.put(turn(adapter, "x" * 50, response_id=name))
        assert (await store.stats()).bytes <= size * 3
    assert [n for n in "abcde" if await store.get(n)] == ["c", "d", "e"]
    assert not await store.put(turn(adapter, "y" * 5000, response_id="huge"))
    assert (await store.stats()).rejected == 1
    await store.close()


async def test_sqlite_survives_reopening(tmp_path, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'd.db'}"
    store = open_store(url, max_responses=10, max_bytes=1 << 20)
    entry = turn(adapter, "remember me")
    await store.put(entry)
    await store.close()
    again = open_store(url, max_responses=10, max_bytes=1 << 20)
    got = await again.get(entry.id)
    assert got is not None
    same(got, entry)
    assert (await again.stats()).responses == 1
    await again.close()


async def test_redis_ttl_expires_entries(redis_server, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    store = open_store(redis_server.url, max_responses=1, max_bytes=1 << 20, ttl=1)
    await store.put(turn(adapter, "short-lived"))
    assert await store.get("resp_1") is not None
    await asyncio.sleep(2.2)
    assert await store.get("resp_1") is None
    await store.close()


async def test_redis_down_is_service_unavailable_then_recovers(adapter: HarmonyAdapter) -> None:
    from support.redis_harness import RedisServer

    server = RedisServer().start()
    store = open_store(server.url, max_responses=1, max_bytes=1 << 20)
    try:
        await store.put(turn(adapter, "before"))
        server.stop()
        for call in (store.get("resp_1"), store.put(turn(adapter, "during")), store.delete("resp_1")):
            with pytest.raises(ServiceUnavailableError):
                await asyncio.wait_for(call, 10)
        server.start()  # same port, empty (no persistence)
        assert await store.get("resp_1") is None
        assert await store.put(turn(adapter, "after"))
        assert await store.get("resp_1") is not None
    finally:
        await store.close()
        server.stop()


def test_codec_rejects_corrupt_bytes(adapter: HarmonyAdapter) -> None:
    data = encode_entry(turn(adapter, "hello"))
    same(decode_entry(data), turn(adapter, "hello"))
    for bad in (b"", b"nope", data[:20], data[:-2], b"TRS1" + b"\xff" * 12):
        with pytest.raises(CodecError):
            decode_entry(bad)


def test_codec_keeps_histories_token_level_and_compact(adapter: HarmonyAdapter) -> None:
    entry = turn(adapter, "word " * 5000)
    data = encode_entry(entry)
    tokens = entry.history.num_tokens
    # 4 bytes a token, plus the messages' JSON (escaped once more in the header) and the response and
    # items as they are: no re-rendering is needed to continue.
    text = 2 * sum(len(m.source) for m in entry.history.messages)
    text += len(entry.response_json) + sum(len(b) for b in entry.input_items_json)
    assert len(data) < 4 * tokens + text + 2048
    assert decode_entry(data).history.num_tokens == tokens


def test_open_store_rejects_unknown_urls() -> None:
    for url in ("mysql://x", "sqlite://", "sqlite:///"):
        with pytest.raises(ValueError):
            open_store(url, max_responses=1, max_bytes=1)


async def test_conversations_in_every_backend(store: ResponseStore) -> None:
    from trtllm_responses.store import StoredConversation

    conv = StoredConversation("conv_1", 1700000000, b'{"topic":"x"}')
    assert await store.get_conversation("conv_1") is None
    assert await store.conversation_items("conv_1") is None
    assert not await store.append_conversation_items("conv_1", [("a", b"{}")])
    await store.create_conversation(conv, [("msg_a", b'{"id":"msg_a"}')])
    assert await store.get_conversation("conv_1") == conv
    await asyncio.gather(
        *(store.append_conversation_items("conv_1", [(f"msg_{i}", b'{"i":%d}' % i)]) for i in range(20))
    )
    items = await store.conversation_items("conv_1")
    assert items is not None and len(items) == 21 and items[0] == ("msg_a", b'{"id":"msg_a"}')
    assert {i for i, _ in items} == {"msg_a"} | {f"msg_{i}" for i in range(20)}  # no append lost
    assert await store.delete_conversation_item("conv_1", "msg_3") is True
    assert await store.delete_conversation_item("conv_1", "msg_3") is False
    assert await store.delete_conversation_item("conv_nope", "msg_3") is None
    assert len(await store.conversation_items("conv_1") or []) == 20
    updated = await store.update_conversation("conv_1", b'{"topic":"y"}')
    assert (
        updated is not None
        and updated.metadata_json == b'{"topic":"y"}'
        and updated.created_at == conv.created_at
    )
    assert await store.update_conversation("conv_nope", b"{}") is None
    assert await store.delete_conversation("conv_1") and not await store.delete_conversation("conv_1")
    assert await store.conversation_items("conv_1") is None


async def test_memory_conversations_are_bounded_in_bytes() -> None:
    from trtllm_responses.store import ConversationHistoryStore, StoredConversation

    store = ConversationHistoryStore(max_responses=100, max_bytes=20_000)
    for n in range(10):
        await store.create_conversation(StoredConversation(f"conv_{n}", 0, b"{}"), [])
        for i in range(5):
            await store.append_conversation_items(f"conv_{n}", [(f"msg_{i}", b"x" * 1000)])
        assert store._conversation_bytes <= 20_000
    # The most recent conversations are kept whole; the oldest were evicted to make room.
    assert (
        await store.conversation_items("conv_9") is not None
        and len(await store.conversation_items("conv_9") or []) == 5
    )
    assert await store.get_conversation("conv_0") is None
    assert (await store.stats()).evictions > 0
    assert await store.delete_conversation("conv_9") and store._conversation_bytes < 20_000


@pytest.mark.parametrize("url", ["memory", "sqlite"])
async def test_conversations_are_bounded_least_recently_used_first(url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No backend with bounds leaks conversations: the count and the bytes hold, the oldest go first."""
    from trtllm_responses.store import StoredConversation

    path = tmp_path / "conv.db"
    store = open_store(
        "memory" if url == "memory" else f"sqlite:///{path}", max_responses=4, max_bytes=30_000
    )
    for n in range(8):
        await store.create_conversation(StoredConversation(f"conv_{n}", 0, b"{}"), [])
        for i in range(3):
            await store.append_conversation_items(f"conv_{n}", [(f"msg_{i}", b"x" * 1000)])
        assert await store.get_conversation("conv_0") is not None, "used each turn: never the least recent"
    kept = [n for n in range(8) if await store.get_conversation(f"conv_{n}") is not None]
    assert kept == [0, 5, 6, 7], "at most 4, the least recently used evicted"
    assert len(await store.conversation_items("conv_7") or []) == 3, "kept conversations are whole"
    # Bytes: 12 items of 1000 fit in 30 000; growing one conversation evicts others to make room.
    for i in range(3, 25):
        assert await store.append_conversation_items("conv_7", [(f"msg_{i}", b"y" * 1000)])
    assert (
        await store.get_conversation("conv_0") is None
        and len(await store.conversation_items("conv_7") or []) == 25
    )
    # Deleting items frees their bytes: conversations created afterwards fit again.
    for i in range(25):
        assert await store.delete_conversation_item("conv_7", f"msg_{i}")
    await store.create_conversation(StoredConversation("conv_new", 0, b"{}"), [("msg_a", b"z" * 1000)])
    assert (
        await store.get_conversation("conv_7") is not None
        and await store.get_conversation("conv_new") is not None
    )
    await store.close()
    if url == "sqlite":  # the totals the bounds use match the rows
        import sqlite3

        db = sqlite3.connect(path)
        totals = dict(db.execute("SELECT k, v FROM totals").fetchall())
        rows = db.execute("SELECT COUNT(*), SUM(nbytes) FROM conversations").fetchone()
        items = db.execute("SELECT SUM(length(item_id) + length(data)) FROM conversation_items").fetchone()[0]
        metadata = db.execute("SELECT SUM(length(metadata)) FROM conversations").fetchone()[0]
        assert (totals["conversations"], totals["conversation_bytes"]) == rows
        assert rows[1] == items + metadata
        db.close()


async def test_sqlite_file_from_before_conversation_bounds_is_brought_up_to_date(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE conversations (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, metadata BLOB NOT NULL);"
        "CREATE TABLE conversation_items (seq INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL,"
        " item_id TEXT NOT NULL, data BLOB NOT NULL);"
        "INSERT INTO conversations VALUES ('conv_old', 1, X'7B7D');"
        "INSERT INTO conversation_items (conversation, item_id, data) VALUES ('conv_old', 'msg_1', X'68656C6C6F');"
    )
    old.commit()
    old.close()
    store = open_store(f"sqlite:///{path}", max_responses=1, max_bytes=1 << 20)
    assert await store.conversation_items("conv_old") == [("msg_1", b"hello")]
    from trtllm_responses.store import StoredConversation

    await store.create_conversation(StoredConversation("conv_new", 2, b"{}"), [])
    assert await store.get_conversation("conv_old") is None, "bounded from now on: one conversation at most"
    await store.close()


async def test_sqlite_locked_is_service_unavailable_then_recovers(tmp_path, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    from trtllm_responses.store.sqlite import SQLiteStore

    path = str(tmp_path / "locked.db")
    store = SQLiteStore(path, timeout=0.5)
    await store.put(turn(adapter, "before"))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # another process holding the database
    try:
        for call in (store.put(turn(adapter, "during")), store.get("resp_1")):
            with pytest.raises(ServiceUnavailableError):
                await asyncio.wait_for(call, 10)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert await store.get("resp_1") is not None
    assert await store.put(turn(adapter, "after"))
    await store.close()


async def test_a_conversations_head_and_held_ids_follow_every_write(store: ResponseStore) -> None:
    """``conversation_head`` (count, last id, items' bytes) and ``conversation_holds`` answer without reading
    the items, and stay true through create, append, delete of an item (first, last, a repeated id) and
    update; both are None for an unknown conversation."""
    from trtllm_responses.store import ConversationHead, StoredConversation

    assert await store.conversation_head("conv_1") is None
    assert await store.conversation_holds("conv_1", ["msg_a"]) is None
    await store.create_conversation(StoredConversation("conv_1", 1, b"{}"), [])
    assert await store.conversation_head("conv_1") == ConversationHead(0, None, 0)
    assert await store.conversation_holds("conv_1", ["msg_a"]) == set()
    assert await store.conversation_holds("conv_1", []) == set()
    await store.create_conversation(StoredConversation("conv_2", 1, b"{}"), [("msg_a", b"12345")])
    assert await store.conversation_head("conv_2") == ConversationHead(1, "msg_a", 5)
    assert await store.append_conversation_items("conv_1", [("msg_a", b"abc"), ("msg_b", b"de")])
    assert await store.append_conversation_items("conv_1", [("msg_c", b"f" * 100), ("msg_a", b"gh")])
    assert await store.conversation_head("conv_1") == ConversationHead(4, "msg_a", 107)
    assert await store.conversation_holds("conv_1", ["msg_a", "msg_x", "msg_c", "msg_a"]) == {
        "msg_a",
        "msg_c",
    }
    # Another conversation's ids are not this one's.
    assert await store.conversation_holds("conv_2", ["msg_b", "msg_c", "msg_a"]) == {"msg_a"}
    assert await store.delete_conversation_item("conv_1", "msg_a")  # the first of two msg_a
    assert await store.conversation_head("conv_1") == ConversationHead(3, "msg_a", 104)
    assert await store.conversation_holds("conv_1", ["msg_a"]) == {"msg_a"}, "the other msg_a is still there"
    assert await store.delete_conversation_item("conv_1", "msg_a")  # the last item
    assert await store.conversation_head("conv_1") == ConversationHead(2, "msg_c", 102)
    assert await store.conversation_holds("conv_1", ["msg_a", "msg_b"]) == {"msg_b"}
    assert await store.update_conversation("conv_1", b'{"k":"v"}') is not None
    assert await store.conversation_head("conv_1") == ConversationHead(2, "msg_c", 102)
    assert [i for i, _ in await store.conversation_items("conv_1") or []] == ["msg_b", "msg_c"]
    await asyncio.gather(
        *(store.append_conversation_items("conv_1", [(f"msg_{i}", b"x" * i)]) for i in range(20))
    )
    head = await store.conversation_head("conv_1")
    items = await store.conversation_items("conv_1") or []
    assert head == ConversationHead(22, items[-1][0], sum(len(d) for _, d in items)) and len(items) == 22
    assert await store.delete_conversation("conv_1")
    assert await store.conversation_head("conv_1") is None
    assert await store.conversation_holds("conv_1", ["msg_b"]) is None
    await store.create_conversation(StoredConversation("conv_1", 2, b"{}"), [])
    assert await store.conversation_head("conv_1") == ConversationHead(0, None, 0), (
        "nothing left of the old one"
    )
    assert await store.conversation_holds("conv_1", ["msg_b", "msg_c"]) == set()


async def test_sqlite_file_from_before_heads_gets_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A file whose conversations have no head columns is counted once at start, then kept by triggers."""
    import sqlite3

    from trtllm_responses.store import ConversationHead

    path = tmp_path / "before_heads.db"
    store = open_store(f"sqlite:///{path}", max_responses=10, max_bytes=1 << 20)
    await store.close()
    old = sqlite3.connect(path)  # back to the schema before heads
    old.executescript(
        "DROP TRIGGER conversation_items_ins; DROP TRIGGER conversation_items_del;"
        "DROP INDEX conversation_items_by_id;"
        "ALTER TABLE conversations DROP COLUMN item_count; ALTER TABLE conversations DROP COLUMN item_bytes;"
        "INSERT INTO conversations (id, created_at, metadata, used, nbytes) VALUES ('conv_old', 1, X'7B7D', 1, 0);"
        "INSERT INTO conversation_items (conversation, item_id, data) VALUES ('conv_old', 'msg_1', X'68656C6C6F'),"
        " ('conv_old', 'msg_2', X'6869');"
    )
    old.commit()
    old.close()
    store = open_store(f"sqlite:///{path}", max_responses=10, max_bytes=1 << 20)
    assert await store.conversation_head("conv_old") == ConversationHead(2, "msg_2", 7)
    assert await store.conversation_holds("conv_old", ["msg_1", "msg_3"]) == {"msg_1"}
    assert await store.append_conversation_items("conv_old", [("msg_3", b"abc")])
    assert await store.conversation_head("conv_old") == ConversationHead(3, "msg_3", 10)
    await store.close()


async def test_redis_conversation_from_before_heads_gets_one_on_first_use(redis_server) -> None:  # type: ignore[no-untyped-def]
    """Keys written before heads were kept (fields and a list only) are indexed from the list once."""
    import redis as redis_sync

    from trtllm_responses.store import ConversationHead

    redis_server.flush()
    raw = redis_sync.Redis.from_url(redis_server.url)
    raw.set("trtllm:conv:conv_old", b'{"created_at":1,"metadata":{}}')
    raw.rpush("trtllm:conv:conv_old:items", b"msg_1\0hello", b"msg_2\0hi")
    raw.close()
    for first in ("head", "holds", "append"):
        store = open_store(redis_server.url, max_responses=1, max_bytes=1 << 20)
        try:
            if first == "holds":
                assert await store.conversation_holds("conv_old", ["msg_2", "msg_9"]) == {"msg_2"}
            if first == "append":
                assert await store.append_conversation_items("conv_old", [("msg_3", b"abc")])
            head = await store.conversation_head("conv_old")
            assert head == (
                ConversationHead(3, "msg_3", 10) if first == "append" else ConversationHead(2, "msg_2", 7)
            )
            assert await store.conversation_holds("conv_old", ["msg_1", "msg_9"]) == {"msg_1"}
        finally:
            await store.close()
        cleanup = redis_sync.Redis.from_url(redis_server.url)  # back to the old keys for the next case
        cleanup.delete("trtllm:conv:conv_old:ids", "trtllm:conv:conv_old:bytes")
        cleanup.lrem("trtllm:conv:conv_old:items", 0, b"msg_3\0abc")
        cleanup.close()


# -- the item index: any stored item found by id (issue 32) ---------------------------------------


def holding(adapter: HarmonyAdapter, response_id: str, *ids: str) -> StoredResponse:
    """A stored response whose input is one message (``ids[0]``) and whose output items have ``ids[1:]``."""
    entry = turn(adapter, response_id, response_id=response_id)
    output = [{"type": "message", "id": i, "role": "assistant", "content": []} for i in ids[1:]]
    item = {"id": ids[0], "type": "message", "role": "user", "content": "hi"}
    return dataclasses.replace(
        entry,
        response_json=json.dumps({"id": response_id, "output": output}).encode(),
        input_item_ids=(ids[0],),
        input_items_json=(json.dumps(item).encode(),),
    )


async def test_the_item_index_names_the_response_holding_each_item(
    store: ResponseStore, adapter: HarmonyAdapter
) -> None:
    """Input and output items of every stored response are indexed; the response stored last holding an id is
    the one named; a deleted response takes its items out of the index (not another's)."""
    assert await store.item_responses(["msg_a"]) == {}
    await store.put(holding(adapter, "resp_a", "msg_a", "out_a1", "out_a2"))
    await store.put(holding(adapter, "resp_b", "msg_b", "out_b"))
    assert await store.item_responses(["out_a2", "msg_b", "msg_a", "nope", "out_a2"]) == {
        "out_a2": "resp_a",
        "msg_b": "resp_b",
        "msg_a": "resp_a",
    }
    await store.put(holding(adapter, "resp_c", "msg_a", "out_c"))  # a later response with a client's id again
    assert await store.item_responses(["msg_a", "out_a1"]) == {"msg_a": "resp_c", "out_a1": "resp_a"}
    assert await store.delete("resp_a")
    assert await store.item_responses(["msg_a", "out_a1", "out_a2", "out_b"]) == {
        "msg_a": "resp_c",
        "out_b": "resp_b",
    }
    await store.put(holding(adapter, "resp_b", "msg_b2"))  # replaced: the old version's items leave
    assert await store.item_responses(["msg_b", "out_b", "msg_b2"]) == {"msg_b2": "resp_b"}
    assert (await store.stats()).responses == 2  # the index is not counted as responses


@pytest.mark.parametrize("url", ["memory", "sqlite"])
async def test_evicted_responses_leave_the_item_index(url: str, tmp_path, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    store = open_store(
        url if url == "memory" else f"sqlite:///{tmp_path / 'idx.db'}", max_responses=2, max_bytes=1 << 30
    )
    for name in "abc":
        await store.put(holding(adapter, name, f"in_{name}", f"out_{name}"))
    assert await store.item_responses(["in_a", "out_a", "in_b", "out_c"]) == {"in_b": "b", "out_c": "c"}
    await store.close()


async def test_the_item_index_counts_in_the_byte_bound(adapter: HarmonyAdapter) -> None:
    """Memory: an entry is accounted with its index entries, so the index is bounded by --max_store_bytes."""
    from trtllm_responses.store.memory import _INDEX_ENTRY

    entry = holding(adapter, "resp_a", *(f"msg_{i:04d}" for i in range(200)))
    store = open_store("memory", max_responses=10, max_bytes=1 << 30)
    await store.put(entry)
    index = sum(_INDEX_ENTRY + sys.getsizeof(f"msg_{i:04d}") for i in range(200))
    assert (await store.stats()).bytes == entry.nbytes + index
    tight = open_store("memory", max_responses=10, max_bytes=entry.nbytes + index - 1)
    assert not await tight.put(entry)  # fits without its index, not with it
    assert await tight.item_responses(["msg_0000"]) == {}


async def test_redis_items_of_expired_responses_leave_the_index(
    redis_server, adapter: HarmonyAdapter
) -> None:  # type: ignore[no-untyped-def]
    """Redis cannot expire a hash field: a lookup that finds the response gone drops its fields, and never
    names it."""
    redis_server.flush()
    store = open_store(redis_server.url, max_responses=1, max_bytes=1 << 20, ttl=1)
    await store.put(holding(adapter, "resp_old", "msg_old", "out_old"))
    await store.put(holding(adapter, "resp_kept", "msg_kept"))
    await asyncio.sleep(0.6)
    assert await store.touch("resp_kept")  # renewed: outlives resp_old
    await asyncio.sleep(0.8)
    assert await store.item_responses(["msg_old", "out_old", "msg_kept"]) == {"msg_kept": "resp_kept"}
    fields = sorted(await store.client.hkeys("trtllm:items"))
    assert fields == [b"\0resp_kept", b"msg_kept"]  # resp_old's fields are gone
    await store.close()


async def test_redis_puts_sweep_an_index_grown_past_its_threshold(
    redis_server, adapter: HarmonyAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Past INDEX_SWEEP_FIELDS fields, every INDEX_SWEEP_EVERY-th put checks INDEX_SWEEP_BATCH fields and drops
    those of responses gone (evicted here: their keys deleted behind the store's back), without a lookup."""
    from trtllm_responses.store import redis as redis_store

    monkeypatch.setattr(redis_store, "INDEX_SWEEP_FIELDS", 8)
    monkeypatch.setattr(redis_store, "INDEX_SWEEP_EVERY", 2)
    monkeypatch.setattr(redis_store, "INDEX_SWEEP_BATCH", 100)
    redis_server.flush()
    store = open_store(redis_server.url, max_responses=1, max_bytes=1 << 20)
    for n in range(3):  # 3 fields each: its two items and its own list
        await store.put(holding(adapter, f"resp_{n}", f"in_{n}", f"out_{n}"))
        await store.client.delete(f"trtllm:resp:resp_{n}")  # evicted by Redis: its fields stay until swept
    assert await store.client.hlen("trtllm:items") == 9  # 3 puts; the 3rd crossed 8 fields, 1st put over it
    await store.put(holding(adapter, "resp_live", "in_live"))  # the 2nd put over it: a sweep
    assert sorted(await store.client.hkeys("trtllm:items")) == [b"\0resp_live", b"in_live"]
    await store.close()
