"""LoopSteps: a request's work yields the event loop by time, not at every phase (core/loop_steps.py).

The work's clock is a fake one each phase advances by a fixed amount, so what is asserted does not depend
on how fast this machine is or what else it runs.
"""

from __future__ import annotations

import asyncio

from trtllm_responses.core import LoopSteps


class Clock:
    """Time that moves only when the work says it has worked."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _phases(steps: LoopSteps, clock: Clock, phases: int, seconds: float, ran: list[str]) -> None:
    for _ in range(phases):
        clock.now += seconds  # a phase that holds the loop this long
        ran.append("work")
        await steps.boundary()


async def _beside(work: asyncio.Future[None], ran: list[str]) -> None:
    while not work.done():
        ran.append("other")
        await asyncio.sleep(0)


def _interleaving(step: float, phases: int, seconds: float) -> tuple[list[str], int]:
    async def main() -> tuple[list[str], int]:
        ran: list[str] = []
        clock = Clock()
        steps = LoopSteps(step, clock=clock)
        work = asyncio.ensure_future(_phases(steps, clock, phases, seconds, ran))  # runs first
        await asyncio.gather(work, _beside(work, ran))
        return ran, steps.yields

    return asyncio.run(main())


def test_work_shorter_than_a_step_runs_to_its_end_without_yielding() -> None:
    ran, yields = _interleaving(step=0.005, phases=5, seconds=0.0009)
    assert yields == 0
    assert ran[:5] == ["work"] * 5  # nothing else ran between its phases


def test_work_longer_than_a_step_lets_others_run_between_steps() -> None:
    ran, yields = _interleaving(step=0.004, phases=6, seconds=0.003)
    # Each boundary after 4 ms of work yields: after phases 2, 4 and 6 (6 ms held each time).
    assert yields == 3
    runs = [len(run) for run in "".join("w" if r == "work" else " " for r in ran).split()]
    assert runs == [2, 2, 2]  # two phases a step, others in between


def test_restart_counts_a_new_step_from_now() -> None:
    clock = Clock()
    steps = LoopSteps(0.002, clock=clock)
    clock.now += 0.003
    steps.restart()

    async def boundary() -> int:
        await steps.boundary()
        return steps.yields

    assert asyncio.run(boundary()) == 0
    clock.now += 0.002
    assert asyncio.run(boundary()) == 1
