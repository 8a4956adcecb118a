"""tensorrt_llm/sampling_params.py, faked: GuidedDecodingParams and SamplingParams with TensorRT-LLM's names.

GuidedDecodingParams is TensorRT-LLM's dataclass (slots, kw_only), with the same five guides
and the same `_validate` (at most one guide per request). SamplingParams keeps the fields
trtllm-responses uses, with TensorRT-LLM's names and defaults, keyword-only as there.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple, Optional, Union


@dataclass(slots=True, kw_only=True)
class GuidedDecodingParams:
    json: Optional[Union[str, dict]] = None
    regex: Optional[str] = None
    grammar: Optional[str] = None
    json_object: bool = False
    structural_tag: Optional[str] = None

    def _validate(self):
        num_guides = 0
        for _field in fields(self):
            num_guides += bool(getattr(self, _field.name))
        if num_guides > 1:
            raise ValueError(f"Only one guide can be used for a request, but got {num_guides}.")


class Logprob(NamedTuple):
    """tensorrt_llm/executor/result.py's Logprob: a token's logprob and its rank (1 = best)."""

    logprob: float
    rank: Optional[int] = None


@dataclass(slots=True, kw_only=True)
class SamplingParams:
    """TensorRT-LLM's SamplingParams, the fields the LLM API takes (subset, same names and defaults)."""

    end_id: Optional[int] = None
    pad_id: Optional[int] = None
    max_tokens: int = 32
    stop_token_ids: Optional[list[int]] = None
    include_stop_str_in_output: bool = False
    n: int = 1
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    seed: Optional[int] = None
    temperature: Optional[float] = None
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    return_perf_metrics: bool = False
    guided_decoding: Optional[GuidedDecodingParams] = None
    detokenize: bool = True
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if self.guided_decoding is not None:
            if not isinstance(self.guided_decoding, GuidedDecodingParams):
                raise TypeError(f"guided_decoding must be GuidedDecodingParams, got {type(self.guided_decoding)}")
            self.guided_decoding._validate()


def describe(params: SamplingParams) -> dict[str, Any]:
    """What the fake logs of a request's sampling parameters."""
    guided = params.guided_decoding
    return {
        "logprobs": params.logprobs,
        "guided_decoding": None
        if guided is None
        else {f.name: getattr(guided, f.name) for f in fields(guided) if getattr(guided, f.name)},
    }
