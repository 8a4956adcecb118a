"""The translation of TensorRT-LLM's KV cache events into Dynamo's wire events (``executors/kv_publisher.py``),
on event sequences the fake does not produce: other attention windows, lost events, partial blocks.

The inputs are ``KVCacheEventSerializer``'s shapes (``tensorrt_llm/_utils.py``); the expected outputs are
Dynamo's "KV Events for Custom Engines" events, as its TensorRT-LLM worker maps them
(``components/src/dynamo/trtllm/publisher.py``) and TensorRT-LLM's own fan-out treats a gap
(``serve/kv_event_fanout.py``).
"""

from __future__ import annotations

from typing import Any

from trtllm_responses.executors.kv_publisher import KvEventTranslator

BLOCK = 4


def _created(event_id: int, window: int, rank: int | None = None) -> dict[str, Any]:
    event = {"event_id": event_id, "data": {"type": "created", "num_blocks_per_cache_level": [10, 0]}}
    event["window_size"] = window
    if rank is not None:
        event["attention_dp_rank"] = rank
    return event


def _stored(
    event_id: int, window: int, parent: int | None, blocks: list[tuple[int, list[int]]]
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "window_size": window,
        "data": {
            "type": "stored",
            "parent_hash": parent,
            "blocks": [
                {
                    "type": "stored_block",
                    "block_hash": h,
                    "tokens": [{"type": "unique_token", "token_id": t, "token_extra_id": 0} for t in tokens],
                    "cache_level": 0,
                    "priority": 35,
                }
                for h, tokens in blocks
            ],
        },
    }


def _removed(event_id: int, window: int, hashes: list[int]) -> dict[str, Any]:
    return {"event_id": event_id, "window_size": window, "data": {"type": "removed", "block_hashes": hashes}}


def test_only_the_full_attention_windows_events_are_sent() -> None:
    translator = KvEventTranslator(BLOCK)
    out = translator.translate(
        [
            _created(0, 128),
            _created(1, 4096),
            _stored(2, 128, None, [(11, [1, 2, 3, 4])]),  # gpt-oss's sliding-window pool
            _stored(3, 4096, None, [(21, [1, 2, 3, 4]), (22, [5, 6, 7, 8])]),
            _removed(4, 128, [11]),
        ]
    )
    assert out == {
        0: [
            {
                "type": "BlockStored",
                "block_hashes": [21, 22],
                "parent_block_hash": None,
                "token_ids": [1, 2, 3, 4, 5, 6, 7, 8],
                "block_size": BLOCK,
                "lora_id": None,
            }
        ]
    }


def test_hashes_are_signed_64_bit_and_a_partial_block_is_neither_stored_nor_removed() -> None:
    translator = KvEventTranslator(BLOCK)
    big = (1 << 64) - 5  # an unsigned hash past 2**63
    [stored] = translator.translate([_stored(0, 64, 7, [(big, [1, 2, 3, 4]), (99, [5, 6])])])[0]
    assert stored["block_hashes"] == [-5] and stored["parent_block_hash"] == 7
    assert stored["token_ids"] == [1, 2, 3, 4]
    assert translator.translate([_removed(1, 64, [99, big])]) == {
        0: [{"type": "BlockRemoved", "block_hashes": [-5]}]
    }


def test_a_gap_in_a_ranks_event_ids_clears_that_rank() -> None:
    translator = KvEventTranslator(BLOCK)
    first = {**_stored(0, 64, None, [(1, [1, 2, 3, 4])]), "attention_dp_rank": 1}
    later = {**_removed(5, 64, [1]), "attention_dp_rank": 1}  # events 1-4 were dropped by the engine's buffer
    other = {**_removed(0, 64, [3]), "attention_dp_rank": 0}
    out = translator.translate([first, later, other])
    assert [e["type"] for e in out[1]] == ["BlockStored", "AllBlocksCleared", "BlockRemoved"]
    assert out[0] == [{"type": "BlockRemoved", "block_hashes": [3]}]
