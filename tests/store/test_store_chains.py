"""A chain of stored responses writes what is new (docs/sessions-and-kv-cache.md#what-the-store-keeps).

An entry that continues a stored response holds its own messages and a reference to its parent; a read
assembles the history. On memory, SQLite and Redis: a 40-turn chain's stored bytes stay within 2× its final
history, deleting (or evicting, or outliving) any response breaks none that continue it, each chain read
assembles at most ``SNAPSHOT_EVERY`` entries, and what was stored before deltas reads as a snapshot.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator

import pytest
from openai import NotFoundError, OpenAI
from support.server_harness import ServerFactory
from support.store_urls import BACKENDS, backend_url

from trtllm_responses.adapter import EMPTY_HISTORY, ConversationHistory, HarmonyAdapter
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.store import Parent, ResponseStore, StoredResponse, encode_entry, open_store, scoped
from trtllm_responses.store.base import SNAPSHOT_EVERY
from trtllm_responses.store.codec import chain_of
from trtllm_responses.store.memory import accounted_bytes
from trtllm_responses.store.sqlite import _SCHEMA

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing".split()


@pytest.fixture(params=BACKENDS)
async def backend(request, tmp_path) -> AsyncIterator[tuple[str, ResponseStore]]:  # type: ignore[no-untyped-def]
    opened = open_store(backend_url(request, tmp_path), max_responses=1000, max_bytes=1 << 28)
    yield request.param, opened
    await opened.close()


def step(
    adapter: HarmonyAdapter, n: int, text: str, previous: StoredResponse | None = None
) -> StoredResponse:
    """Turn ``n`` of a chain, as the service stores it (``responses/keeping.py``): the previous turn's history
    extended by this turn's input and output, ``previous`` its parent."""
    history: ConversationHistory = previous.history if previous is not None else EMPTY_HISTORY
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    prompt = adapter.build_prompt(parse_request({"input": text, "tools": tools}), history)
    output = [
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": f"turn {n}"}]},
        {"type": "function_call", "call_id": f"call_{n}", "name": "lookup", "arguments": '{"q": 1}'},
    ]
    item = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }
    return StoredResponse(
        id=f"resp_{n}",
        response_json=json.dumps({"id": f"resp_{n}", "output": output}).encode(),
        input_item_ids=(f"msg_{n}",),
        input_items_json=(json.dumps(item).encode(),),
        history=adapter.continue_history(prompt, output),
        parent=None if previous is None else Parent(previous.id, previous.history),
    )


def chain(adapter: HarmonyAdapter, turns: int, words: int = 4) -> list[StoredResponse]:
    """``turns`` entries, each continuing the one before, each with ``words`` words of new input."""
    out: list[StoredResponse] = []
    for n in range(turns):
        text = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(words))
        out.append(step(adapter, n, text, out[-1] if out else None))
    return out


def same_history(got: StoredResponse | None, want: StoredResponse) -> None:
    assert got is not None
    assert (got.id, got.response_json, got.input_items_json) == (
        want.id,
        want.response_json,
        want.input_items_json,
    )
    assert got.history.messages == want.history.messages
    assert dict(got.history.calls) == dict(want.history.calls)


async def test_a_40_turn_chain_stores_at_most_twice_its_final_history(
    backend: tuple[str, ResponseStore], adapter: HarmonyAdapter
) -> None:
    """~12 KB of new input a turn, 40 turns: the bytes a backend counts (``scope_bytes``: memory's objects,
    the others' encoded rows) against the last entry's history counted once (memory: its accounted bytes
    alone; SQLite and Redis: ``encode_entry`` of it). Every entry whole self-contained (before this
    change) was ~20× it."""
    kind, store = backend
    entries = chain(adapter, 40, words=2400)  # ~12 KB of text a turn
    for e in entries:
        assert await store.put(e)
    last = entries[-1]
    final = accounted_bytes(last) if kind == "memory" else len(encode_entry(last))
    stored = await store.scope_bytes("")
    whole = sum(accounted_bytes(e) if kind == "memory" else len(encode_entry(e)) for e in entries)
    assert stored <= 2 * final, (stored, final)
    assert whole >= 10 * final  # each entry holding its whole history, as before
    same_history(await store.get(last.id), last)
    same_history(await store.get(entries[20].id), entries[20])


@pytest.mark.parametrize("scope", ["", "team-a/"], ids=["whole", "scoped"])
async def test_deleting_any_response_breaks_none_that_continue_it(
    backend: tuple[str, ResponseStore], adapter: HarmonyAdapter, scope: str
) -> None:
    """Deleted: it reads as unknown and its items leave the index; what continues it reads whole. Its bytes
    stay counted to its scope until the last response depending on it goes; then all of it goes."""
    kind, whole_store = backend
    store = scoped(whole_store, scope)
    entries = chain(adapter, 5)
    branch = step(adapter, 9, "another branch", entries[1])  # a second child of resp_1
    for e in (*entries, branch):
        assert await store.put(e)
    held = await store.scope_bytes("")
    assert await store.delete("resp_1") and await store.delete("resp_0")
    assert await store.get("resp_1") is None and not await store.touch("resp_0")
    assert not await store.delete("resp_1")
    assert await store.item_responses(["msg_0", "msg_1", "msg_4"]) == {"msg_4": "resp_4"}
    assert await store.scope_bytes("") == held  # hidden, still counted: their dependants hold them
    same_history(await store.get("resp_4"), entries[4])
    same_history(await store.get(branch.id), branch)
    assert await store.touch("resp_4")
    for response_id in ("resp_3", "resp_4", "resp_2"):
        assert await store.delete(response_id)
    same_history(await store.get(branch.id), branch)
    assert await store.delete(branch.id)
    assert await store.scope_bytes("") == 0  # the last dependant took the hidden ones with it
    assert (await whole_store.stats()).responses == 0 or kind == "redis"


@pytest.mark.parametrize("url", ["memory", "sqlite"])
async def test_eviction_breaks_no_chain(url: str, tmp_path, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    """The least recently used responses go first; one others continue only leaves the API."""
    store = open_store(
        url if url == "memory" else f"sqlite:///{tmp_path / 'e.db'}", max_responses=3, max_bytes=1 << 28
    )
    entries = chain(adapter, 8)
    for e in entries:
        assert await store.put(e)
    assert [e.id for e in entries if await store.touch(e.id)] == ["resp_5", "resp_6", "resp_7"]
    same_history(await store.get("resp_7"), entries[7])
    stats = await store.stats()
    assert stats.responses == 3 and stats.evictions == 5
    await store.close()


async def test_a_scope_never_continues_another_scopes_response(
    backend: tuple[str, ResponseStore], adapter: HarmonyAdapter
) -> None:
    """A parent id is looked up in the writer's own scope: another tenant's response of that id is not it."""
    _, whole = backend
    a, b = scoped(whole, "a/"), scoped(whole, "b/")
    first, second = chain(adapter, 2)
    await a.put(first)
    assert await b.put(second)  # its parent is not b's: stored whole
    await a.delete(first.id)
    assert await a.scope_bytes("") == 0  # nothing of b's held a's response
    same_history(await b.get(second.id), second)


async def test_reads_assemble_at_most_snapshot_every_entries(
    backend: tuple[str, ResponseStore], adapter: HarmonyAdapter, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    kind, store = backend
    entries = chain(adapter, SNAPSHOT_EVERY + 6, words=1)
    for e in entries:
        assert await store.put(e)
    for e in (entries[SNAPSHOT_EVERY - 1], entries[SNAPSHOT_EVERY], entries[-1]):
        same_history(await store.get(e.id), e)
    if kind == "sqlite":
        db = sqlite3.connect(store.path)  # type: ignore[attr-defined]
        depths = [row[0] for row in db.execute("SELECT depth FROM responses ORDER BY used")]
        db.close()
        assert max(depths) == SNAPSHOT_EVERY - 1 and depths.count(0) == 2
    if kind == "redis":
        raw = [await store.client.get(f"trtllm:resp:{e.id}") for e in entries]  # type: ignore[attr-defined]
        lengths = [len(chain_of(r)[1]) for r in raw]
        assert max(lengths) == SNAPSHOT_EVERY - 1 and lengths.count(0) == 2


async def test_an_sqlite_file_from_before_deltas_is_read_and_extended(
    tmp_path, adapter: HarmonyAdapter
) -> None:  # type: ignore[no-untyped-def]
    """A file of the layout before (``user_version`` 0, ``TRS1`` rows): its rows read as snapshots and are
    continued; a file of a newer layout than this release's is refused."""
    path = tmp_path / "old.db"
    first, second, third = chain(adapter, 3)
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA)  # the tables as they were, before the columns deltas added
    data = encode_entry(first)
    db.execute(
        "INSERT INTO responses (id, data, nbytes, used) VALUES (?, ?, ?, 1)", (first.id, data, len(data))
    )
    db.commit()
    db.close()
    store = open_store(f"sqlite:///{path}", max_responses=100, max_bytes=1 << 28)
    same_history(await store.get(first.id), first)
    assert await store.put(second) and await store.put(
        third
    )  # a snapshot (the old row's count unknown), a delta
    same_history(await store.get(third.id), third)
    await store.delete(second.id)
    same_history(await store.get(third.id), third)
    await store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert db.execute("SELECT depth FROM responses WHERE id = 'resp_2'").fetchone()[0] == 1
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(sqlite3.DatabaseError, match="newer store layout"):
        open_store(f"sqlite:///{path}", max_responses=100, max_bytes=1 << 28)


async def test_redis_reads_entries_from_before_deltas(redis_server, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    redis_server.flush()
    store = open_store(redis_server.url, max_responses=100, max_bytes=1 << 28)
    first, second, third = chain(adapter, 3)
    await store.client.set(f"trtllm:resp:{first.id}", encode_entry(first))  # type: ignore[attr-defined]
    same_history(await store.get(first.id), first)
    assert await store.put(second) and await store.put(third)
    same_history(await store.get(third.id), third)
    await store.close()


async def test_redis_a_chain_lives_as_long_as_its_last_reader(redis_server, adapter: HarmonyAdapter) -> None:  # type: ignore[no-untyped-def]
    """Reading (or putting) a delta renews the TTL of every entry it extends: a parent never expires first,
    even one deleted (hidden) meanwhile; unread, the whole chain expires."""
    redis_server.flush()
    store = open_store(redis_server.url, max_responses=100, max_bytes=1 << 28, ttl=2)
    entries = chain(adapter, 3)
    for e in entries:
        assert await store.put(e)
    assert await store.delete("resp_1")
    for _ in range(3):
        await asyncio.sleep(1.0)
        assert await store.touch("resp_2")  # only resp_2 is read: its chain lives on with it
    same_history(await store.get("resp_2"), entries[2])
    await asyncio.sleep(2.5)
    assert await store.get("resp_2") is None
    assert await store.client.dbsize() <= 3  # type: ignore[attr-defined]  # the index and scope keys only
    await store.close()


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_client_continues_a_chain_whose_earlier_responses_it_deleted(
    serve: ServerFactory, kind: str, tmp_path, request: pytest.FixtureRequest
) -> None:  # type: ignore[no-untyped-def]
    """Through the API: a chain's turns are stored as deltas (one database row each of its turn's size), a
    client deletes every turn but the last, and a server that never saw the chain (another process: the
    store is all it has) continues the last one with the same prompt as before the deletes."""
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'chain.db'}"
    else:
        redis = request.getfixturevalue("redis_server")
        redis.flush()
        url = redis.url
    ids: list[str] = []
    with serve(store=open_store(url, max_responses=100, max_bytes=1 << 28)) as running:
        with OpenAI(base_url=running.base_url + "/v1", api_key="x") as client:
            for n in range(6):
                previous = {"previous_response_id": ids[-1]} if ids else {}
                ids.append(
                    client.responses.create(model="m", input=f"turn {n} " + "words " * 2000, **previous).id
                )
            before = client.responses.create(
                model="m", input="and then?", previous_response_id=ids[-1], store=False
            )
            for response_id in ids[:-1]:
                client.responses.delete(response_id)
    if kind == "sqlite":
        db = sqlite3.connect(tmp_path / "chain.db")
        sizes = [row[0] for row in db.execute("SELECT length(data) FROM responses ORDER BY depth")]
        db.close()
        assert len(sizes) == 6 and max(sizes) < 2 * min(sizes)  # hidden rows kept; each its own turn's size
    with serve(store=open_store(url, max_responses=100, max_bytes=1 << 28)) as running:
        with OpenAI(base_url=running.base_url + "/v1", api_key="x") as client:
            with pytest.raises(NotFoundError):
                client.responses.retrieve(ids[0])
            items = client.responses.input_items.list(ids[-1]).data
            assert len(items) == 1 and "turn 5" in items[0].content[0].text  # type: ignore[union-attr]
            after = client.responses.create(
                model="m", input="and then?", previous_response_id=ids[-1], store=False
            )
            assert after.usage is not None and before.usage is not None
            assert after.usage.input_tokens == before.usage.input_tokens


async def test_replacing_a_response_others_extend_keeps_their_histories(
    backend: tuple[str, ResponseStore], adapter: HarmonyAdapter
) -> None:
    """Memory and SQLite replace it (SQLite renames the old row out of the way, hidden, for its dependants);
    Redis refuses (its dependants' chains name the id). Either way a dependant reads what it was written on."""
    kind, store = backend
    first, second = chain(adapter, 2)
    assert await store.put(first) and await store.put(second)
    other = step(adapter, 0, "something else entirely")
    assert await store.put(other) is (kind != "redis")
    same_history(await store.get(first.id), other if kind != "redis" else first)
    same_history(await store.get(second.id), second)
    assert await store.delete(second.id)
    assert await store.delete(first.id) and await store.scope_bytes("") == 0
