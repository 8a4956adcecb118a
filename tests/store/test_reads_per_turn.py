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
from trtllm_responses.store import ResponseStore, StoredResponse, open_store

TURNS = 50


class CountingStore:
    """A ResponseStore that forwards every call and counts calls, entries and items read."""

    def __init__(self, inner: ResponseStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.entries = 0  # stored responses read
        self.items = 0  # conversation items (or their ids) read

    def reset(self) -> dict[str, Any]:
        """What was counted since the last reset (and start again)."""
        counted = {"calls": dict(self.calls), "entries": self.entries, "items": self.items}
        self.calls, self.entries, self.items = Counter(), 0, 0
        return counted

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = await method(*args, **kwargs)
            if isinstance(result, StoredResponse):
                self.entries += 1
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
    final = orjson.loads(await service.run(await service.prepare(orjson.dumps(body))).drive())
    assert final["status"] == "completed", final
    return final  # type: ignore[no-any-return]


def assert_bounded(per_turn: list[dict[str, Any]]) -> None:
    """Turn 5 costs what turn 50 costs, call for call; and no turn reads more than a few things."""
    assert per_turn[4] == per_turn[-1], f"turn 5: {per_turn[4]}\nturn {len(per_turn)}: {per_turn[-1]}"
    for n, counted in enumerate(per_turn[1:], 2):
        assert sum(counted["calls"].values()) <= 6, (n, counted)
        assert counted["entries"] <= 1 and counted["items"] <= 2, (n, counted)


async def test_a_previous_response_id_chain_reads_one_entry_a_turn(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(counting, encoding, adapter)
    previous = None
    per_turn = []
    for i in range(TURNS):
        body: dict[str, Any] = {"input": f"turn {i}: go on"}
        if previous is not None:
            body["previous_response_id"] = previous
        counting.reset()
        previous = (await turn(service, body))["id"]
        per_turn.append(counting.reset())
    assert_bounded(per_turn)
    assert per_turn[-1]["entries"] == 1 and per_turn[-1]["calls"].get("get") == 1


async def test_a_conversation_reads_a_bounded_amount_a_turn(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    service = service_on(counting, encoding, adapter)
    conversation = orjson.loads(await service.conversations.create(b"{}"))["id"]
    per_turn = []
    for i in range(TURNS):
        counting.reset()
        # Input items with ids of their own: each turn also asks whether the conversation holds them.
        message = {"type": "message", "role": "user", "content": f"turn {i}: go on", "id": f"msg_turn{i}"}
        await turn(service, {"input": [message], "conversation": conversation})
        per_turn.append(counting.reset())
    assert_bounded(per_turn)
    assert "conversation_items" not in per_turn[-1]["calls"], "the process held the history: no item is read"
    # The conversation holds every turn's items, in order, whatever was read.
    items = await counting.inner.conversation_items(conversation)
    assert items is not None and len(items) == 3 * TURNS  # each turn: its input, reasoning and answer
    assert [item_id for item_id, _ in items[::3]] == [f"msg_turn{i}" for i in range(TURNS)]


async def test_a_conversation_new_to_this_process_reads_its_items_once(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """Another process (here: a new service over the same store) renders it once, then reads no item."""
    first = service_on(counting, encoding, adapter)
    conversation = orjson.loads(await first.conversations.create(b"{}"))["id"]
    for i in range(10):
        await turn(first, {"input": f"turn {i}", "conversation": conversation})
    second = service_on(counting, encoding, adapter)
    counting.reset()
    await turn(second, {"input": "and now?", "conversation": conversation})
    cold = counting.reset()
    assert cold["calls"].get("conversation_items") == 1 and cold["items"] >= 20
    await turn(second, {"input": "and then?", "conversation": conversation})
    assert "conversation_items" not in counting.reset()["calls"]


async def test_a_reference_or_a_repeated_id_in_a_remembered_conversation_still_works(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """Items are read when an ``item_reference`` needs them (and only then); a repeated id is still a 400."""
    from trtllm_responses.core.errors import InvalidRequestError

    service = service_on(counting, encoding, adapter)
    quoted = {"type": "message", "role": "user", "content": "Quoted from the conversation", "id": "msg_q"}
    conversation = orjson.loads(await service.conversations.create(orjson.dumps({"items": [quoted]})))["id"]
    for i in range(3):
        await turn(service, {"input": f"turn {i}", "conversation": conversation})
    counting.reset()
    final = await turn(
        service, {"input": [{"type": "item_reference", "id": "msg_q"}], "conversation": conversation}
    )
    assert final["output"][-1]["content"][0]["text"] == "Quoted from the conversation"
    assert counting.reset()["calls"].get("conversation_items") == 1
    with pytest.raises(InvalidRequestError) as refused:
        await service.prepare(orjson.dumps({"input": [quoted], "conversation": conversation}))
    assert refused.value.code == "duplicate_item_id" and refused.value.param == "input[0].id"
    assert "conversation_items" not in counting.reset()["calls"]


async def test_a_conversation_too_large_for_the_window_is_refused_before_its_items_are_read(
    counting: CountingStore, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """The size refusal reads the head's byte total, not the items (before: every item was read first)."""
    from trtllm_responses.core.errors import InvalidRequestError

    service = ResponsesService(
        executor=EchoExecutor(encoding),
        store=counting,  # type: ignore[arg-type]
        adapter=adapter,
        model_name="m",
        max_input_bytes=64 << 10,
    )
    items = [{"type": "message", "role": "user", "content": "word " * 2000} for _ in range(20)]
    conversation = orjson.loads(await service.conversations.create(orjson.dumps({"items": items})))["id"]
    counting.reset()
    with pytest.raises(InvalidRequestError) as refused:
        await service.prepare(orjson.dumps({"input": "and now?", "conversation": conversation}))
    assert refused.value.code == "context_length_exceeded" and refused.value.param == "conversation"
    assert counting.reset()["items"] == 0
