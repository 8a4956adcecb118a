"""Long work on the event loop cut into steps by time, not by size (docs/limits.md#hostile-input-and-limits).

A request's preparation runs on the event loop between the streams it shares the loop with. Yielding
after every phase of a large body cost each request a round trip through every other ready request
(eight agent turns arriving together each finished last); never yielding would let one huge body stall
every stream. :class:`LoopSteps` yields only once the work has held the loop for ``step`` seconds since
it started or last yielded: ordinary requests run to their end in one step, a huge one in steps of
about ``step`` plus its longest indivisible phase.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import Any, TypeVar

__all__ = ["LOOP_STEP_SECONDS", "LoopSteps", "Stepped", "at_once", "letting_go"]

T = TypeVar("T")

#: Work written to be cut into steps: a generator that yields (None) wherever it may pause, and returns
#: its result. Work proportional to a request's item count is written so (docs/limits.md#hostile-input-and-limits):
#: ``await steps.through(work)`` runs it on the loop in steps, ``at_once(work)`` runs it whole.
Stepped = Generator[None, None, T]

#: How long one request's preparation may hold the event loop before it lets others run.
LOOP_STEP_SECONDS = 0.005


class LoopSteps:
    """One piece of work's steps on the event loop: ``await steps.boundary()`` between its phases."""

    __slots__ = ("_clock", "_since", "_step", "yields")

    def __init__(
        self, step: float = LOOP_STEP_SECONDS, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._step = step
        self._clock = clock
        self._since = clock()
        self.yields = 0

    async def boundary(self) -> None:
        """A point where the work may pause: yield to the loop if this step has run ``step`` seconds."""
        if self._clock() - self._since >= self._step:
            await asyncio.sleep(0)
            self.yields += 1
            self.restart()

    async def through(self, work: Stepped[T]) -> T:
        """Run ``work`` to its end, yielding to the loop at its pauses once a step has run its time."""
        clock, step = self._clock, self._step
        try:
            while True:
                next(work)
                if clock() - self._since >= step:
                    await asyncio.sleep(0)
                    self.yields += 1
                    self._since = clock()
        except StopIteration as done:
            result: T = done.value
            return result

    def restart(self) -> None:
        """A new step starts now (the work has just waited on something else, and so yielded)."""
        self._since = self._clock()


def at_once(work: Stepped[T]) -> T:
    """Run ``work`` to its end without pausing (a caller off the loop, or whose work is small)."""
    try:
        while True:
            next(work)
    except StopIteration as done:
        result: T = done.value
        return result


def letting_go(objects: list[Any]) -> Stepped[None]:
    """Free ``objects`` one at a time, each in its own pause (``objects`` is emptied, last first): what a
    large piece of work built, freed at once, holds the loop about as long as building it did (20,000
    messages' pydantic trees: ~15 ms). A pass of its own, after the work that replaced them: frees lower
    CPython's count of new objects, so freeing them while allocating would hide those from the young
    collections, which then walk them all at once (gen-0 collections of ~10 ms)."""
    while objects:
        yield
        objects.pop()
