"""LoopSteps: a request's work yields the event loop by time, not at every phase (core/loop_steps.py)."""

from __future__ import annotations

import asyncio
import time

from trtllm_responses.core import LoopSteps


async def _phases(steps: LoopSteps, phases: int, seconds: float, ran: list[str]) -> None:
    for _ in range(phases):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:  # work that holds the loop
            pass
        ran.append("work")
        await steps.boundary()


async def _beside(work: asyncio.Future[None], ran: list[str]) -> None:
    while not work.done():
        ran.append("other")
        await asyncio.sleep(0)


def _interleaving(step: float, phases: int, seconds: float) -> tuple[list[str], int]:
    async def main() -> tuple[list[str], int]:
        ran: list[str] = []
        steps = LoopSteps(step)
        work = asyncio.ensure_future(_phases(steps, phases, seconds, ran))  # runs first
        await asyncio.gather(work, _beside(work, ran))
        return ran, steps.yields

    return asyncio.run(main())


def test_work_shorter_than_a_step_runs_to_its_end_without_yielding() -> None:
    ran, yields = _interleaving(step=1.0, phases=5, seconds=0.001)
    assert yields == 0
    assert ran[:5] == ["work"] * 5  # nothing else ran between its phases


def test_work_longer_than_a_step_lets_others_run_between_steps() -> None:
    ran, yields = _interleaving(step=0.004, phases=6, seconds=0.003)
    # Each boundary after 4 ms of work yields: after phases 2, 4 and 6 (6 ms held each time).
    assert yields == 3
    runs = [len(run) for run in "".join("w" if r == "work" else " " for r in ran).split()]
    assert runs == [2, 2, 2]  # two phases a step, others in between


def test_restart_counts_a_new_step_from_now() -> None:
    steps = LoopSteps(0.002)
    time.sleep(0.003)
    steps.restart()

    async def boundary() -> int:
        await steps.boundary()
        return steps.yields

    assert asyncio.run(boundary()) == 0
