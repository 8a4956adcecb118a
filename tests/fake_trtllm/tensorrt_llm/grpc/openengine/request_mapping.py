"""tensorrt_llm/grpc/openengine/request_mapping.py, faked: a ``GenerateRequest`` as TensorRT-LLM request inputs.

As there (NVIDIA/TensorRT-LLM ``request_mapping.py`` at ``05d4fbd5909373a61bfec2289b17055c3d485244``):

- ``sampling.*`` where set (temperature, top_p, top_k, min_p, the three penalties, seed), then the
  ``/v1/completions`` defaults for what is unset: temperature 1.0, top_p 1.0, top_k 0, and ``max_tokens`` None
  ("unbounded": the engine derives it from ``max_seq_len``); ``num_sequences`` 0 is a ValueError, > 1 is
  ``n``/``best_of``; the fields the client set are recorded (``_set_request_provided_fields``).
- ``stopping``: max/min tokens, at most 64 conditions (``stop`` texts, ``stop_token_ids``), ``ignore_eos``,
  ``include_stop_in_output`` → ``include_stop_str_in_output``.
- ``response``: a nonzero ``prompt_logprob_start`` and any candidate selection but ``top_n`` are
  ``UnsupportedFeatureError``; ``return_output_logprobs`` → ``logprobs=top_n`` (0 without a selection).
- ``extra["detokenize"]`` (a bool, else ValueError) → ``detokenize``; ``extra["conversation_id"]`` (a string,
  else ValueError) → ``ConversationParams``.
- ``guided``: a ``backend`` is ``UnsupportedFeatureError``; a guide the LLM's grammar backend does not support
  likewise (``capabilities.supported_guides``; the fake's reading of it: xgrammar takes every guide but
  ``choice``, llguidance neither ``choice`` nor ``structural_tag``, no backend none).
- Metadata: ``traceparent``/``tracestate`` are the trace headers; ``openengine-priority`` and
  ``openengine-target-dp-rank`` are ``UnsupportedFeatureError``; a repeated ``openengine-`` key or an empty
  ``openengine-routing-key`` a ValueError.
- Input: ``prompt`` as text, ``token_ids`` as ``{"prompt_token_ids": [...]}``; neither is a ValueError.

Left out: subagent affinity (``affinity.py``) and the DP-rank hint of later revisions.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ...conversation_params import ConversationParams
from ...sampling_params import GuidedDecodingParams, SamplingParams
from .bindings import generation_pb2
from .errors import UnsupportedFeatureError

_MAX_STOP_CONDITIONS = 64
_CONVERSATION_ID_EXTRA_KEY = "conversation_id"
_DETOKENIZE_EXTRA_KEY = "detokenize"
_SAMPLING_FIELDS = (
    "temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty",
    "seed",
)  # fmt: skip


def supported_guides(backend: Optional[str]) -> frozenset:
    if backend == "xgrammar":
        return frozenset({"json_schema", "regex", "ebnf_grammar", "structural_tag", "json_object"})
    if backend == "llguidance":
        return frozenset({"json_schema", "regex", "ebnf_grammar", "json_object"})
    return frozenset()


def _top_n_candidates(selection: Any, name: str) -> int:
    kind = selection.WhichOneof("selection")
    if kind is None:
        return 0
    if kind == "top_n":
        return selection.top_n
    raise UnsupportedFeatureError(f"{name} candidate selection '{kind}' is not supported; use top_n")


def _guided_decoding_from_request(
    request: Any, guided_backend: Optional[str]
) -> Optional[GuidedDecodingParams]:
    if not request.HasField("guided"):
        return None
    guided = request.guided
    if guided.backend:
        raise UnsupportedFeatureError("per-request guided decoding backend selection is not supported")
    guide = guided.WhichOneof("guide")
    if guide is None:
        return None
    if guide not in supported_guides(guided_backend):
        raise UnsupportedFeatureError(
            f"guided decoding mode '{guide}' is not supported by the "
            f"'{guided_backend or 'configured'}' grammar backend"
        )
    if guide == "json_schema":
        return GuidedDecodingParams(json=guided.json_schema)
    if guide == "regex":
        return GuidedDecodingParams(regex=guided.regex)
    if guide == "ebnf_grammar":
        return GuidedDecodingParams(grammar=guided.ebnf_grammar)
    if guide == "structural_tag":
        return GuidedDecodingParams(structural_tag=guided.structural_tag)
    return GuidedDecodingParams(json_object=True)


def sampling_params_from_request(request: Any, guided_backend: Optional[str] = None) -> SamplingParams:
    kwargs: dict[str, Any] = {}
    num_sequences = 1
    if request.HasField("sampling"):
        sampling = request.sampling
        for name in _SAMPLING_FIELDS:
            if sampling.HasField(name):
                kwargs[name] = getattr(sampling, name)
        if sampling.HasField("num_sequences"):
            if sampling.num_sequences == 0:
                raise ValueError("sampling.num_sequences must be greater than zero")
            num_sequences = sampling.num_sequences
    if request.HasField("stopping"):
        stopping = request.stopping
        if stopping.HasField("max_tokens"):
            kwargs["max_tokens"] = stopping.max_tokens
        if stopping.HasField("min_tokens"):
            kwargs["min_tokens"] = stopping.min_tokens
        if len(stopping.conditions) > _MAX_STOP_CONDITIONS:
            raise ValueError(
                f"at most {_MAX_STOP_CONDITIONS} stopping conditions are supported, "
                f"got {len(stopping.conditions)}"
            )
        stop_texts, stop_token_ids = [], []
        for condition in stopping.conditions:
            kind = condition.WhichOneof("condition")
            if kind == "stop_text":
                stop_texts.append(condition.stop_text)
            elif kind == "stop_token_id":
                stop_token_ids.append(condition.stop_token_id)
            else:
                raise ValueError("each stopping condition must set exactly one condition")
        if stop_texts:
            kwargs["stop"] = stop_texts
        if stop_token_ids:
            kwargs["stop_token_ids"] = stop_token_ids
        if stopping.HasField("ignore_eos"):
            kwargs["ignore_eos"] = stopping.ignore_eos
        if stopping.HasField("include_stop_in_output"):
            kwargs["include_stop_str_in_output"] = stopping.include_stop_in_output
    if request.HasField("response"):
        response = request.response
        if response.HasField("prompt_logprob_start") and response.prompt_logprob_start != 0:
            raise UnsupportedFeatureError("response.prompt_logprob_start is not supported")
        if response.HasField("return_prompt_logprobs") and response.return_prompt_logprobs:
            kwargs["prompt_logprobs"] = _top_n_candidates(response.prompt_candidates, "prompt")
        if response.HasField("return_output_logprobs") and response.return_output_logprobs:
            kwargs["logprobs"] = _top_n_candidates(response.output_candidates, "output")
    if (
        request.HasField("extra")
        and (detokenize := request.extra.fields.get(_DETOKENIZE_EXTRA_KEY)) is not None
    ):
        if detokenize.WhichOneof("kind") != "bool_value":
            raise ValueError(f"extra.{_DETOKENIZE_EXTRA_KEY} must be a boolean")
        kwargs["detokenize"] = detokenize.bool_value
    guided_decoding = _guided_decoding_from_request(request, guided_backend)
    if guided_decoding is not None:
        kwargs["guided_decoding"] = guided_decoding
    kwargs.setdefault("temperature", 1.0)
    kwargs.setdefault("top_p", 1.0)
    kwargs.setdefault("top_k", 0)
    kwargs.setdefault("max_tokens", None)
    if num_sequences > 1:
        kwargs["n"] = num_sequences
        kwargs["best_of"] = num_sequences
    return SamplingParams(**kwargs)


def conversation_params_from_request(request: Any) -> Optional[ConversationParams]:
    if not request.HasField("extra"):
        return None
    conversation_id = request.extra.fields.get(_CONVERSATION_ID_EXTRA_KEY)
    if conversation_id is None:
        return None
    if conversation_id.WhichOneof("kind") != "string_value":
        raise ValueError(f"extra.{_CONVERSATION_ID_EXTRA_KEY} must be a string")
    return ConversationParams(conversation_id=conversation_id.string_value)


def trace_headers_from_context(context: Any) -> Optional[Mapping[str, str]]:
    headers: dict[str, str] = {}
    openengine_keys: set[str] = set()
    for item in context.invocation_metadata() or ():
        key, value = item.key, item.value
        if key.startswith("openengine-"):
            if key in openengine_keys:
                raise ValueError(f"gRPC metadata key '{key}' must not be repeated")
            openengine_keys.add(key)
            if key == "openengine-routing-key":
                if not value:
                    raise ValueError("openengine-routing-key must be non-empty")
            elif key in ("openengine-priority", "openengine-target-dp-rank"):
                raise UnsupportedFeatureError(f"gRPC metadata key '{key}' is not supported")
        elif key in ("traceparent", "tracestate"):
            headers[key] = value
    return headers or None


def input_from_request(request: Any) -> Any:
    input_kind = request.WhichOneof("input")
    if input_kind == "prompt":
        return request.prompt
    if input_kind == "token_ids":
        return {"prompt_token_ids": list(request.token_ids.ids)}
    raise ValueError("exactly one of prompt or token_ids must be set")


__all__ = [
    "conversation_params_from_request",
    "generation_pb2",
    "input_from_request",
    "sampling_params_from_request",
    "trace_headers_from_context",
]
