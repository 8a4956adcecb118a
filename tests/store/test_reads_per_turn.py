"""Continuing a long session reads a bounded amount from the store, on every backend (issue 27, point 3).

A counting wrapper around each backend (memory, SQLite, a real Redis) records, per turn, every store call
and how many entries and conversation items it read, while ``ResponsesService`` drives a 50-turn
``previous_response_id`` chain and a 50-turn conversation. Turn 5 and turn 50 must cost the same.

Before: a conversation turn read every item of the conversation (``conversation_items``), so turn 50
read ten times what turn 5 read, even when the process held the conversation's rendered history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from support.store_urls import BACKENDS, backend_url

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.responses.service import ResponsesService
from trtllm_responses.store import ResponseStore, StoredResponse, encode_entry, open_store

TURNS = 50


class CountingStore:
    """A ResponseStore that forwards every call and counts calls, entries and items read."""

    def __init__(self, inner: ResponseStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.entries = 0  # stored responses read
        self.entry_bytes = 0  # their encoded size (their histories, mostly)
        self.items = 0  # conversation items (or their ids) read

    def reset(self) -> dict[str, Any]:
        """What was counted since the last reset (and start again)."""
        counted = {"calls": dict(self.calls), "entries": self.entries, "items": self.items}
        counted["entry_bytes"] = self.entry_bytes
        self.calls, self.entries, self.items, self.entry_bytes = Counter(), 0, 0, 0
        return counted

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = await method(*args, **kwargs)
            if isinstance(result, StoredResponse):
                self.entries += 1
                self.entry_bytes += len(encode_entry(result))
            elif isinstance(result, (list, set, frozenset, dict)):
                self.items += len(result)  # items, or the ids found among those asked for
            elif isinstance(result, tuple) and result and isinstance(result[0], list):
                self.items += len(result[0])  # a page
            return result

        return counted


@pytest.fixture(params=BACKENDS)
async def counting(request, tmp_path) -> AsyncIterator[CountingStore]:  # type: ignore[no-untyped-def]
    store = open_store(backend_url(request, tmp_path), max_responses=10_000, max_bytes=1 << 30)
    yield CountingStore(store)
    await store.close()


def service_on(store: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter) -> ResponsesService:
    return ResponsesService(
        executor=EchoExecutor(encoding),
        store=store,  # type: ignore[arg-type]
        adapter=adapter,
        model_name="m",
    )


async def turn(service: ResponsesService, body: dict[str, Any]) -> dict[str, Any]:
    final = orjson.loads(
        await service.run(await service.prepare(await service.decode(orjson.dumps(body)))).drive()
    )
    assert final["status"] == "completed", final
    return final  # type: ignore[no-any-return]


def assert_bounded(per_turn: list[dict[str, Any]]) -> None:
    """Turn 5 costs what turn 50 costs, call for call; and no turn reads more than a few things."""
    assert per_turn[4] == per_turn[-1], f"turn 5: {per_turn[4]}\nturn {len(per_turn)}: {per_turn[-1]}"
    for n, counted in enumerate(per_turn[1:], 2):
        assert sum(counted["calls"].values()) <= 6, (n, counted)
        assert counted["entries"] <= 1 and counted["items"] <= 2, (n, counted)


async def chain(service: ResponsesService, counting: CountingStore, turns: int, previous: str | None = None):  # type: ignore[no-untyped-def]
    """``turns`` turns of a ``previous_response_id`` chain (continuing ``previous``): the last id, and what
    each turn read."""
    per_turn = []
    for i in range(turns):
        body: dict[str, Any] = {"input": f"turn {i}: go on " + "and on " * 50}
        if previous is not None:
            body["previous_response_id"] = previous
        counting.reset()
        previous = (await turn(service, body))["id"]
        per_turn.append(counting.reset())
    return previous, per_turn


async def test_a_previous_response_id_chain_reads_none_of_its_history_a_turn(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """The process that stored a turn remembers its history: the next asks the store only whether the
    response is still there (``touch``), however long the chain."""
    service = service_on(counting, encoding, adapter)
    _, per_turn = await chain(service, counting, TURNS)
    assert_bounded(per_turn)
    assert per_turn[-1]["entries"] == 0 and per_turn[-1]["entry_bytes"] == 0
    assert per_turn[-1]["calls"].get("touch") == 1 and "get" not in per_turn[-1]["calls"]


async def test_a_chain_new_to_this_process_is_read_once(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """Another process (a new service over the same store) reads the entry it continues once, then no more."""
    last, _ = await chain(service_on(counting, encoding, adapter), counting, 20)
    other = service_on(counting, encoding, adapter)
    _, per_turn = await chain(other, counting, 3, last)
    assert per_turn[0]["entries"] == 1 and per_turn[0]["entry_bytes"] > 20_000  # the whole history, once
    assert [t["entries"] for t in per_turn[1:]] == [0, 0]


async def test_a_remembered_response_deleted_from_the_store_is_not_continued(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    from trtllm_responses.core.errors import NotFoundError

    service = service_on(counting, encoding, adapter)
    last, _ = await chain(service, counting, 3)
    assert await counting.delete(last)  # e.g. by another process
    with pytest.raises(NotFoundError):
        await service.prepare(
            await service.decode(orjson.dumps({"input": "go on", "previous_response_id": last}))
        )


async def test_remembered_histories_stay_within_their_budget(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    def service(budget: int) -> ResponsesService:
        return ResponsesService(
            executor=EchoExecutor(encoding),
            store=counting,  # type: ignore[arg-type]
            adapter=adapter,
            model_name="m",
            chain_history_cache_bytes=budget,
        )

    last, _ = await chain(service(1 << 30), counting, 30)
    newest = (await counting.get(last)).history.nbytes  # type: ignore[union-attr]
    budget = 4 * newest + 1  # one history may take a quarter of the budget: the newest fits
    small = service(budget)
    _, per_turn = await chain(small, counting, 30)
    held = small.chain_histories
    assert 0 < held.bytes <= budget and len(held) < 30  # crossed: the oldest histories were let go
    assert per_turn[-1]["entries"] == 0  # the newest is still remembered
