"""CollectorSchedule: CPython collects the young generations as it allocates, the schedule the full one,
only once the server has been quiet a while, or when overdue."""

from __future__ import annotations

import asyncio
import gc

from trtllm_responses.ops.gc_schedule import CollectorSchedule


class Recorder:
    def __init__(self) -> None:
        self.collected: list[int] = []

    def __call__(self, generation: int, seconds: float) -> None:
        self.collected.append(generation)


def test_a_busy_server_gets_no_full_collection() -> None:
    record = Recorder()
    schedule = CollectorSchedule(lambda: False, record, idle_full_interval=0, max_full_interval=3600)
    gc.collect(1)  # a full collection is pending (a gen-1 pass since the last full one)
    assert schedule.step(now=100.0, last_full=0.0) == 0.0
    assert 2 not in record.collected


def test_an_idle_server_gets_its_full_collection_once_quiet() -> None:
    idle = [False]
    record = Recorder()
    schedule = CollectorSchedule(lambda: idle[0], record, quiet=1.0, idle_full_interval=1.0)
    gc.collect(1)  # makes a full collection pending (a gen-1 pass since the last full one)
    assert schedule.step(now=10.0, last_full=0.0) == 0.0  # a response under way
    idle[0] = True
    # Just ended: its client's next request is likeliest now, so the collection waits.
    assert schedule.step(now=10.5, last_full=0.0) == 0.0
    assert schedule.step(now=11.0, last_full=0.0) == 11.0


def test_a_full_collection_is_never_overdue_by_more_than_its_bound() -> None:
    record = Recorder()
    schedule = CollectorSchedule(lambda: False, record, max_full_interval=60.0)
    gc.collect(1)
    assert schedule.step(now=59.0, last_full=0.0) == 0.0
    assert schedule.step(now=61.0, last_full=0.0) == 61.0


def test_young_collections_are_cpythons_own_and_recorded_the_full_one_never_automatic() -> None:
    async def run() -> tuple[tuple[int, int, int], list[int]]:
        record = Recorder()
        task = asyncio.ensure_future(CollectorSchedule(lambda: False, record).run())
        await asyncio.sleep(0.05)
        thresholds = gc.get_threshold()
        keep: list[list[int]] = []
        # Young collections come as allocated: allocate until CPython has run both young generations (a
        # process whose gen-1 count another collection just reset needs more than a fixed amount; seen in
        # the suite), at most 2,000 gen-0 thresholds' worth.
        for _ in range(2000):
            keep += [[] for _ in range(thresholds[0])]
            if 1 in record.collected:
                break
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        del keep
        return thresholds, record.collected

    before = gc.get_threshold()
    thresholds, collected = asyncio.run(run())
    assert gc.isenabled() and gc.get_threshold() == before  # as they were once it stops
    assert thresholds[:2] == before[:2] and thresholds[2] > 1 << 20  # CPython never runs a full one
    assert 0 in collected and 1 in collected and 2 not in collected
