"""The LRU ConversationHistoryStore: bounds, recency, counters, immutability, thread safety."""

from __future__ import annotations

import dataclasses
import random
import threading

import pytest

from trtllm_responses.adapter import EMPTY_HISTORY, HarmonyAdapter
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.store import ConversationHistoryStore, StoredResponse
from trtllm_responses.store.memory import accounted_bytes


def now(coroutine):  # type: ignore[no-untyped-def]
    """The result of a coroutine that never suspends (the memory store's methods never await)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the memory store suspended")


def entry(response_id: str, payload: int = 10) -> StoredResponse:
    return StoredResponse(
        id=response_id,
        response_json=b"x" * payload,
        input_item_ids=("msg_1",),
        input_items_json=(b'{"id":"msg_1"}',),
        history=EMPTY_HISTORY,
    )


def test_least_recently_used_is_evicted_first() -> None:
    store = ConversationHistoryStore(max_responses=2)
    now(store.put(entry("a")))
    now(store.put(entry("b")))
    assert now(store.get("a")) is not None  # a is now more recent than b
    now(store.put(entry("c")))
    assert now(store.get("b")) is None and now(store.get("a")) is not None and now(store.get("c")) is not None
    assert now(store.stats()).evictions == 1 and len(store) == 2


def test_byte_bound_evicts_until_it_fits() -> None:
    size = accounted_bytes(entry("a", 1000))  # its nbytes and its item (msg_1) in the index
    store = ConversationHistoryStore(max_responses=100, max_bytes=size * 3)
    for name in "abcde":
        now(store.put(entry(name, 1000)))
        assert now(store.stats()).bytes <= store.max_bytes
    assert [n for n in "abcde" if now(store.get(n))] == ["c", "d", "e"]
    assert now(store.stats()).evictions == 2 and now(store.stats()).bytes == 3 * size


def test_an_entry_larger_than_the_store_is_refused_and_counted() -> None:
    store = ConversationHistoryStore(max_bytes=accounted_bytes(entry("small", 10)) + 100)
    now(store.put(entry("small", 10)))
    assert now(store.put(entry("huge", 10_000))) is False
    assert now(store.get("huge")) is None and now(store.get("small")) is not None
    assert now(store.stats()).rejected == 1


def test_replacing_and_deleting_keep_the_byte_count_exact() -> None:
    store = ConversationHistoryStore()
    now(store.put(entry("a", 100)))
    now(store.put(entry("a", 300)))
    assert now(store.stats()).bytes == accounted_bytes(entry("a", 300)) and len(store) == 1
    assert now(store.delete("a")) and not now(store.delete("a"))
    assert now(store.stats()).bytes == 0 and now(store.stats()).responses == 0


def test_entries_and_histories_cannot_be_mutated(adapter: HarmonyAdapter) -> None:
    prompt = adapter.build_prompt(
        parse_request({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})
    )
    stored = StoredResponse("r", b"{}", ("i",), (b"{}",), prompt.history)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stored.history = EMPTY_HISTORY  # type: ignore[misc]
    with pytest.raises(TypeError):
        stored.history.calls["d"] = "g"  # type: ignore[index]
    assert isinstance(stored.history.messages, tuple)
    longer = stored.history.extended(adapter.render_messages([]), {"d": "g"})
    assert "d" in longer.calls and "d" not in stored.history.calls


def test_history_bytes_grow_with_the_conversation(adapter: HarmonyAdapter) -> None:
    short = adapter.build_prompt(parse_request({"input": "hi"})).history
    long = adapter.build_prompt(parse_request({"input": "word " * 5000})).history
    assert long.nbytes > short.nbytes + 5000 * 8


def test_concurrent_use_keeps_the_invariants() -> None:
    store = ConversationHistoryStore(max_responses=50, max_bytes=entry("x", 100).nbytes * 40)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(2000):
                key = f"r{rng.randrange(200)}"
                op = rng.random()
                if op < 0.5:
                    now(store.put(entry(key, rng.randrange(10, 150))))
                elif op < 0.9:
                    got = now(store.get(key))
                    assert got is None or got.id == key
                else:
                    now(store.delete(key))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = now(store.stats())
    assert stats.responses <= 50 and stats.bytes <= stats.max_bytes
    assert stats.bytes == sum(accounted_bytes(now(store.get(k))) for k in list(store._entries))  # type: ignore[arg-type]


def test_accounted_bytes_bound_the_real_memory(encoding, adapter) -> None:  # type: ignore[no-untyped-def]
    """What the store counts is at least what its entries really keep alive (measured with tracemalloc)."""
    import asyncio
    import gc
    import json
    import tracemalloc

    from trtllm_responses.executors.echo import EchoExecutor
    from trtllm_responses.responses.service import ResponsesService

    store = ConversationHistoryStore(max_responses=10**6, max_bytes=1 << 40)
    service = ResponsesService(executor=EchoExecutor(encoding), store=store, adapter=adapter, model_name="m")
    tools = [
        {
            "type": "function",
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        }
    ]

    async def one(body: dict) -> dict:
        return json.loads(
            await service.run(await service.prepare(await service.decode(json.dumps(body).encode()))).drive()
        )

    async def workload(n: int) -> None:
        previous = None
        for i in range(n):
            body: dict = {
                "input": ["#lorem 150", "Grüße 你好 " * 40, "call it", "word " * 600][i % 4],
                "tools": tools if i % 4 == 2 else [],
            }
            if previous and i % 3:
                body["previous_response_id"] = previous
            previous = (await one(body))["id"]

    asyncio.run(workload(40))  # warm caches first
    gc.collect()
    tracemalloc.start()
    real_before = tracemalloc.get_traced_memory()[0]
    counted_before = now(store.stats()).bytes
    asyncio.run(workload(120))
    gc.collect()
    real = tracemalloc.get_traced_memory()[0] - real_before
    tracemalloc.stop()
    counted = now(store.stats()).bytes - counted_before
    assert counted >= real, f"the store counts {counted} bytes for {real} bytes really held"


def test_stored_bytes_hold_no_spare_buffer() -> None:
    import tracemalloc

    import orjson

    payload = orjson.dumps({"text": "word " * 600})  # orjson's bytes keep a large working buffer
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    stored = StoredResponse("r", payload, (), (), EMPTY_HISTORY)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert stored.response_json == payload
    assert held < 3 * len(payload)
    # The input items' JSON is its writer's to copy so, in steps (responses/prepare.py, keep_input:
    # tests/responses/test_prepare_stages.py); the entry keeps what it is given.


def test_a_large_entry_is_counted_in_steps_as_a_small_one_at_once() -> None:
    import asyncio

    n = 5000  # past the 1,024 ids counted at once
    ids = tuple(f"msg_{i}" for i in range(n))
    large = StoredResponse("big", b"{}", ids, tuple(b'{"id":"%d"}' % i for i in range(n)), EMPTY_HISTORY)
    store = ConversationHistoryStore()
    assert asyncio.run(store.put(large))
    assert now(store.stats()).bytes == accounted_bytes(large)
    assert accounted_bytes(large) > n * (128 + 2 * 33)  # an index entry, an id and a JSON an item at least
