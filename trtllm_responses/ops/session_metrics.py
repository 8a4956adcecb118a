"""Whether turns found their prefix, and what the engine holds: ``/metrics``' KV metrics
(docs/sessions-and-kv-cache.md#kv-events-and-metrics).

Per turn (one generation a response ends with, never per token), labelled by ``tenant`` (the names of the
tenants file, or ``default``: as few labels as tenants):

- ``trtllm_turn_cached_ratio{tenant}``: a histogram of ``cached_tokens / prompt_tokens`` of each response;
- ``trtllm_session_turns_total{tenant}``: turns of a session this process saw a turn of before (the
  denominator of the next);
- ``trtllm_session_prefix_misses_total{tenant}``: of those, the turns that missed their prefix: the engine
  reused fewer tokens than the previous turn's prompt, counted in whole blocks (the engine reuses whole blocks
  and never a prompt's last token), less one block of slack. With ``P`` the previous turn's prompt tokens,
  ``N`` this one's, ``B`` the engine's tokens per block: ``expected = floor(min(P, N - 1) / B) * B``, and the
  turn missed when ``cached < expected - B``. A session's previous prompt length is remembered per process, for
  the last ``SESSIONS_REMEMBERED`` sessions (least recently used forgotten): a session's first turn here, or its
  turn after being forgotten, is not a session turn. A turn whose history was truncated or compacted away
  counts as a miss: the engine had to recompute it.

Engine gauges, this replica's (``engine_load``, sampled by the executor, set when scraped; absent when the
engine reports none): ``trtllm_engine_kv_blocks{state="used"|"capacity"}``, ``trtllm_engine_kv_usage_ratio``,
``trtllm_engine_queued_requests``, ``trtllm_engine_active_requests``.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["SESSIONS_REMEMBERED", "SessionMetrics", "missed_prefix"]

#: Sessions whose last prompt length a process remembers (about 100 bytes each).
SESSIONS_REMEMBERED = 65536
_RATIO_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)


def missed_prefix(previous_prompt: int, prompt: int, cached: int, block: int) -> bool:
    """Whether a turn of ``prompt`` tokens, ``cached`` of them reused, missed the prefix its session's previous
    turn (``previous_prompt`` tokens) left in blocks of ``block`` tokens (the rule above)."""
    expected = min(previous_prompt, prompt - 1) // block * block
    return cached < expected - block


class SessionMetrics:
    """The per-turn KV collectors and the engine gauges of one server process (in ``registry``)."""

    def __init__(self, registry: CollectorRegistry, remembered: int = SESSIONS_REMEMBERED) -> None:
        self.ratio = Histogram(
            "trtllm_turn_cached_ratio",
            "Prompt tokens the engine reused over prompt tokens, per response, by tenant",
            ["tenant"],
            buckets=_RATIO_BUCKETS,
            registry=registry,
        )
        self.turns = Counter(
            "trtllm_session_turns",
            "Turns of a session seen before in this process, by tenant",
            ["tenant"],
            registry=registry,
        )
        self.misses = Counter(
            "trtllm_session_prefix_misses",
            "Session turns that missed their previous turn's prefix (docs/sessions-and-kv-cache.md)",
            ["tenant"],
            registry=registry,
        )
        #: The engine gauges, each made when the engine first says its value (absent until then).
        self._gauges: dict[str, Gauge] = {}
        self._gauge = partial(Gauge, registry=registry, multiprocess_mode="mostrecent")
        self._children: dict[str, tuple[Any, Any, Any]] = {}
        self._remembered = remembered
        self._last_prompt: OrderedDict[tuple[str, str], int] = OrderedDict()

    def turn(self, tenant: str, session: str | None, prompt: int, cached: int, block: int | None) -> None:
        """A response of ``tenant``'s ``session`` ended: ``prompt`` tokens, ``cached`` reused, blocks of
        ``block`` tokens (None: the engine keeps no KV cache, as the echo executor, so no turn can miss). O(1)."""
        if prompt <= 0:
            return
        ratio, turns, misses = self._of(tenant)
        ratio.observe(min(1.0, cached / prompt))
        if session is None or block is None:
            return
        key = (tenant, session)
        previous = self._last_prompt.pop(key, None)
        self._last_prompt[key] = prompt
        if len(self._last_prompt) > self._remembered:
            self._last_prompt.popitem(last=False)
        if previous is None:
            return
        turns.inc()
        if missed_prefix(previous, prompt, cached, block):
            misses.inc()

    def _of(self, tenant: str) -> tuple[Any, Any, Any]:
        """A tenant's labelled children, found once (``labels()`` costs a lock and a tuple per call)."""
        children = self._children.get(tenant)
        if children is None:
            children = self._children[tenant] = (
                self.ratio.labels(tenant),
                self.turns.labels(tenant),
                self.misses.labels(tenant),  # shown at 0 from the tenant's first turn on
            )
        return children

    def engine(self, load: Any) -> None:
        """Set the engine gauges from an ``EngineLoad`` (its fields None where the engine said nothing)."""
        if load is None:
            return
        used, capacity = load.kv_used_blocks, load.kv_max_blocks
        if used is not None:
            self._set("trtllm_engine_kv_blocks", used, "used")
        if capacity is not None:
            self._set("trtllm_engine_kv_blocks", capacity, "capacity")
        if used is not None and capacity:
            self._set("trtllm_engine_kv_usage_ratio", used / capacity)
        if load.queued_requests is not None:
            self._set("trtllm_engine_queued_requests", load.queued_requests)
        if load.active_requests is not None:
            self._set("trtllm_engine_active_requests", load.active_requests)

    def _set(self, name: str, value: float, state: str | None = None) -> None:
        gauge = self._gauges.get(name)
        if gauge is None:
            help_text, labels = _ENGINE_GAUGES[name]
            gauge = self._gauges[name] = self._gauge(name, help_text, labels)
        (gauge.labels(state) if state is not None else gauge).set(value)


#: The engine gauges: help and labels.
_ENGINE_GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "trtllm_engine_kv_blocks": ("The engine's KV-cache blocks, used and capacity (this replica)", ("state",)),
    "trtllm_engine_kv_usage_ratio": ("Used over capacity KV-cache blocks (this replica)", ()),
    "trtllm_engine_queued_requests": ("Requests queued in the engine (this replica)", ()),
    "trtllm_engine_active_requests": ("Requests the engine is running (this replica)", ()),
}
