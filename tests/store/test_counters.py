"""The counts tenants' limits are kept in (``store/counters.py``), on every backend: a window count made,
added to and expired; a lease set bounded, renewed, released and expired; and two handles on one SQLite
file or one Redis counting together, as a group's frontends and a store's replicas do (docs/tenants.md#limits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from support.store_urls import BACKENDS, backend_url

from trtllm_responses.store import ResponseStore, open_store


@pytest.fixture(params=BACKENDS)
async def stores(request, tmp_path) -> AsyncIterator[tuple[ResponseStore, ResponseStore]]:  # type: ignore[no-untyped-def]
    """Two handles on one store (memory: the same one; it serves one process)."""
    url = backend_url(request, tmp_path)
    first = open_store(url, max_responses=100, max_bytes=1 << 24)
    second = first if url == "memory" else open_store(url, max_responses=100, max_bytes=1 << 24)
    yield first, second
    await first.close()
    if second is not first:
        await second.close()


async def test_a_window_count_is_shared_and_expires(stores: tuple[ResponseStore, ResponseStore]) -> None:
    one, other = stores[0].counters(), stores[1].counters()
    key = f"rq:t{id(stores)}"
    assert (await one.add(key, 1, 0.5))[0] == 1
    total, left = await other.add(key, 2, 0.5)
    assert total == 3 and 0 < left <= 0.5
    assert (await one.add(key, -1, 0.5))[0] == 2
    await asyncio.sleep(0.6)
    total, left = await other.add(key, 1, 0.5)
    assert total == 1 and left > 0.3  # a new window


async def test_a_lease_set_is_bounded_shared_and_expires(stores: tuple[ResponseStore, ResponseStore]) -> None:
    one, other = stores[0].counters(), stores[1].counters()
    key = f"run:t{id(stores)}"
    assert await one.acquire(key, "r1", 2, 30) == (True, 1)
    assert await other.acquire(key, "r2", 2, 0.4) == (True, 2)
    assert await one.acquire(key, "r3", 2, 30) == (False, 2)
    assert await other.acquire(key, "r1", 2, 30) == (True, 2)  # one already in is renewed, not refused
    await other.release(key, "r1")
    assert await one.acquire(key, "r3", 2, 0.4) == (True, 2)
    await one.renew(key, "r3", 30)
    await asyncio.sleep(0.5)  # r2's lease ran out (its holder died); r3's was renewed
    assert await other.acquire(key, "r4", 2, 30) == (True, 2)
    assert await other.acquire(key, "r5", 2, 30) == (False, 2)


async def test_concurrent_adds_lose_nothing(stores: tuple[ResponseStore, ResponseStore]) -> None:
    one, other = stores[0].counters(), stores[1].counters()
    key = f"tk:t{id(stores)}"
    await asyncio.gather(*(c.add(key, 1, 30) for _ in range(50) for c in (one, other)))
    assert (await one.add(key, 0, 30))[0] == 100
