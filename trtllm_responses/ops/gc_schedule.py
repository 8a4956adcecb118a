"""CollectorSchedule: CPython's cyclic garbage collector, run when it cannot stall streams.

Left automatic, full collections stalled the event loop 60 to 250 ms under a 64-stream load. So once
the server has started (``gc.freeze()`` first) automatic collection is off and this task runs it:
young generations on a short timer, full collections only while no response streams (or at most
every ``max_full_interval`` seconds under endless load). Each collection's duration goes to
``/stats`` (``gc``). docs/limits.md#hostile-input-and-limits.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

__all__ = ["CollectorSchedule"]


class CollectorSchedule:
    """Runs the cyclic GC from the event loop; ``run`` until cancelled (then automatic GC is back)."""

    def __init__(
        self,
        is_idle: Callable[[], bool],
        record: Callable[[int, float], None],
        *,
        tick: float = 0.02,
        idle_full_interval: float = 5.0,
        max_full_interval: float = 600.0,
    ) -> None:
        self._is_idle = is_idle
        self._record = record
        self._tick = tick
        self._idle_full_interval = idle_full_interval
        self._max_full_interval = max_full_interval

    def _collect(self, generation: int) -> None:
        start = time.perf_counter()
        gc.collect(generation)
        self._record(generation, time.perf_counter() - start)

    def step(self, now: float, last_full: float) -> float:
        """One tick's collections; returns when the last full collection ran."""
        threshold0, threshold1, _ = gc.get_threshold()
        count0, count1, count2 = gc.get_count()
        since_full = now - last_full
        if count2 and (
            (self._is_idle() and since_full >= self._idle_full_interval)
            or since_full >= self._max_full_interval
        ):
            self._collect(2)
            return now
        if count0 >= threshold0:
            self._collect(1 if count1 >= threshold1 else 0)
        return last_full

    async def run(self) -> None:
        """Collect on schedule until cancelled."""
        was_enabled = gc.isenabled()
        gc.disable()
        last_full = time.monotonic()
        try:
            while True:
                await asyncio.sleep(self._tick)
                last_full = self.step(time.monotonic(), last_full)
        finally:
            if was_enabled:
                gc.enable()
