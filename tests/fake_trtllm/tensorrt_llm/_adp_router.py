"""Attention-DP placement, faked: which rank's KV cache a request runs on (each rank has a pool of its own).

As TensorRT-LLM places new requests (NVIDIA/TensorRT-LLM ``tensorrt_llm/_torch/pyexecutor/``):

- **An explicit rank** (``SchedulingParams.attention_dp_rank``, PR #6246) is honoured while that rank is under
  ``max_num_active_requests`` (here ``max_batch_size``), relaxed or not: "Try to put the requests to the target dp
  rank until the max_num_active_requests is reached" (``_schedule_attention_dp_requests``,
  ``executor_request_queue.py``; ``ADPRouter._assign_explicit_dp_ranks`` later). A strict request
  (``attention_dp_relax=False``) whose rank is full waits in the queue (``_can_process_attention_dp_request``);
  the fake runs it there anyway and counts it in ``waited`` (it has no queue). A relaxed one goes elsewhere.
- **Conversation affinity** (releases with ``ConversationParams``, ``attention_dp_config.kv_cache_routing_
  conversation_affinity: true``; ``ConversationAwareADPRouter``): a conversation's first request is round-robined
  over ranks under the fair-share cap and bound to its rank; later ones return there while it is under
  ``max_num_active_requests`` (else overflow round-robin, the binding kept); an LRU of
  ``kv_cache_routing_max_sessions`` bindings.
- **Everything else**: the least-loaded rank (the heap of ``DefaultADPRouter._balance_requests_across_ranks``),
  ties to the lowest rank after the last one used (the fake's round-robin, as before).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional

__all__ = ["AdpRouter"]


class AdpRouter:
    """Places requests on ``ranks`` attention-DP ranks and counts what runs on each."""

    def __init__(self, ranks: int, max_active: int, affinity: bool, max_sessions: int) -> None:
        self.ranks = ranks
        self.max_active = max(1, max_active)
        self.affinity = affinity
        self.active = [0] * ranks
        self.waited = 0  # strict requests sent to a full rank (the engine would have queued them)
        self._cursor = 0
        self._conversations: OrderedDict[str, int] = OrderedDict()
        self._max_sessions = max(1, max_sessions)

    def place(self, scheduling: Any, conversation_id: Optional[str]) -> int:
        """The rank a new request runs on (it is counted active there until :meth:`ended`)."""
        rank = self._choose(scheduling, conversation_id)
        self.active[rank] += 1
        return rank

    def ended(self, rank: int) -> None:
        self.active[rank] = max(0, self.active[rank] - 1)

    def _choose(self, scheduling: Any, conversation_id: Optional[str]) -> int:
        target = scheduling.attention_dp_rank if scheduling is not None else None
        if target is not None:
            if not 0 <= target < self.ranks:
                raise ValueError(
                    f"attention_dp_rank {target} is not a rank of {self.ranks}"
                )  # the fake's guard
            if self.active[target] < self.max_active:
                return int(target)
            if scheduling.attention_dp_relax is False:
                self.waited += 1
                return int(target)
        if self.affinity and conversation_id is not None:
            bound = self._conversations.get(conversation_id)
            if bound is not None and self.active[bound] < self.max_active:
                self._conversations.move_to_end(conversation_id)
                return bound
            rank = self._next()
            if bound is None:
                self._conversations[conversation_id] = rank
                while len(self._conversations) > self._max_sessions:
                    self._conversations.popitem(last=False)
            return rank
        return self._next()

    def _next(self) -> int:
        """Round-robin over the ranks under the cap (else the least loaded)."""
        for _ in range(self.ranks):
            rank = self._cursor % self.ranks
            self._cursor = (self._cursor + 1) % self.ranks
            if self.active[rank] < self.max_active:
                return rank
        return min(range(self.ranks), key=lambda r: (self.active[r], r))
