"""tensorrt_llm/grpc/smg/request_manager.py, faked: ``GrpcRequestManager`` and the proto → LLM API conversions.

As there (NVIDIA/TensorRT-LLM, ``tensorrt_llm/grpc/smg/request_manager.py``):

- ``GrpcRequestManager.generate`` submits ``LLM.generate_async({"prompt_token_ids": ids}, sampling_params,
  lora_request=..., prompt_adapter_request=..., streaming=..., kv_cache_retention_config=...,
  disaggregated_params=...)``, keeps the result by the request's id (for ``abort``), yields it until finished
  and forgets it; a cancelled generation aborts the request.
- ``abort(request_id)``: ``GenerationResult.abort()`` on a running request, True; False for an unknown one.
- ``health_check()``: ``(False, "Executor is not available")`` without an executor; ``(False, "Executor is
  unhealthy")`` or ``(False, "<Type>: <first line>")`` of its ``_fatal_error`` when ``check_health()`` fails;
  else ``(True, "OK")``.
- ``get_model_config()``: ``model_path`` from ``llm.args.model``, ``vocab_size`` from the tokenizer (the fake's
  LLM has none: 0), ``max_context_length`` from ``args.max_input_len`` and ``max_seq_len`` from
  ``args.max_seq_len`` where set (else 0).
- ``create_sampling_params_from_proto``: ``detokenize=False``; ``temperature`` and ``top_p`` 1.0 and
  ``repetition_penalty`` 1.0 when the request leaves them unset (so a request never decodes greedily unless it
  says so); every other field only where set; ``beam_width`` > 1 is beam search; guided decoding by guide type
  (``GUIDE_TYPE_JSON``: ``json_object``, ``JSON_SCHEMA``: ``json``, ``REGEX``, ``EBNF_GRAMMAR``: ``grammar``,
  ``STRUCTURAL_TAG``: ``structural_tag``), and none when ``guide`` is empty; an ``embedding_bias`` whose length
  is not the vocabulary's is a ValueError.
- ``create_disaggregated_params_from_proto``: ``request_type`` by name, ``ctx_request_id`` where non-empty,
  ``first_gen_tokens=[context_phase_params.first_gen_token_id]`` where non-zero; ``kv_cache_blocks`` unread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from types import SimpleNamespace
from typing import Any, Optional

from ...disaggregated_params import DisaggregatedParams
from ...sampling_params import GuidedDecodingParams, SamplingParams
from .bindings import trtllm_service_pb2 as pb2

__all__ = [
    "GrpcRequestManager",
    "create_disaggregated_params_from_proto",
    "create_lora_request_from_proto",
    "create_sampling_params_from_proto",
]


class GrpcRequestManager:
    """The requests one engine runs, by the client's request id (``GrpcRequestManager`` there)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self._rid_to_result: dict[str, Any] = {}

    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams,
        streaming: bool = True,
        lora_request: Any = None,
        prompt_adapter_request: Any = None,
        kv_cache_retention_config: Any = None,
        disaggregated_params: Optional[DisaggregatedParams] = None,
        multi_modal_data: Optional[dict[str, Any]] = None,
    ) -> AsyncGenerator[Any, None]:
        """Submit the request to the LLM and yield its result at each step until it finishes."""
        try:
            inputs: dict[str, Any] = {"prompt_token_ids": prompt_token_ids}
            if multi_modal_data:
                inputs["multi_modal_data"] = multi_modal_data
            gen_result = self.llm.generate_async(
                inputs,
                sampling_params,
                lora_request=lora_request,
                prompt_adapter_request=prompt_adapter_request,
                streaming=streaming,
                kv_cache_retention_config=kv_cache_retention_config,
                disaggregated_params=disaggregated_params,
            )
            self._rid_to_result[request_id] = gen_result
            async for result in gen_result:
                yield result
                if result.finished:
                    break
        except asyncio.CancelledError:
            await self.abort(request_id)
            raise
        finally:
            self._rid_to_result.pop(request_id, None)

    async def abort(self, request_id: str) -> bool:
        """Abort a running request: True when it was running, False when unknown (or already finished)."""
        gen_result = self._rid_to_result.get(request_id)
        if gen_result is None:
            return False
        try:
            gen_result.abort()
            return True
        except Exception:
            return False
        finally:
            self._rid_to_result.pop(request_id, None)

    async def health_check(self) -> tuple[bool, str]:
        """``(healthy, message)`` from the executor's ``check_health()`` and ``_fatal_error``."""
        try:
            if self.llm is None:
                return False, "LLM not initialized"
            if hasattr(self.llm, "_executor"):
                executor = self.llm._executor
                if executor is None:
                    return False, "Executor is not available"
                if not executor.check_health():
                    exc = executor._fatal_error
                    if exc is None:
                        return False, "Executor is unhealthy"
                    lines = str(exc).splitlines()
                    return False, f"{type(exc).__name__}: {(lines[0] if lines else type(exc).__name__)[:200]}"
            return True, "OK"
        except Exception as e:
            return False, f"Error: {e}"

    def get_model_config(self) -> dict[str, Any]:
        """What GetModelInfo reports, read off the LLM as the real manager reads it."""
        config: dict[str, Any] = {
            "model_path": "",
            "is_generation": True,
            "max_context_length": 0,
            "max_seq_len": 0,
            "vocab_size": 0,
            "supports_vision": False,
        }
        args = getattr(self.llm, "args", None)
        if args is not None:
            config["model_path"] = str(getattr(args, "model", ""))
            config["max_context_length"] = getattr(args, "max_input_len", None) or 0
            config["max_seq_len"] = getattr(args, "max_seq_len", None) or 0
        tokenizer = getattr(self.llm, "tokenizer", None)
        if tokenizer is not None:
            config["vocab_size"] = int(
                getattr(getattr(tokenizer, "tokenizer", tokenizer), "vocab_size", 0) or 0
            )
        return config

    def get_num_unfinished_requests(self) -> int:
        return len(self._rid_to_result)


#: SamplingConfig fields copied to SamplingParams under the same name where the request sets them.
_OPTIONAL_SAMPLING = (
    "top_k", "min_p", "top_p_min", "top_p_reset_ids", "top_p_decay", "seed", "min_tokens", "presence_penalty",
    "frequency_penalty", "beam_search_diversity_rate", "length_penalty", "early_stopping", "no_repeat_ngram_size",
)  # fmt: skip

#: GuidedDecodingParams.GuideType → the GuidedDecodingParams field that carries the guide.
_GUIDES = {
    pb2.GuidedDecodingParams.GUIDE_TYPE_JSON_SCHEMA: "json",
    pb2.GuidedDecodingParams.GUIDE_TYPE_REGEX: "regex",
    pb2.GuidedDecodingParams.GUIDE_TYPE_EBNF_GRAMMAR: "grammar",
    pb2.GuidedDecodingParams.GUIDE_TYPE_STRUCTURAL_TAG: "structural_tag",
}


def create_sampling_params_from_proto(
    proto_config: Any,
    output_config: Any,
    max_tokens: int,
    stop: Optional[list[str]] = None,
    stop_token_ids: Optional[list[int]] = None,
    ignore_eos: bool = False,
    bad: Optional[list[str]] = None,
    bad_token_ids: Optional[list[int]] = None,
    guided_decoding: Any = None,
    embedding_bias: Optional[Sequence[float]] = None,
    vocab_size: Optional[int] = None,
    include_stop_token_in_output: bool = False,
) -> SamplingParams:
    """The request's SamplingParams, ``detokenize=False`` (module docstring: defaults and guides)."""
    kwargs: dict[str, Any] = {"max_tokens": max_tokens, "detokenize": False}
    if proto_config.beam_width > 1:
        kwargs["use_beam_search"] = True
        kwargs["best_of"] = proto_config.beam_width
    if proto_config.num_return_sequences > 0:
        kwargs["n"] = proto_config.num_return_sequences
    kwargs["temperature"] = proto_config.temperature if proto_config.HasField("temperature") else 1.0
    kwargs["top_p"] = proto_config.top_p if proto_config.HasField("top_p") else 1.0
    kwargs["repetition_penalty"] = (
        proto_config.repetition_penalty if proto_config.HasField("repetition_penalty") else 1.0
    )
    for name in _OPTIONAL_SAMPLING:
        if proto_config.HasField(name):
            kwargs[name] = getattr(proto_config, name)
    optional = {
        "stop": stop,
        "stop_token_ids": stop_token_ids,
        "ignore_eos": ignore_eos or None,
        "include_stop_str_in_output": include_stop_token_in_output or None,
        "bad": bad,
        "bad_token_ids": bad_token_ids,
    }
    kwargs.update({name: value for name, value in optional.items() if value})
    for name in ("logprobs", "prompt_logprobs"):
        if output_config.HasField(name):
            kwargs[name] = getattr(output_config, name)
    for name in ("return_context_logits", "return_generation_logits", "exclude_input_from_output"):
        if getattr(output_config, name):
            kwargs[name] = True
    if embedding_bias:
        if vocab_size and len(embedding_bias) != vocab_size:
            raise ValueError(
                f"embedding_bias length ({len(embedding_bias)}) must match vocab_size ({vocab_size})"
            )
        kwargs["embedding_bias"] = list(embedding_bias)
    if guided_decoding is not None and guided_decoding.guide:
        if guided_decoding.guide_type == pb2.GuidedDecodingParams.GUIDE_TYPE_JSON:
            kwargs["guided_decoding"] = GuidedDecodingParams(json_object=True)
        elif guided_decoding.guide_type in _GUIDES:
            field = _GUIDES[guided_decoding.guide_type]
            kwargs["guided_decoding"] = GuidedDecodingParams(**{field: guided_decoding.guide})
    return SamplingParams(**kwargs)


def create_lora_request_from_proto(proto_config: Any) -> Any:
    """None without a LoRA task; else a ``LoRARequest(lora_name="lora_<id>", lora_int_id=<id>)`` stand-in (the
    fake's LLM refuses it: it serves no adapters)."""
    if proto_config is None or proto_config.task_id == 0:
        return None
    return SimpleNamespace(lora_name=f"lora_{proto_config.task_id}", lora_int_id=proto_config.task_id)


def create_disaggregated_params_from_proto(proto_config: Any) -> Optional[DisaggregatedParams]:
    """The request's DisaggregatedParams (module docstring), or None."""
    if proto_config is None:
        return None
    kinds = {
        pb2.DisaggregatedParams.REQUEST_TYPE_CONTEXT_AND_GENERATION: "context_and_generation",
        pb2.DisaggregatedParams.REQUEST_TYPE_CONTEXT_ONLY: "context_only",
        pb2.DisaggregatedParams.REQUEST_TYPE_GENERATION_ONLY: "generation_only",
    }
    params = DisaggregatedParams(request_type=kinds.get(proto_config.request_type, "context_and_generation"))
    if proto_config.ctx_request_id:
        params.ctx_request_id = proto_config.ctx_request_id
    if proto_config.HasField("context_phase_params"):
        if proto_config.context_phase_params.first_gen_token_id:
            params.first_gen_tokens = [proto_config.context_phase_params.first_gen_token_id]
    return params
