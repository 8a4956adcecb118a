"""What runs beside TensorRT-LLM while the server serves: its KV cache events drained and published, its
iteration stats sampled (docs/sessions-and-kv-cache.md#kv-events-and-metrics).

Two background tasks on the server's loop, each started only when asked for, so a server without them
pays nothing:

- **events** (``serve --kv_events_endpoint``): ``LLM.get_kv_cache_events_async(timeout)`` drained as
  Dynamo's TensorRT-LLM worker drains it (``components/src/dynamo/trtllm/publisher.py``: a short timeout, then a
  backoff sleep of 5-20 ms while nothing comes), each drain published as one batch (``kv_publisher.py``);
- **stats** (the LLM built with ``enable_iter_perf_stats``, without which TensorRT-LLM records none):
  ``LLM.get_stats_async(timeout)`` drained every ``STATS_INTERVAL`` seconds, its last record kept as
  :class:`~.base.EngineLoad` (the KV blocks used and held, the queued and active requests), with
  ``LLM.get_kv_cache_capacity()`` read once at start where the release has it (TensorRT-LLM PR #15385, 1.3.0rc21
  and later) so the KV capacity is known before the first request.

Neither touches a request: per token nothing, per turn nothing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import Any

from .base import EngineLoad
from .kv_publisher import KvEventPublisher, KvEventsSettings

__all__ = [
    "DEFAULT_EVENT_BUFFER",
    "EngineWatch",
    "STATS_INTERVAL",
    "kv_block_tokens",
    "watch_for",
    "with_kv_events",
]

logger = logging.getLogger(__name__)

#: Seconds between drains of the iteration stats.
STATS_INTERVAL = 0.5
#: ``get_kv_cache_events_async``' timeout, and the sleeps while nothing comes (Dynamo's: 0, 5 ms to 20 ms).
_EVENTS_TIMEOUT = 0.0
_EVENTS_MIN_SLEEP = 0.005
_EVENTS_MAX_SLEEP = 0.02
#: ``kv_cache_config.event_buffer_max_size`` set when events are asked for and the arguments give none: the
#: events the engine keeps between drains (the oldest dropped past it, then sent as a gap).
DEFAULT_EVENT_BUFFER = 4096
#: TensorRT-LLM's ``KvCacheConfig.tokens_per_block`` default (``llmapi/llm_args.py``).
DEFAULT_TOKENS_PER_BLOCK = 32


def with_kv_events(kwargs: dict[str, Any], settings: KvEventsSettings | None) -> dict[str, Any]:
    """The LLM arguments with ``kv_cache_config.event_buffer_max_size`` set where events are asked for and the
    arguments leave it 0; ValueError where block reuse is off (the engine then stores, so reports, nothing)."""
    if settings is None:
        return kwargs
    if importlib.util.find_spec("zmq") is None or importlib.util.find_spec("msgpack") is None:
        raise ValueError(
            "--kv_events_endpoint needs pyzmq and msgpack: pip install 'trtllm-responses[kv-events]'"
        )
    kv = kwargs.get("kv_cache_config")
    kv = dict(kv) if isinstance(kv, dict) else {} if kv is None else kv
    read = kv.get if isinstance(kv, dict) else lambda name: getattr(kv, name, None)
    if read("enable_block_reuse") is False:
        raise ValueError(
            "--kv_events_endpoint needs KV-cache block reuse: kv_cache_config.enable_block_reuse is false, so "
            "TensorRT-LLM keeps no blocks to report"
        )
    if not read("event_buffer_max_size"):
        if isinstance(kv, dict):
            kv["event_buffer_max_size"] = DEFAULT_EVENT_BUFFER
        else:
            kv.event_buffer_max_size = DEFAULT_EVENT_BUFFER
    return {**kwargs, "kv_cache_config": kv}


def kv_block_tokens(kv_cache_config: Any) -> int:
    """``tokens_per_block`` of a KV cache config (a dict, an object or None)."""
    value = (
        kv_cache_config.get("tokens_per_block")
        if isinstance(kv_cache_config, dict)
        else getattr(kv_cache_config, "tokens_per_block", None)
    )
    return int(value or DEFAULT_TOKENS_PER_BLOCK)


def watch_for(llm: Any, settings: KvEventsSettings | None, attached: bool) -> EngineWatch | None:
    """The watch over a started ``llm``: its events published (``settings``) and its stats sampled (the LLM
    built with ``enable_iter_perf_stats``); None when neither, or in an attached frontend (the launcher, which
    owns the engine, watches it)."""
    args = getattr(llm, "args", None)
    stats = bool(getattr(args, "enable_iter_perf_stats", False))
    if attached or (settings is None and not stats):
        return None
    block = kv_block_tokens(getattr(args, "kv_cache_config", None))
    publisher = KvEventPublisher(settings, block) if settings is not None else None
    return EngineWatch(llm, publisher, stats)


class EngineWatch:
    """The background tasks over one started ``LLM``; :meth:`start` them, :meth:`stop` them before the LLM."""

    def __init__(self, llm: Any, publisher: KvEventPublisher | None, stats: bool) -> None:
        self._llm = llm
        self.publisher = publisher
        self._stats = stats
        self._tasks: list[asyncio.Task[None]] = []
        #: The engine's load as last sampled (None: not yet, or the engine records none).
        self.load: EngineLoad | None = None
        #: Set at the first generation: TensorRT-LLM serves events and stats only once a request was submitted
        #: (before, ``get_stats_async`` prints a warning each call: ``executor/proxy.py`` ``aget_stats``).
        self.submitted = asyncio.Event()
        self._warned = False

    async def start(self) -> None:
        """Read the KV capacity where the LLM has ``get_kv_cache_capacity``; start the tasks asked for."""
        capacity = getattr(self._llm, "get_kv_cache_capacity", None)
        if capacity is not None:
            try:
                held = await asyncio.to_thread(capacity)
            except Exception as exc:  # a release that has the name but not the executor path: no capacity
                logger.debug("get_kv_cache_capacity failed: %s", exc)
            else:
                if held:
                    self.load = EngineLoad(
                        kv_max_blocks=held.get("maxNumBlocks"), kv_tokens_per_block=held.get("tokensPerBlock")
                    )
        if self.publisher is not None:
            self._tasks.append(asyncio.create_task(self._drain_events(), name="kv-events"))
        if self._stats:
            self._tasks.append(asyncio.create_task(self._sample_stats(), name="engine-stats"))

    async def stop(self) -> None:
        """Cancel the tasks and close the publisher."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        if self.publisher is not None:
            self.publisher.close()

    def _failed(self, what: str, exc: Exception) -> None:
        """Say once that the engine would not answer (then at debug level: the task retries every few ms)."""
        (logger.debug if self._warned else logger.warning)("Could not read TensorRT-LLM's %s: %s", what, exc)
        self._warned = True

    async def _drain_events(self) -> None:
        assert self.publisher is not None
        await self.submitted.wait()
        sleep = _EVENTS_MIN_SLEEP
        while True:
            events: list[Any] = []
            try:
                async for event in self._llm.get_kv_cache_events_async(_EVENTS_TIMEOUT):
                    events.append(event)
            except (asyncio.TimeoutError, IndexError, asyncio.QueueEmpty):
                pass
            except Exception as exc:
                self._failed("KV cache events", exc)
                sleep = _EVENTS_MAX_SLEEP
            if events:
                self.publisher.publish(events)
                sleep = _EVENTS_MIN_SLEEP
            else:
                sleep = min(_EVENTS_MAX_SLEEP, sleep * 1.5)
            await asyncio.sleep(sleep)

    async def _sample_stats(self) -> None:
        await self.submitted.wait()
        while True:
            last = None
            try:
                async for stat in self._llm.get_stats_async(0.01):
                    last = stat
            except (asyncio.TimeoutError, IndexError, asyncio.QueueEmpty):
                pass
            except Exception as exc:
                self._failed("iteration stats", exc)
            if isinstance(last, dict):
                self.load = _load_of(last, self.load)
            await asyncio.sleep(STATS_INTERVAL)


def _load_of(stat: dict[str, Any], previous: EngineLoad | None) -> EngineLoad:
    """An :class:`EngineLoad` from one iteration-stats record (the JSON names of ``IterationStats``)."""
    kv = stat.get("kvCacheStats") or {}
    held = previous.kv_max_blocks if previous is not None else None
    return EngineLoad(
        kv_used_blocks=_int(kv.get("usedNumBlocks")),
        kv_max_blocks=_int(kv.get("maxNumBlocks")) or held,
        kv_tokens_per_block=_int(kv.get("tokensPerBlock")),
        queued_requests=_int(stat.get("numQueuedRequests")),
        active_requests=_int(stat.get("numActiveRequests")),
    )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
