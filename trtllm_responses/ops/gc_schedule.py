"""CollectorSchedule: CPython's cyclic garbage collector, run when it cannot stall streams.

Left automatic, full collections stalled the event loop 60 to 250 ms under a 64-stream load. So once
the server has started (``gc.freeze()`` first) CPython collects only the young generations itself, as
it allocates (its own thresholds: each walks the few hundred to few thousand containers made since the
last, a millisecond or less), and this task runs the full collections: once no response has streamed
or been prepared for ``quiet`` seconds (or at most every ``max_full_interval`` seconds under endless
load). Young collections on a 20 ms timer walked everything allocated between two ticks: a 20,000-item
body's preparation made gen-1 collections of 120-150 ms. A full collection walks every object the
caches and stores hold (20-60 ms after a few 20,000-item requests); run the instant a response ended,
it met the client's next request. Each collection's duration goes to ``/stats`` (``gc``).
docs/limits.md#hostile-input-and-limits.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["CollectorSchedule"]

#: A full-generation threshold CPython's own collections never reach (its count is of gen-1 collections).
_NEVER = 1 << 30


class CollectorSchedule:
    """Runs the cyclic GC's full collections from the event loop; ``run`` until cancelled (then CPython
    collects every generation itself again). Every collection, young ones included, is ``record``-ed."""

    def __init__(
        self,
        is_idle: Callable[[], bool],
        record: Callable[[int, float], None],
        *,
        tick: float = 0.02,
        quiet: float = 1.0,
        idle_full_interval: float = 5.0,
        max_full_interval: float = 600.0,
    ) -> None:
        self._is_idle = is_idle
        self._record = record
        self._tick = tick
        self._quiet = quiet
        self._idle_full_interval = idle_full_interval
        self._max_full_interval = max_full_interval
        self._busy_at = float("-inf")  # the last tick that found work under way
        self._started = 0.0

    def _timed(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks``' hook: each collection's duration, recorded as it ends."""
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._record(info["generation"], time.perf_counter() - self._started)

    def step(self, now: float, last_full: float) -> float:
        """One tick: the full collection if it is due; returns when the last full collection ran."""
        if not self._is_idle():
            self._busy_at = now
        since_full = now - last_full
        quiet = now - self._busy_at >= self._quiet
        if gc.get_count()[2] and (
            (quiet and since_full >= self._idle_full_interval) or since_full >= self._max_full_interval
        ):
            gc.collect(2)
            return now
        return last_full

    async def run(self) -> None:
        """Collect on schedule until cancelled."""
        thresholds = gc.get_threshold()
        gc.set_threshold(thresholds[0], thresholds[1], _NEVER)
        gc.callbacks.append(self._timed)
        last_full = time.monotonic()
        try:
            while True:
                await asyncio.sleep(self._tick)
                last_full = self.step(time.monotonic(), last_full)
        finally:
            gc.callbacks.remove(self._timed)
            gc.set_threshold(*thresholds)
