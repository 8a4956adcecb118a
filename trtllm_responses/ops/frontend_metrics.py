"""What each frontend process and its engine look like from ``/metrics``: event-loop lag, load per frontend,
the engine's health (docs/tracing-and-dashboards.md#dashboard-and-alerts).

Labelled by ``frontend`` (``serve``'s frontend index: ``0`` alone, or the launcher of a group; ``1..K-1`` the
others), so a group's one exposition keeps each process apart where the other collectors are summed:

- ``trtllm_event_loop_lag_seconds{frontend}``: a histogram of how late the event loop woke a 5 ms timer,
  every sample of ``ServerMetrics.watch_event_loop`` (about 200 a second, none per token);
- ``trtllm_frontend_responses_total{frontend}``: responses (foreground and background) whose generation
  started in the process;
- ``trtllm_frontend_active_responses{frontend}``: of those, the ones being generated now;
- ``trtllm_executor_healthy``: 1 while the engine answers its health check (``Executor.healthy``, what
  ``/health`` asks), 0 once it does not; set by the process answering a scrape (a group shows the last
  reading);
- ``trtllm_engine_healthy{engine}``: per engine of a pool (the gRPC executor's, ``Executor.engines_health``),
  1 while it is in placement, 0 while out; labelled by the engine's URL, which the operator lists (bounded);
  an engine removed from the pool is no longer exported by this process;
- ``trtllm_disagg_held_contexts_total{frontend}``: contexts a prefill engine handed off whose generation leg
  never ran (``Executor.held_contexts``; disaggregated serving over OpenEngine, which cannot free them: they stay
  held until the engine's ``kv_transfer_timeout_ms``), counted up to the executor's count at each scrape.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["FrontendMetrics"]

_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class FrontendMetrics:
    """The per-frontend collectors of one server process (frontend ``frontend``), in ``registry``."""

    def __init__(self, registry: CollectorRegistry, frontend: int = 0) -> None:
        label = str(frontend)
        self.loop_lag = Histogram(
            "trtllm_event_loop_lag_seconds",
            "How late the event loop woke a 5 ms timer, by frontend process",
            ["frontend"],
            buckets=_LAG_BUCKETS,
            registry=registry,
        ).labels(label)
        self.started = Counter(
            "trtllm_frontend_responses",
            "Responses whose generation started, by frontend process",
            ["frontend"],
            registry=registry,
        ).labels(label)
        self.active = Gauge(
            "trtllm_frontend_active_responses",
            "Responses being generated, by frontend process",
            ["frontend"],
            registry=registry,
            multiprocess_mode="livesum",
        ).labels(label)
        self.engine_healthy = Gauge(
            "trtllm_executor_healthy",
            "1 while the engine answers its health check (/health), 0 once it does not",
            registry=registry,
            multiprocess_mode="mostrecent",
        )

        self.engines_healthy = Gauge(
            "trtllm_engine_healthy",
            "1 while an engine of the pool is in placement (its health check answers), 0 once it is not",
            ["engine"],
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        self._engines: set[str] = set()
        self.held = Counter(
            "trtllm_disagg_held_contexts",
            "Contexts handed off by a prefill engine whose generation leg never ran (held until the engine's "
            "kv_transfer_timeout_ms), by frontend process",
            ["frontend"],
            registry=registry,
        ).labels(label)
        self._held = 0

    def response_started(self) -> None:
        """A response's generation started in this process."""
        self.started.inc()
        self.active.inc()

    def response_ended(self) -> None:
        """A response's generation ended in this process."""
        self.active.dec()

    def engine(self, healthy: bool) -> None:
        """The engine's health as just asked (when scraped)."""
        self.engine_healthy.set(1 if healthy else 0)

    def held_contexts(self, count: int) -> None:
        """The executor's count of held contexts as just read (when scraped)."""
        if count > self._held:
            self.held.inc(count - self._held)
            self._held = count

    def engines(self, healthy: Mapping[str, bool]) -> None:
        """Each engine of a pool's health as just asked (when scraped); engines gone since are dropped."""
        for url in self._engines - healthy.keys():
            self.engines_healthy.remove(url)
        for url, ok in healthy.items():
            self.engines_healthy.labels(url).set(1 if ok else 0)
        self._engines = set(healthy)
