"""The fake TensorRT-LLM's KV-cache pool (``tests/fake_trtllm/tensorrt_llm/_kv_pool.py``) does what the C++ pool it
copies does (``kvCacheManager.cpp``, ``evictionPolicy.cpp``, ``kvCacheRetentionConfig.cpp``): chained keys with the
salt in the first, priorities and durations per block, eviction lowest priority first then oldest, the host tier."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

BLOCK = 4


@pytest.fixture
def pool_module(fake_trtllm: Any) -> Any:
    import importlib

    return importlib.import_module("tensorrt_llm._kv_pool")


def _config(fake_trtllm: Any, priority: int, seconds: float | None = None, start: int = 0) -> Any:
    retention = fake_trtllm.llmapi.KvCacheRetentionConfig
    duration = None if seconds is None else datetime.timedelta(seconds=seconds)
    return retention(
        [retention.TokenRangeRetentionConfig(start, None, priority, duration)], priority, duration
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _pool(pool_module: Any, blocks: int, host_blocks: int = 0, **kwargs: Any) -> Any:
    host = host_blocks * BLOCK * pool_module.KV_BYTES_PER_TOKEN
    return pool_module.KvPool(tokens_per_block=BLOCK, device_tokens=blocks * BLOCK, host_bytes=host, **kwargs)


def _seq(seed: int, blocks: int) -> list[int]:
    return [seed * 1000 + i for i in range(blocks * BLOCK)] + [7]  # one more: the last prompt token


def test_reuse_is_whole_blocks_of_the_same_prefix_and_salt(pool_module: Any) -> None:
    pool = _pool(pool_module, 64)
    tokens = _seq(1, 3)
    pool.store(tokens, "tenant-a")
    assert pool.reuse(tokens, "tenant-a").tokens == 3 * BLOCK  # never the last token
    assert pool.reuse(tokens, "tenant-b").tokens == 0  # the salt is in the first block's key
    assert pool.reuse(tokens, None).tokens == 0
    changed = [99] + tokens[1:]
    assert pool.reuse(changed, "tenant-a").tokens == 0  # a key chains from its parent's
    assert pool.reuse(tokens[:BLOCK] + [5] * 9, "tenant-a").tokens == BLOCK


def test_the_lowest_priority_goes_first_then_the_oldest(fake_trtllm: Any, pool_module: Any) -> None:
    pool = _pool(pool_module, 6)
    low, high, normal = _seq(1, 2), _seq(2, 2), _seq(3, 2)
    pool.store(high, retention=_config(fake_trtllm, 90))
    pool.store(low, retention=_config(fake_trtllm, 10))
    pool.store(normal)  # default 35
    assert pool.used() == 6
    newest = _seq(4, 2)
    pool.store(newest)  # two blocks over: the priority-10 session goes, though it is newer than the 90 one
    assert pool.state(low) == [] and len(pool.state(high)) == 2 and len(pool.state(normal)) == 2
    pool.store(_seq(5, 2))  # then the oldest among equals (35): normal before newest
    assert pool.state(normal) == [] and len(pool.state(newest)) == 2 and len(pool.state(high)) == 2


def test_leaves_go_before_the_prefix_they_hang_from(pool_module: Any) -> None:
    pool = _pool(pool_module, 3)
    tokens = _seq(1, 3)
    pool.store(tokens)
    pool.store(_seq(2, 1))  # one block over: the first session's last block goes, its prefix stays
    assert len(pool.state(tokens)) == 2


def test_a_duration_ends_at_the_default_priority(fake_trtllm: Any, pool_module: Any) -> None:
    clock = Clock()
    pool = _pool(pool_module, 64, clock=clock)
    tokens = _seq(1, 2)
    pool.store(tokens, retention=_config(fake_trtllm, 60, seconds=120))
    assert pool.state(tokens) == [(0, 60), (0, 60)]
    clock.now = 119.0
    assert pool.state(tokens) == [(0, 60), (0, 60)]
    clock.now = 121.0
    assert pool.state(tokens) == [(0, 35), (0, 35)]


def test_a_reuse_restamps_and_an_uncovered_block_keeps_its_priority(
    fake_trtllm: Any, pool_module: Any
) -> None:
    """claimBlock: a request's own priority overrides; a block its ranges do not cover keeps its priority."""
    pool = _pool(pool_module, 64)
    tokens = _seq(1, 3)
    pool.store(tokens, retention=_config(fake_trtllm, 60))
    pool.reuse(tokens, retention=_config(fake_trtllm, 0, start=BLOCK))
    pool.store(tokens, retention=_config(fake_trtllm, 0, start=BLOCK))
    assert [priority for _, priority in pool.state(tokens)] == [60, 0, 0]
    pool.store(tokens)  # no config at all: the prompt's blocks keep theirs
    assert [priority for _, priority in pool.state(tokens)] == [60, 0, 0]


def test_evicted_blocks_go_to_the_host_and_come_back(fake_trtllm: Any, pool_module: Any) -> None:
    pool = _pool(pool_module, 4, host_blocks=4, secondary_offload_min_priority=35)
    first, second = _seq(1, 4), _seq(2, 4)
    pool.store(first)
    pool.store(second)  # the first session's four blocks are offloaded, not lost
    assert pool.used(0) == 4 and pool.used(1) == 4 and pool.counts["offloaded"] == 4
    found = pool.reuse(first)
    assert (found.device, found.host) == (0, 4 * BLOCK) and pool.counts["onboarded"] == 4
    pool.store(first)  # the request ends: its blocks are free again, on the device
    offloaded = pool.counts["offloaded"]
    released = _seq(3, 4)
    pool.store(released, retention=_config(fake_trtllm, 0))  # below the offload minimum: never offloaded
    assert pool.state(released) == [] and pool.counts["offloaded"] == offloaded
    assert [level for level, _ in pool.state(first)] == [0, 0, 0, 0]


def test_no_host_tier_means_evicted_is_lost(pool_module: Any) -> None:
    pool = _pool(pool_module, 4)
    first = _seq(1, 4)
    pool.store(first)
    pool.store(_seq(2, 4))
    assert pool.reuse(first).tokens == 0 and pool.counts["evicted"] == 4


def test_hooks_name_each_change(pool_module: Any) -> None:
    seen: list[tuple[str, int]] = []

    class Listener:
        def stored(self, blocks: list[Any], tokens: list[int], ends: list[int]) -> None:
            assert len(ends) == len(blocks) and all(end <= len(tokens) for end in ends)
            seen.append(("stored", len(blocks)))

        def removed(self, keys: list[int]) -> None:
            seen.append(("removed", len(keys)))

    pool = _pool(pool_module, 2)
    pool.listeners.append(Listener())
    pool.store(_seq(1, 2))
    pool.store(_seq(2, 1))
    assert seen == [("stored", 2), ("stored", 1), ("removed", 1)]


def test_keys_cost_a_block_each_not_the_prefix(pool_module: Any) -> None:
    """Chained keys: 64 sessions of 100k tokens stored and found again in a pool a quarter that size (the
    benchmark's scale: a key per prefix, as the fake had before, would hold ~10^11 tokens of keys here)."""
    pool = pool_module.KvPool(tokens_per_block=32, device_tokens=64 * 100_000 // 4)
    sessions = [list(range(s * 10**6, s * 10**6 + 100_000)) for s in range(64)]
    for tokens in sessions:
        pool.store(tokens)
    reused = sum(pool.reuse(tokens).tokens for tokens in sessions[-16:])
    assert reused >= 15 * 99_968 and pool.used() <= 64 * 100_000 // 4 // 32
