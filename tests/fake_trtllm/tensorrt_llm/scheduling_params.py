"""``SchedulingParams`` as TensorRT-LLM defines it (``tensorrt_llm/scheduling_params.py``, from PR #6246 "Add support
of scheduling attention dp request", in 1.1 and later): a dataclass (slots, kw_only) handed to
``generate_async(..., scheduling_params=...)``. ``attention_dp_rank``: "The rank of target attention dp";
``attention_dp_relax``: "Whether to allow the request to be scheduled to other attention dp for better
throughput" (``Optional[bool] = None`` in the 1.1-era file; later ``bool = True``, with more fields)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["SchedulingParams"]


@dataclass(slots=True, kw_only=True)
class SchedulingParams:
    """Schedule parameters: the target attention-DP rank, and whether the scheduler may place it elsewhere."""

    attention_dp_rank: Optional[int] = None
    attention_dp_relax: Optional[bool] = None
