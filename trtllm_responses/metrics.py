"""Server metrics that cost nothing per token: what ``GET /stats`` reports.

- server-added latency: request received → prompt handed to the executor, per response;
- event-loop lag: how late a 5 ms timer fires (a request that blocks the loop shows here);
- responses created and output tokens streamed.

Windows are bounded (the last ``window`` samples), so memory stays flat.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

__all__ = ["ServerMetrics"]


def _summary(samples: deque[float]) -> dict[str, Any]:
    if not samples:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(samples)
    pick = lambda q: round(ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))] * 1000, 3)  # noqa: E731
    return {
        "count": len(ordered),
        "p50_ms": pick(0.5),
        "p99_ms": pick(0.99),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


class ServerMetrics:
    """Counters and latency windows of one server process."""

    def __init__(self, window: int = 4096) -> None:
        self.added_latency: deque[float] = deque(maxlen=window)
        self.loop_lag: deque[float] = deque(maxlen=window)
        self.max_loop_lag = 0.0
        self.responses = 0
        self.output_tokens = 0
        self.store_errors = 0

    def record_handoff(self, seconds: float) -> None:
        """A prompt was handed to the executor ``seconds`` after its request arrived."""
        self.added_latency.append(seconds)

    def record_response(self, output_tokens: int) -> None:
        """A response ended after streaming ``output_tokens``."""
        self.responses += 1
        self.output_tokens += output_tokens

    async def watch_event_loop(self, interval: float = 0.005) -> None:
        """Run until cancelled: sample how late the event loop wakes a timer."""
        while True:
            start = time.perf_counter()
            await asyncio.sleep(interval)
            lag = max(0.0, time.perf_counter() - start - interval)
            self.loop_lag.append(lag)
            if lag > self.max_loop_lag:
                self.max_loop_lag = lag

    def reset(self) -> None:
        """Forget the samples (benchmarks reset between phases)."""
        self.added_latency.clear()
        self.loop_lag.clear()
        self.max_loop_lag = 0.0

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able view."""
        return {
            "responses": self.responses,
            "output_tokens": self.output_tokens,
            "server_added_latency": _summary(self.added_latency),
            "event_loop_lag": {
                **_summary(self.loop_lag),
                "max_since_reset_ms": round(self.max_loop_lag * 1000, 3),
            },
        }
