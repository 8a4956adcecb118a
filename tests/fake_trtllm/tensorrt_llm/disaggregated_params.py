"""tensorrt_llm/disaggregated_params.py, faked: DisaggregatedParams, the fields the LLM API reads and returns.

As there, ``request_type`` is ``"context_only"``, ``"generation_only"`` or ``"context_and_generation"``; a
context-only request's result carries one back (``executor/result.py``: ``_handle_response`` builds it from the
response's ``context_phase_params``: ``first_gen_tokens``, ``ctx_request_id``, ``opaque_state``, ``draft_tokens``),
and a generation-only request hands it to the engine that continues the context (``llmapi/llm.py``). The fake's
``opaque_state`` names the engine and request that ran the context (the real one is the cache transceiver's
connection state); nothing is transferred (README: the fake engine models no KV transfer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["DisaggregatedParams"]


@dataclass(slots=True, kw_only=True)
class DisaggregatedParams:
    request_type: Optional[str] = None
    first_gen_tokens: Optional[list[int]] = None
    ctx_request_id: Optional[Any] = None
    opaque_state: Optional[bytes] = None
    draft_tokens: Optional[list[int]] = None
