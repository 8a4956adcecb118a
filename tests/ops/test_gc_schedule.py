"""CollectorSchedule: young generations on its timer, the full collection only when idle or overdue."""

from __future__ import annotations

import asyncio
import gc

from trtllm_responses.ops.gc_schedule import CollectorSchedule


class Recorder:
    def __init__(self) -> None:
        self.collected: list[int] = []

    def __call__(self, generation: int, seconds: float) -> None:
        self.collected.append(generation)


def _fill_young() -> list[object]:
    return [[] for _ in range(2 * gc.get_threshold()[0])]


def test_a_busy_server_gets_young_collections_only() -> None:
    record = Recorder()
    schedule = CollectorSchedule(lambda: False, record, idle_full_interval=0, max_full_interval=3600)
    gc.disable()  # as the schedule runs it: nothing collects but the schedule
    try:
        gc.collect(1)  # a full collection is pending (a gen-1 pass since the last full one)
        keep = _fill_young()
        schedule.step(now=100.0, last_full=0.0)
    finally:
        gc.enable()
    assert record.collected and 2 not in record.collected
    del keep


def test_an_idle_server_gets_its_full_collection() -> None:
    record = Recorder()
    schedule = CollectorSchedule(lambda: True, record, idle_full_interval=1.0)
    gc.collect(1)  # makes a full collection pending (a gen-1 pass since the last full one)
    assert schedule.step(now=10.0, last_full=0.0) == 10.0
    assert record.collected == [2]


def test_a_full_collection_is_never_overdue_by_more_than_its_bound() -> None:
    record = Recorder()
    schedule = CollectorSchedule(lambda: False, record, max_full_interval=60.0)
    gc.collect(1)
    assert schedule.step(now=59.0, last_full=0.0) == 0.0 and 2 not in record.collected
    assert schedule.step(now=61.0, last_full=0.0) == 61.0 and record.collected[-1] == 2


def test_running_turns_automatic_collection_off_and_back_on() -> None:
    async def run() -> bool:
        task = asyncio.ensure_future(CollectorSchedule(lambda: True, Recorder()).run())
        await asyncio.sleep(0.05)
        disabled = not gc.isenabled()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return disabled

    assert gc.isenabled()
    assert asyncio.run(run())
    assert gc.isenabled()
