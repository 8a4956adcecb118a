"""tensorrt_llm/disaggregated_params.py, faked: DisaggregatedParams, the fields the LLM API reads and returns.

As there, ``request_type`` is ``"context_only"``, ``"generation_only"`` or ``"context_and_generation"``; a
context-only request's result carries one back (``executor/result.py``: ``_handle_response`` builds it from the
response's ``context_phase_params``: ``first_gen_tokens``, ``ctx_request_id``, ``opaque_state``, ``draft_tokens``),
and a generation-only request hands it to the engine that continues the context (``llmapi/llm.py``). The fake's
``opaque_state`` names the engine and request that ran the context (the real one is the cache transceiver's
connection state); nothing is transferred (README: the fake engine models no KV transfer).

The fields the OpenEngine adapter carries in a ``KvSessionRef`` (``tensorrt_llm/grpc/openengine/disagg.py``:
``ctx_info_endpoint``, ``disagg_request_id``, ``ctx_dp_rank``, ``schedule_style``, ``ctx_usage``,
``first_gen_log_probs``) are TensorRT-LLM's too; the fake sets none of them on a context result (it has no
cache transceiver endpoint, no disaggregated proxy id), so they travel only when a client sets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Optional

__all__ = ["DisaggScheduleStyle", "DisaggregatedParams"]


class DisaggScheduleStyle(IntEnum):
    """Which leg the disaggregated proxy sends first (``disaggregated_params.py`` there)."""

    CONTEXT_FIRST = 0
    GENERATION_FIRST = 1


@dataclass(slots=True, kw_only=True)
class DisaggregatedParams:
    request_type: Optional[str] = None
    first_gen_tokens: Optional[list[int]] = None
    ctx_request_id: Optional[Any] = None
    opaque_state: Optional[bytes] = None
    draft_tokens: Optional[list[int]] = None
    ctx_info_endpoint: Optional[Any] = None
    disagg_request_id: Optional[int] = None
    ctx_dp_rank: Optional[int] = None
    schedule_style: Optional[DisaggScheduleStyle] = None
    ctx_usage: Optional[dict[str, int]] = None
    first_gen_log_probs: Optional[list[Any]] = None
