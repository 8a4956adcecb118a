"""KV cache events and iteration stats of the fake LLM: what ``LLM.get_kv_cache_events_async``,
``get_kv_cache_events``, ``get_stats_async`` and ``get_kv_cache_capacity`` return.

Copied from TensorRT-LLM (NVIDIA/TensorRT-LLM):

- **The event shapes** are ``KVCacheEventSerializer.to_json_str`` (``tensorrt_llm/_utils.py``): each event is
  ``{"event_id", "data", "window_size"}`` plus ``"attention_dp_rank"`` where the event manager has one (it is set
  with attention DP on: ``resource_manager.py`` passes ``attention_dp_rank=mapping.rank if
  mapping.enable_attention_dp else None``, PR #6563, merged August 2025, before 1.1.0: on every release played).
  ``data`` is ``{"type": "created", "num_blocks_per_cache_level"}``, ``{"type": "stored", "parent_hash",
  "blocks": [{"type": "stored_block", "block_hash", "tokens": [{"type": "unique_token", "token_id",
  "token_extra_id"}], "cache_level", "priority"}]}`` or ``{"type": "removed", "block_hashes"}``
  (``updated`` is never emitted here: below). The manager's first events are one
  ``created`` per attention window; event ids count from 0 per manager.
- **The buffer** is the C++ ``KVCacheEventManager`` sized by ``kv_cache_config.event_buffer_max_size``: the
  oldest events are dropped past it; with 0 no events are kept (``LLM.get_kv_cache_events``' docstring:
  "set ``event_buffer_max_size`` to a positive integer" and "``enable_block_reuse`` to True").
- **The async drain** is ``IterationResult.__anext__`` (``executor/result.py``): events come as dicts (a JSON
  round trip, ``json.loads``), each awaited for at most ``timeout`` seconds; the iteration ends at the first
  wait that times out.
- **Iteration stats** (``get_stats_async``) have the JSON names of ``IterationStats`` as
  ``PyExecutor._update_iter_stats`` fills them (``_torch/pyexecutor/py_executor.py``): ``numActiveRequests``,
  ``numQueuedRequests``, ``maxNumActiveRequests``, ``kvCacheStats`` {``maxNumBlocks``, ``freeNumBlocks``,
  ``usedNumBlocks``, ``tokensPerBlock``, ``allocTotalBlocks``, ``allocNewBlocks``, ``reusedBlocks``,
  ``missedBlocks``, ``cacheHitRate``} ...; none at all unless ``enable_iter_perf_stats``
  (``get_latest_iteration_stats`` returns ``[]`` then). The fake has no iteration loop: each drain yields one
  record of the moment (after any request was submitted), queued requests being those past
  ``max_batch_size`` (the fake's own stand-in for the scheduler), used blocks those of unfinished requests.
- **``get_kv_cache_capacity()``** (``{"maxNumBlocks", "tokensPerBlock", "maxNumTokens"}``, the primary pool) came
  with PR #15385 (June 2026), in 1.3.0rc21 and later (ai-dynamo/dynamo PR #12023 uses it on 1.3.0rc21): the
  fake has it from 1.3.0rc21 (``_release.at_least``), not on 1.1 or 1.2.x.

The block hash is the fake pool's own key (``_kv_pool.py``: chained over the parent's key and the block's tokens,
the ``cache_salt`` mixed into the first block only, as TensorRT-LLM's ``BlockKeyHasher`` chains, PR #7106), as
an unsigned 64-bit integer; its values are not TensorRT-LLM's, and consumers treat hashes as opaque ids.
Offload to and onboard from the host tier are not sent (TensorRT-LLM's ``updated`` events): a block offloaded
is still stored, a block the host tier drops is ``removed``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from typing import Any, AsyncIterator, Optional, Sequence

from .._release import at_least

#: gpt-oss's attention windows: its sliding-window layers (128 tokens) and its full-attention layers (the
#: sequence): TensorRT-LLM keeps a pool per window and emits a ``created`` event for each.
SLIDING_WINDOW = 128


def u64(key: int) -> int:
    """A pool key (``_kv_pool.KvPool.keys``: chained, the salt in the first block) as TensorRT-LLM's events carry
    a block hash: an unsigned 64-bit integer."""
    return key & 0xFFFF_FFFF_FFFF_FFFF


class KvEventBuffer:
    """One KV-cache manager's event queue (one per attention-DP rank), bounded like ``KVCacheEventManager``.

    A listener of the pool (``_kv_pool.KvPool.listeners``): :meth:`stored` with the new blocks it stored,
    :meth:`removed` with the keys it evicted. Thread-safe: attached frontends store through the launcher's
    IPC threads.
    """

    def __init__(
        self,
        max_size: int,
        tokens_per_block: int,
        num_blocks: int,
        window_size: int,
        attention_dp_rank: Optional[int],
    ) -> None:
        self.enabled = max_size > 0
        self.block = tokens_per_block
        self.window_size = window_size
        self.attention_dp_rank = attention_dp_rank
        self._events: deque[str] = deque(maxlen=max(1, max_size))
        self._lock = threading.Lock()
        self._next_id = 0
        for window in sorted({SLIDING_WINDOW, window_size}):
            self._emit({"type": "created", "num_blocks_per_cache_level": [num_blocks, 0]}, window)

    def _emit(self, data: dict[str, Any], window: Optional[int] = None) -> None:
        if not self.enabled:
            return
        event: dict[str, Any] = {
            "event_id": self._next_id,
            "data": data,
            "window_size": self.window_size if window is None else window,
        }
        if self.attention_dp_rank is not None:
            event["attention_dp_rank"] = self.attention_dp_rank
        self._next_id += 1
        self._events.append(json.dumps(event))  # the executor sends them serialized; IterationResult loads

    def stored(self, blocks: list[Any], tokens: Sequence[int], ends: list[int]) -> None:
        """The pool stored new ``blocks`` (``_kv_pool.Block``, block i ending at ``ends[i]`` of ``tokens``, in
        order): one ``stored`` event per run of consecutive blocks, its ``parent_hash`` the block the run hangs
        from (None for a sequence's first block)."""
        if not blocks:
            return
        with self._lock:
            runs: list[list[int]] = []
            for i, end in enumerate(ends):
                if runs and ends[runs[-1][-1]] + self.block == end:
                    runs[-1].append(i)
                else:
                    runs.append([i])
            for run in runs:
                first = blocks[run[0]]
                parent = None if first.parent is None else u64(first.parent)
                stored = [
                    _stored_block(
                        u64(blocks[i].key),
                        tuple(tokens[ends[i] - self.block : ends[i]]),
                        blocks[i].priority,
                    )
                    for i in run
                ]
                self._emit({"type": "stored", "parent_hash": parent, "blocks": stored})

    def removed(self, keys: list[int]) -> None:
        """The pool evicted the blocks ``keys`` (lost, not offloaded): one ``removed`` event naming them."""
        if not keys:
            return
        with self._lock:
            self._emit({"type": "removed", "block_hashes": [u64(k) for k in keys]})

    def drain(self) -> list[dict[str, Any]]:
        """Every event queued, oldest first (as dicts), and the queue emptied."""
        with self._lock:
            events = [json.loads(e) for e in self._events]
            self._events.clear()
        return events


def _stored_block(block_hash_: int, tokens: tuple[int, ...], priority: int) -> dict[str, Any]:
    return {
        "type": "stored_block",
        "block_hash": block_hash_,
        "tokens": [{"type": "unique_token", "token_id": t, "token_extra_id": 0} for t in tokens],
        "cache_level": 0,
        "priority": priority,  # the block's retention priority when stored (``_kv_pool.py``)
    }


class KvEventsApi:
    """The LLM's event, stats and capacity methods (mixed into the fake ``LLM``)."""

    _event_buffers: list[KvEventBuffer]
    _live: list[Any]
    _submitted: bool
    args: Any

    async def _drain_async(self, take: Any, timeout: Optional[float]) -> AsyncIterator[dict[str, Any]]:
        """IterationResult.__anext__: each item awaited for at most ``timeout`` s; the first wait that times
        out ends the iteration."""
        loop = asyncio.get_running_loop()
        wait = 2.0 if timeout is None else timeout
        while True:
            deadline = loop.time() + wait
            items = take()
            while not items and loop.time() < deadline:
                await asyncio.sleep(min(0.005, max(0.0, deadline - loop.time())))
                items = take()
            if not items:
                return
            for item in items:
                yield item

    def _take_events(self) -> list[dict[str, Any]]:
        return [event for buffer in self._event_buffers for event in buffer.drain()]

    def get_kv_cache_events(self, timeout: Optional[float] = 2) -> list[dict[str, Any]]:
        """LLM.get_kv_cache_events: the events queued now, as dicts."""
        return self._take_events()

    def get_kv_cache_events_async(self, timeout: Optional[float] = 2) -> AsyncIterator[dict[str, Any]]:
        """LLM.get_kv_cache_events_async: an async iterable of the events, as dicts."""
        return self._drain_async(self._take_events, timeout)

    def get_stats_async(self, timeout: Optional[float] = 2) -> AsyncIterator[dict[str, Any]]:
        """LLM.get_stats_async: iteration stats (none without ``enable_iter_perf_stats``)."""
        taken = [False]

        def take() -> list[dict[str, Any]]:
            if taken[0] or not self.args.enable_iter_perf_stats or not self._submitted:
                return []
            taken[0] = True
            return [json.loads(json.dumps(self._iteration_stats()))]

        return self._drain_async(take, timeout)

    def _iteration_stats(self) -> dict[str, Any]:
        kv = self.args.kv_cache_config
        running = [r for r in self._live if not r.finished]
        self._live[:] = running
        limit = self.args.max_batch_size or len(running)
        active, queued = running[:limit], running[limit:]
        used = sum(-(-(len(r.prompt_token_ids) + len(r._all_tokens)) // kv.tokens_per_block) for r in active)
        capacity = self._capacity_blocks()
        return {
            "iter": self._next_id,  # type: ignore[attr-defined]
            "numActiveRequests": len(active),
            "numQueuedRequests": len(queued),
            "numCompletedRequests": 0,
            "maxNumActiveRequests": self.args.max_batch_size,
            "kvCacheStats": {
                "maxNumBlocks": capacity,
                "freeNumBlocks": max(0, capacity - used),
                "usedNumBlocks": used,
                "tokensPerBlock": kv.tokens_per_block,
                "allocTotalBlocks": used,
                "allocNewBlocks": used,
                "reusedBlocks": 0,
                "missedBlocks": 0,
                "cacheHitRate": 0.0,
            },
            "inflightBatchingStats": {
                "numPausedRequests": 0,
                "numContextRequests": 0,
                "numGenRequests": len(active),
            },
        }

    def _capacity_blocks(self) -> int:
        raise NotImplementedError

    def _kv_cache_capacity(self) -> dict[str, int]:
        """LLM.get_kv_cache_capacity (PR #15385): the primary pool's blocks, block size and tokens."""
        blocks, per_block = self._capacity_blocks(), self.args.kv_cache_config.tokens_per_block
        return {"maxNumBlocks": blocks, "tokensPerBlock": per_block, "maxNumTokens": blocks * per_block}

    def _attach_kv_events(self) -> None:
        """Give every rank's pool an event buffer; expose ``get_kv_cache_capacity`` where the release has it."""
        kv = self.args.kv_cache_config
        window = self.args.max_seq_len or 131072
        self._event_buffers = []
        for rank, pool in enumerate(self._kv_ranks):  # type: ignore[attr-defined]
            buffer = KvEventBuffer(
                kv.event_buffer_max_size if kv.enable_block_reuse else 0,
                kv.tokens_per_block,
                self._capacity_blocks(),
                window,
                rank if self.args.enable_attention_dp else None,
            )
            if hasattr(pool, "listeners"):  # not an attached frontend's: the launcher's pool tells its own
                pool.listeners.append(buffer)
            self._event_buffers.append(buffer)
        if at_least("1.3.0rc21"):
            self.get_kv_cache_capacity = self._kv_cache_capacity
