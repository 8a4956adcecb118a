"""Where a session's turns run on TensorRT-LLM, and how long their KV-cache blocks are kept
(docs/sessions-and-kv-cache.md#placement, docs/sessions-and-kv-cache.md#retention).

Nothing here imports ``tensorrt_llm``: ``trtllm.py`` passes in the classes it needs. What TensorRT-LLM does with
what is built here (NVIDIA/TensorRT-LLM sources):

- **Placement** (attention data parallelism, a KV cache per rank). Where ``generate_async`` takes
  ``conversation_params`` and the engine runs ``attention_dp_config.kv_cache_routing_conversation_affinity``
  (``ConversationAwareADPRouter``: a conversation's first turn round-robined, later ones back to its rank while
  that rank is under ``max_num_active_requests``, overflowing elsewhere when it is full), the engine places: the
  session key goes as ``ConversationParams(conversation_id=…)`` and no rank is named (an explicit rank is
  assigned before the router runs, ``_assign_explicit_dp_ranks``). ``ConversationParams`` has no parent field
  (``tensorrt_llm/conversation_params.py``: ``conversation_id`` only), so a sub-agent is placed by its own key.
  Elsewhere (1.1, 1.2.x) the session's rank is named with ``attention_dp_relax=True``: a request with a target
  rank is put there while the rank is under ``max_num_active_requests``, relaxed or not ("Try to put the requests
  to the target dp rank until the max_num_active_requests is reached", ``_schedule_attention_dp_requests``,
  ``_torch/pyexecutor/executor_request_queue.py``); relaxed only decides what happens when it is full: a strict
  request waits in the queue (``_can_process_attention_dp_request``), a relaxed one runs elsewhere. A rank's
  fullness is the engine's own count, not visible through the LLM API, so relaxing always is "pinned while the
  rank has room, elsewhere when it is full", decided where the count is.
- **Retention** (``KvCacheRetentionConfig``, fixed when a request is submitted): a request's blocks take its
  per-block priority and duration; a later request that reuses blocks re-stamps them with its own
  (``LRUEvictionPolicy::claimBlock``: "New priority values always override the previous value"; a block a range
  does not cover keeps its priority and loses its duration), and a duration, counted from when the blocks are
  released, ends at the default priority 35 (``refresh``). So a session turn states its priority over the whole
  prompt and its output (never leaving an earlier turn's raised priority in place), and a turn's priority is
  changed after it ended by a request over the same tokens: :func:`release_config` (a one-token generation),
  since no release played has a call that changes or frees cached blocks on the LLM API (trtllm-serve's
  ``/_control/kv_cache/truncate_tokens``, ``serve/resource_governor.py``, reaches its own executor's queue only).
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Mapping
from typing import Any

from .base import GenerationRequest

__all__ = [
    "AFFINITY_KEY",
    "DEFAULT_RETENTION_PRIORITY",
    "DEFAULT_TOOL_PAUSE_SECONDS",
    "RELEASED_PRIORITY",
    "RETAINED_PROMPT_PRIORITY",
    "TOOL_PAUSE_PRIORITY",
    "affinity_on",
    "attention_dp_rank",
    "release_config",
    "turn_config",
]

#: TensorRT-LLM's default retention priority (``KvCacheRetentionConfig::kDefaultRetentionPriority``).
DEFAULT_RETENTION_PRIORITY = 35
#: A turn that may end waiting for a client-run tool: kept above every default block for the pause.
TOOL_PAUSE_PRIORITY = 60
#: ``prompt_cache_options.ttl``: the client asked for the prompt to be kept this long.
RETAINED_PROMPT_PRIORITY = 80
#: Blocks no one will reuse: evicted first, and never offloaded to host memory (below every
#: ``secondary_offload_min_priority`` this server sets or TensorRT-LLM defaults to, 30).
RELEASED_PRIORITY = 0
#: ``serve --kv_tool_pause_seconds``: how long a turn that may end in a client tool call keeps its priority.
DEFAULT_TOOL_PAUSE_SECONDS = 120


def _duration(seconds: float | None) -> datetime.timedelta | None:
    return None if seconds is None else datetime.timedelta(seconds=seconds)


def turn_retention(request: GenerationRequest, tool_pause_seconds: int) -> tuple[int, float | None] | None:
    """(priority, seconds) for a session turn's prompt and output; None: the engine's default (no session).

    A turn that may end waiting for a tool the client runs (``client_tools``) keeps its blocks at
    :data:`TOOL_PAUSE_PRIORITY` for ``tool_pause_seconds`` (0: not raised); any other session turn states the
    default priority, so that blocks an earlier turn raised come back to it.
    """
    if request.session_key is None:
        return None
    if request.client_tools and tool_pause_seconds > 0:
        return TOOL_PAUSE_PRIORITY, float(tool_pause_seconds)
    return DEFAULT_RETENTION_PRIORITY, None


def turn_config(config: Any, request: GenerationRequest, tool_pause_seconds: int) -> Any:
    """The ``kv_cache_retention_config`` of a generation (``config``: TensorRT-LLM's ``KvCacheRetentionConfig``),
    or None when it needs none (no session, no ttl).

    The prompt: :data:`RETAINED_PROMPT_PRIORITY` for ``prompt_cache_options.ttl`` when asked, else the turn's
    priority (:func:`turn_retention`); the output (decode blocks): the turn's priority, else the default.
    """
    turn = turn_retention(request, tool_pause_seconds)
    ttl = request.cache_retention_seconds
    if turn is None and ttl is None:
        return None
    prompt = (RETAINED_PROMPT_PRIORITY, float(ttl)) if ttl is not None else turn
    decode = turn if turn is not None else (DEFAULT_RETENTION_PRIORITY, None)
    assert prompt is not None
    ranges = [config.TokenRangeRetentionConfig(0, None, prompt[0], _duration(prompt[1]))]
    return config(ranges, decode[0], _duration(decode[1]))


def release_config(config: Any, keep: int, ended: bool) -> Any:
    """The retention of a request that re-stamps cached blocks after the turn that made them: tokens ``keep`` on at
    :data:`RELEASED_PRIORITY` (``ended``: nobody will reuse them) or the default priority (the turn ended with a
    final answer); the first ``keep`` tokens (shared with what lives on: the system and developer messages, the
    part a compacted conversation keeps) are not covered, so they keep theirs."""
    priority = RELEASED_PRIORITY if ended else DEFAULT_RETENTION_PRIORITY
    return config([config.TokenRangeRetentionConfig(keep, None, priority, None)], priority, None)


def attention_dp_rank(session_key: str, ranks: int) -> int:
    """The attention-DP rank of a session: a hash of its key (the same in every process and frontend), mod ``ranks``."""
    digest = hashlib.blake2b(session_key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % ranks


#: ``attention_dp_config``'s switch for TensorRT-LLM's conversation-affinity router (``llmapi/llm_args.py``).
AFFINITY_KEY = "kv_cache_routing_conversation_affinity"


def affinity_on(args: Any) -> bool:
    """Whether the started engine runs conversation affinity (``args.attention_dp_config``, a model or a mapping)."""
    adp = getattr(args, "attention_dp_config", None)
    value = adp.get(AFFINITY_KEY) if isinstance(adp, Mapping) else getattr(adp, AFFINITY_KEY, None)
    return bool(value)
