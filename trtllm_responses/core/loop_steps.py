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
from collections.abc import Callable

__all__ = ["LOOP_STEP_SECONDS", "LoopSteps"]

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

    def restart(self) -> None:
        """A new step starts now (the work has just waited on something else, and so yielded)."""
        self._since = self._clock()
