"""tensorrt_llm/sampling_params.py, faked: GuidedDecodingParams and SamplingParams with TensorRT-LLM's names.

GuidedDecodingParams is TensorRT-LLM's dataclass (slots, kw_only), with the same five guides
and the same ``_validate`` (at most one guide per request). SamplingParams keeps the fields
trtllm-responses uses, with TensorRT-LLM's names and defaults, keyword-only as there, its
``_validate`` range checks, and ``params_imply_greedy_decoding``: temperature, top_p and top_k
all unset (or top_k 1, top_p 0, temperature 0) is greedy decoding.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional, Union

from .executor.result import Logprob

__all__ = ["GuidedDecodingParams", "Logprob", "SamplingParams", "describe"]


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
    min_p: Optional[float] = None
    seed: Optional[int] = None
    temperature: Optional[float] = None
    frequency_penalty: Optional[float] = None
    presence_penalty: Optional[float] = None
    repetition_penalty: Optional[float] = None
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    return_perf_metrics: bool = False
    guided_decoding: Optional[GuidedDecodingParams] = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    # The fields the gRPC server's request manager may set (``create_sampling_params_from_proto``,
    # tensorrt_llm/grpc/smg/request_manager.py), with SamplingParams' names and defaults. Of these the fake
    # applies ``ignore_eos`` (``end_id`` no longer ends the request) and refuses ``n`` > 1 and beam search
    # (its result has one sequence); the rest it keeps, logged, and does not apply (its model has no logits).
    stop: Optional[Union[str, list[str]]] = None
    ignore_eos: bool = False
    min_tokens: Optional[int] = None
    bad: Optional[Union[str, list[str]]] = None
    bad_token_ids: Optional[list[int]] = None
    embedding_bias: Optional[list[float]] = None
    top_p_min: Optional[float] = None
    top_p_reset_ids: Optional[int] = None
    top_p_decay: Optional[float] = None
    use_beam_search: bool = False
    best_of: Optional[int] = None
    beam_search_diversity_rate: Optional[float] = None
    length_penalty: Optional[float] = None
    early_stopping: Optional[int] = None
    no_repeat_ngram_size: Optional[int] = None
    return_context_logits: bool = False
    return_generation_logits: bool = False
    exclude_input_from_output: bool = True

    def __post_init__(self) -> None:
        self._validate()

    def _validate(self) -> None:
        # The range checks of SamplingParams._validate.
        if self.top_p is not None and (self.top_p < 0 or self.top_p > 1):
            raise ValueError(f"require 0 <= top_p <= 1, got top_p={self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"require top_k >= 0, got top_k={self.top_k}")
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"require temperature >= 0, got temperature={self.temperature}")
        if self.n != 1 or self.use_beam_search:
            raise NotImplementedError("the fake generates one sequence a request (n=1, no beam search)")
        if self.guided_decoding is not None:
            if not isinstance(self.guided_decoding, GuidedDecodingParams):
                raise TypeError(
                    f"guided_decoding must be GuidedDecodingParams, got {type(self.guided_decoding)}"
                )
            self.guided_decoding._validate()
        # "correct types as users might pass in logprob=True for Top-1 logprobs"
        self.logprobs = self.logprobs and int(self.logprobs)

    @staticmethod
    def params_imply_greedy_decoding(
        *, temperature: Optional[float], top_p: Optional[float], top_k: Optional[int]
    ) -> bool:
        return (
            (temperature is None and top_p is None and top_k is None)
            or top_k == 1
            or top_p == 0.0
            or temperature == 0
        )

    @property
    def _greedy_decoding(self) -> bool:
        return self.params_imply_greedy_decoding(
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k
        )


def describe(params: SamplingParams) -> dict[str, Any]:
    """What the fake logs of a request's sampling parameters (every field, and whether it is greedy)."""
    out: dict[str, Any] = {}
    for f in fields(params):
        value = getattr(params, f.name)
        if f.name == "guided_decoding":
            value = (
                None
                if value is None
                else {g.name: getattr(value, g.name) for g in fields(value) if getattr(value, g.name)}
            )
        out[f.name] = value
    out["greedy"] = params._greedy_decoding
    return out
