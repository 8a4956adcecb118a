"""Server metrics that cost nothing per token: what ``GET /stats`` and ``GET /metrics`` report.

- server-added latency: request received → prompt handed to the executor, per response;
- event-loop lag: how late a 5 ms timer fires (a request that blocks the loop shows here);
- responses created and output tokens streamed.

Windows are bounded (the last ``window`` samples), so memory stays flat.

In a group of frontends (``serve --num_serve_frontends K``) every process writes its collectors to the
group's folder (prometheus_client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR`` set before it is
imported) and any of them exposes the whole group's: counters and histograms summed, live gauges summed
over the live processes, the store's gauges as last read.

The same records feed Prometheus collectors (``registry``, one per server, never
the global one): requests by route and status, tokens, time to first token and
inter-token latency (one observation per response: its mean gap), server-added
latency, store errors and executor aborts. Gauges that are read, not counted
(live streams, background responses, the store's size) are set when scraped. Event-loop lag, load per
frontend process and the engine's health are ``frontend_metrics.py``'s.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from functools import partial
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from .frontend_metrics import FrontendMetrics
from .session_metrics import SessionMetrics
from .tenant_metrics import TenantMetrics

__all__ = ["ServerMetrics", "merge_snapshots", "use_group_folder"]

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
_ITL_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def use_group_folder(path: str) -> None:
    """Make the collectors this process creates from now on write to ``path``, the group's folder.

    prometheus_client chooses multiprocess mode when it is imported, by ``PROMETHEUS_MULTIPROC_DIR``:
    the frontends a launcher starts have it in their environment from the start; the launcher, which
    imported prometheus_client while parsing its flags (before any collector was made), sets it and
    chooses again (``values.get_value_class``, what the import runs).
    """
    os.makedirs(path, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    from prometheus_client import values

    values.ValueClass = values.get_value_class()


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


def _require_multiprocess_mode() -> None:
    """Refuse a group folder if prometheus_client was imported before ``PROMETHEUS_MULTIPROC_DIR`` was set."""
    from prometheus_client import values

    if values.ValueClass is values.MutexValue:
        raise RuntimeError(
            "PROMETHEUS_MULTIPROC_DIR must be set before prometheus_client is imported "
            "(serve --num_serve_frontends sets it first thing)"
        )


class ServerMetrics:
    """Counters and latency windows of one server process (``multiprocess_dir``: its group's folder;
    ``frontend``: its index in the group, 0 alone)."""

    def __init__(self, window: int = 4096, multiprocess_dir: str | None = None, frontend: int = 0) -> None:
        self.multiprocess_dir = multiprocess_dir
        if multiprocess_dir is not None:
            _require_multiprocess_mode()
        self.added_latency: deque[float] = deque(maxlen=window)
        self.loop_lag: deque[float] = deque(maxlen=window)
        self.max_loop_lag = 0.0
        #: The worst lag in CPU time: what the loop's thread spent between two of the watcher's wakes past
        #: their interval (seconds).
        self.max_loop_cpu = 0.0
        self.responses = 0
        self.output_tokens = 0
        self.store_errors = 0
        self.aborts = 0
        self.summaries = 0
        self.summary_prompt_tokens = 0  # the side generations' prompts (GPU prefill)
        self.summary_output_tokens = 0
        self.registry = CollectorRegistry(auto_describe=True)
        self._define_response_metrics(self.registry)
        self._define_side_counters(self.registry)
        self._define_gauges(self.registry)
        #: What each tenant used (``tenant_metrics.py``).
        self.tenants = TenantMetrics(self.registry)
        #: Whether turns found their prefix, and the engine's KV and queue (``session_metrics.py``).
        self.sessions = SessionMetrics(self.registry)
        #: Event-loop lag and load by frontend process, the engine's health (``frontend_metrics.py``).
        self.frontend = FrontendMetrics(self.registry, frontend)
        self.active = 0  # responses being generated now
        self.gc_collections = [0, 0, 0]
        self.gc_max = [0.0, 0.0, 0.0]  # longest collection per generation since reset

    def _define_response_metrics(self, r: CollectorRegistry) -> None:
        """In ``r``: requests, tokens and responses counted; time to first token, inter-token gap and
        server-added latency as histograms."""
        self.requests = Counter(
            "trtllm_requests", "HTTP requests by route and status", ["route", "method", "status"], registry=r
        )
        self.input_tokens_total = Counter(
            "trtllm_input_tokens", "Prompt tokens of finished responses", registry=r
        )
        self.output_tokens_total = Counter("trtllm_output_tokens", "Tokens generated", registry=r)
        self.cached_tokens_total = Counter(
            "trtllm_cached_tokens", "Prompt tokens the engine reused", registry=r
        )
        self.responses_total = Counter(
            "trtllm_responses", "Responses ended, by status", ["status"], registry=r
        )
        self.ttft = Histogram(
            "trtllm_time_to_first_token_seconds",
            "Request received to first token",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "trtllm_inter_token_latency_seconds",
            "Mean gap between tokens, per response",
            buckets=_ITL_BUCKETS,
            registry=r,
        )
        self.added = Histogram(
            "trtllm_server_added_latency_seconds",
            "Request received to prompt handed to the executor",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

    def _define_side_counters(self, r: CollectorRegistry) -> None:
        """In ``r``: store errors, executor aborts, the tokens of reasoning summaries' side generations."""
        self.store_errors_total = Counter(
            "trtllm_store_errors", "Store operations that failed (unavailable)", registry=r
        )
        self.aborts_total = Counter(
            "trtllm_executor_aborts", "Generations aborted in the executor", registry=r
        )
        self.summary_tokens_total = Counter(
            "trtllm_summary_tokens", "Tokens of reasoning summaries' side generations", ["kind"], registry=r
        )

    def _define_gauges(self, r: CollectorRegistry) -> None:
        """In ``r``: the gauges of live responses and of the store's size."""
        # Kept up to date as responses start and end (summed over a group's live frontends).
        live = partial(Gauge, registry=r, multiprocess_mode="livesum")
        self.active_streams = live(
            "trtllm_active_responses", "Responses being generated (foreground and background)"
        )
        self.active_background = live(
            "trtllm_active_background_responses", "Background responses being generated"
        )
        # Read from the (shared) store when scraped: a group shows the last reading.
        read = partial(Gauge, registry=r, multiprocess_mode="mostrecent")
        self.store_responses = read("trtllm_store_responses", "Responses in the store")
        self.store_bytes = read("trtllm_store_bytes", "Bytes the store holds")
        self.store_evictions = read("trtllm_store_evictions", "Entries the store evicted (or expired)")

    def record_handoff(self, seconds: float) -> None:
        """A prompt was handed to the executor ``seconds`` after its request arrived."""
        self.added_latency.append(seconds)
        self.added.observe(seconds)

    def record_gc(self, generation: int, seconds: float) -> None:
        """A cyclic-GC collection of ``generation`` took ``seconds``."""
        self.gc_collections[generation] += 1
        if seconds > self.gc_max[generation]:
            self.gc_max[generation] = seconds

    def idle(self) -> bool:
        """Whether no response is being generated."""
        return self.active == 0

    def response_started(self) -> None:
        """A response's generation started (``active``, and the live gauge)."""
        self.active += 1
        self.active_streams.inc()
        self.frontend.response_started()

    def response_ended(self) -> None:
        """A response's generation ended."""
        self.active -= 1
        self.active_streams.dec()
        self.frontend.response_ended()

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text of this server, or of its whole group of frontends; and its content type."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        from prometheus_client.multiprocess import MultiProcessCollector

        group = CollectorRegistry()
        MultiProcessCollector(group, path=self.multiprocess_dir)
        return generate_latest(group), CONTENT_TYPE_LATEST

    def record_response(
        self,
        output_tokens: int,
        *,
        status: str = "completed",
        input_tokens: int = 0,
        cached_tokens: int = 0,
        received_at: float | None = None,
        first_token_at: float | None = None,
    ) -> None:
        """A response ended after streaming ``output_tokens`` (times are ``perf_counter`` readings)."""
        self.responses += 1
        self.output_tokens += output_tokens
        self.responses_total.labels(status).inc()
        self.output_tokens_total.inc(output_tokens)
        self.input_tokens_total.inc(input_tokens)
        self.cached_tokens_total.inc(cached_tokens)
        if first_token_at is not None:
            if received_at is not None:
                self.ttft.observe(first_token_at - received_at)
            if output_tokens > 1:
                self.itl.observe((time.perf_counter() - first_token_at) / (output_tokens - 1))

    def record_store_error(self) -> None:
        """A store operation failed (the store was unavailable)."""
        self.store_errors += 1
        self.store_errors_total.inc()

    def record_summary(self, prompt_tokens: int, output_tokens: int) -> None:
        """A reasoning summary's side generation ran: its prompt and output tokens."""
        self.summaries += 1
        self.summary_prompt_tokens += prompt_tokens
        self.summary_output_tokens += output_tokens
        self.summary_tokens_total.labels("prompt").inc(prompt_tokens)
        self.summary_tokens_total.labels("output").inc(output_tokens)

    def record_abort(self) -> None:
        """A generation was aborted in the executor."""
        self.aborts += 1
        self.aborts_total.inc()

    async def watch_event_loop(self, interval: float = 0.005) -> None:
        """Run until cancelled: sample how late the event loop wakes a timer, in wall-clock time and in the
        CPU time its thread spent past the ``interval`` (what held the loop, less the time the process
        waited for a core: on a loaded machine the wall-clock lag is mostly the machine's, this the
        server's own; a thread holding the GIL shows in the first alone)."""
        observe = self.frontend.loop_lag.observe
        clock, cpu = time.perf_counter, time.thread_time
        while True:
            start, start_cpu = clock(), cpu()
            await asyncio.sleep(interval)
            lag = max(0.0, clock() - start - interval)
            held = max(0.0, cpu() - start_cpu - interval)
            self.loop_lag.append(lag)
            observe(lag)
            if lag > self.max_loop_lag:
                self.max_loop_lag = lag
            if held > self.max_loop_cpu:
                self.max_loop_cpu = held

    def reset(self) -> None:
        """Forget the samples (benchmarks reset between phases)."""
        self.added_latency.clear()
        self.loop_lag.clear()
        self.max_loop_lag = 0.0
        self.max_loop_cpu = 0.0
        self.gc_max = [0.0, 0.0, 0.0]

    def snapshot(self, *, samples: bool = False) -> dict[str, Any]:
        """A JSON-able view; with ``samples``, the latency windows themselves too (seconds), for
        :func:`merge_snapshots`."""
        view = self._view()
        if samples:
            view["samples"] = {
                "server_added_latency": list(self.added_latency),
                "event_loop_lag": list(self.loop_lag),
            }
        return view

    def _view(self) -> dict[str, Any]:
        return {
            "responses": self.responses,
            "output_tokens": self.output_tokens,
            "server_added_latency": _summary(self.added_latency),
            "event_loop_lag": {
                **_summary(self.loop_lag),
                "max_since_reset_ms": round(self.max_loop_lag * 1000, 3),
                "max_cpu_since_reset_ms": round(self.max_loop_cpu * 1000, 3),
            },
            "active_responses": self.active,
            "tenants": self.tenants.view(),
            "reasoning_summaries": {
                "count": self.summaries,
                "prompt_tokens": self.summary_prompt_tokens,
                "output_tokens": self.summary_output_tokens,
            },
            "gc": {
                f"generation_{g}": {
                    "collections": self.gc_collections[g],
                    "max_since_reset_ms": round(self.gc_max[g] * 1000, 3),
                }
                for g in range(3)
            },
        }


def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """One view of several processes' snapshots (each taken with ``samples``): counts summed, each latency
    summary computed over all their samples, maxima the largest."""
    added: deque[float] = deque(x for s in snapshots for x in s["samples"]["server_added_latency"])
    lag: deque[float] = deque(x for s in snapshots for x in s["samples"]["event_loop_lag"])
    total = lambda *path: sum(_at(s, path) for s in snapshots)  # noqa: E731
    return {
        "responses": total("responses"),
        "output_tokens": total("output_tokens"),
        "server_added_latency": _summary(added),
        "event_loop_lag": {
            **_summary(lag),
            "max_since_reset_ms": max(s["event_loop_lag"]["max_since_reset_ms"] for s in snapshots),
            "max_cpu_since_reset_ms": max(s["event_loop_lag"]["max_cpu_since_reset_ms"] for s in snapshots),
        },
        "active_responses": total("active_responses"),
        "tenants": _merged_tenants([s.get("tenants", {}) for s in snapshots]),
        "reasoning_summaries": {
            key: total("reasoning_summaries", key) for key in ("count", "prompt_tokens", "output_tokens")
        },
        "gc": {
            f"generation_{g}": {
                "collections": total("gc", f"generation_{g}", "collections"),
                "max_since_reset_ms": max(
                    s["gc"][f"generation_{g}"]["max_since_reset_ms"] for s in snapshots
                ),
            }
            for g in range(3)
        },
    }


def _merged_tenants(views: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Several processes' per-tenant counts, summed."""
    merged: dict[str, dict[str, Any]] = {}
    for view in views:
        for name, counts in view.items():
            into = merged.setdefault(name, {})
            for key, value in counts.items():
                into[key] = into.get(key, 0) + value
    return dict(sorted(merged.items()))


def _at(snapshot: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        snapshot = snapshot[key]
    return snapshot
