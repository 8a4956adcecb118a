"""What the gRPC executor (``executor.py``) sends to TensorRT-LLM's gRPC engine and how it reads the answers:
``GenerationRequest`` → ``trtllm.GenerateRequest``, ``GenerateResponse`` → ``TokenDelta``. Pure functions over
the generated messages (``pb2``, handed in: nothing here imports protobuf or grpcio).

The messages are SMG's ``trtllm_service.proto`` (PIN.md). What TensorRT-LLM's server does with each field is
``tensorrt_llm/grpc/smg/request_manager.py`` (``create_sampling_params_from_proto``) and ``smg/servicer.py``
(``Generate``, ``_chunk_responses``, ``_complete_responses``, ``_convert_logprobs_to_proto``; before the SMG
split, ``tensorrt_llm/grpc/grpc_request_manager.py`` and ``grpc_servicer.py``);
docs/a-fleet-of-engines.md#one-remote-engine lists what is mapped and what the engine does not take.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...constraints import structural_tag
from ..base import FinishReason, GenerationRequest, SamplingSettings

__all__ = [
    "ENGINE_URL_SCHEME",
    "SmgReader",
    "Step",
    "TokenLogprobs",
    "cache_salt_id",
    "engine_target",
    "finish",
    "generate_request",
    "token_logprobs",
    "trace_metadata",
]

#: ``--engine_url grpc://HOST:PORT``: plaintext HTTP/2, as ``trtllm-serve --grpc`` listens.
ENGINE_URL_SCHEME = "grpc://"
#: The finish reasons TensorRT-LLM's ``GenerateComplete.finish_reason`` carries (``CompletionOutput.finish_reason``:
#: stop, length, cancelled; the proto's comment adds ``stop_word``, a stop sequence), as the in-process executor
#: maps them. Anything else (``error``, a reason this server does not know) ends the run failed.
_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "stop_word": "stop",
    "length": "length",
    "cancelled": "cancelled",
}
#: The sampling settings sent only where set (``SamplingConfig``'s optional fields of the same names).
_OPTIONAL_SAMPLING = ("top_k", "min_p", "seed", "frequency_penalty", "presence_penalty")


def engine_target(url: str) -> str:
    """``HOST:PORT`` of ``grpc://HOST:PORT`` (``[::1]:PORT`` for IPv6); ValueError saying what is wrong."""
    if not url.startswith(ENGINE_URL_SCHEME):
        raise ValueError(
            f"engine URL {url!r}: expected {ENGINE_URL_SCHEME}HOST:PORT (TensorRT-LLM's gRPC server, "
            "trtllm-serve MODEL --grpc, speaks plaintext gRPC)"
        )
    target = url[len(ENGINE_URL_SCHEME) :].rstrip("/")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in target:
        raise ValueError(
            f"engine URL {url!r}: expected {ENGINE_URL_SCHEME}HOST:PORT, e.g. grpc://10.0.0.7:8001"
        )
    return target


def cache_salt_id(salt: str) -> int:
    """The proto's ``int64 cache_salt_id`` of a tenant's salt: 8 bytes of BLAKE2b, as a signed 64-bit integer.

    TensorRT-LLM's own ``get_cache_salt_id`` hashes the salt to an unsigned 64-bit id (BLAKE3, a package this
    server does not depend on); the engine only compares ids (equal salts reuse each other's blocks), so any
    stable 64-bit hash keeps tenants apart the same way.
    """
    digest = hashlib.blake2b(salt.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _sampling_config(pb2: Any, settings: SamplingSettings, unapplied: Mapping[str, str]) -> Any:
    """``SamplingConfig``: ``temperature`` and ``top_p`` always (the server defaults both to 1.0 when unset, but
    the request states them as the in-process executor does); the optional ones where set and applied."""
    config = pb2.SamplingConfig(beam_width=1, num_return_sequences=1)
    config.temperature = settings.temperature
    config.top_p = settings.top_p
    for name in _OPTIONAL_SAMPLING:
        value = getattr(settings, name)
        if value is not None and name not in unapplied:  # the service refused or dropped those before
            setattr(config, name, value % 2**64 if name == "seed" else value)  # seed: uint64 on the wire
    return config


def generate_request(pb2: Any, request: GenerationRequest, *, unapplied: Mapping[str, str]) -> Any:
    """The ``GenerateRequest`` of a generation: its prompt tokens, streamed, Harmony's stop tokens, sampling,
    logprobs, the constraint as a structural tag, the tenant's cache salt.

    ``stop_token_ids`` are ``request.sampling.stop_token_ids`` (``<|return|>``, ``<|call|>``), left out of the
    output as in-process (``include_stop_token_in_output`` false: ``include_stop_str_in_output=False``). The
    protocol has no end id (``end_id`` is reserved: "resolved by TRT-LLM's _setup()", the model's own
    ``<|return|>``). Logprobs: ``OutputConfig.logprobs`` = k, at least 1, so the sampled token's own comes with
    its alternatives.
    """
    settings = request.sampling
    message = pb2.GenerateRequest(
        request_id=request.request_id,
        tokenized=pb2.TokenizedInput(input_token_ids=request.prompt_token_ids),
        sampling_config=_sampling_config(pb2, settings, unapplied),
        max_tokens=settings.max_tokens,
        streaming=True,
        stop_token_ids=settings.stop_token_ids,
    )
    if settings.logprobs is not None:
        message.output_config.logprobs = max(settings.logprobs, 1)
    if request.constraint is not None:
        message.guided_decoding.guide_type = pb2.GuidedDecodingParams.GUIDE_TYPE_STRUCTURAL_TAG
        message.guided_decoding.guide = structural_tag(request.constraint)
    if request.cache_salt is not None:
        message.cache_salt_id = cache_salt_id(request.cache_salt)
    return message


#: Per token: its logprob and the alternatives (``TokenDelta.logprobs``).
TokenLogprobs = Sequence[tuple[float, Sequence[tuple[int, float]]]]


def token_logprobs(tokens: Sequence[int], entries: Sequence[Any], top: int) -> TokenLogprobs | None:
    """Per token: its logprob and the best ``top`` alternatives, from the chunk's ``TokenLogprob`` entries.

    As the server fills them (``_convert_logprobs_to_proto``): one entry per token, ``logprob`` the sampled
    token's (``0.0`` when it was not among the engine's best k), ``top_logprobs`` the engine's best k in no
    set order. So the alternatives are sorted here, and a sampled token outside them is reported at the lowest
    of them (it is at most that), as the in-process executor reports it. None when entries are missing.
    """
    if len(entries) < len(tokens):
        return None
    out: list[tuple[float, Sequence[tuple[int, float]]]] = []
    for token, entry in zip(tokens, entries, strict=False):
        ranked = sorted(((t.token_id, float(t.logprob)) for t in entry.top_logprobs), key=lambda kv: -kv[1])
        own = float(entry.logprob)
        if ranked and all(t != token for t, _ in ranked) and own == 0.0:
            own = ranked[-1][1]
        out.append((own, ranked[:top]))
    return out


@dataclass(frozen=True, slots=True)
class Step:
    """What one response of a ``Generate`` stream says, whatever the wire: its new tokens (and their logprobs,
    when asked), the prompt tokens reused from the KV cache where it says so, and for the last one the finish
    reason (and why, for an error)."""

    tokens: Sequence[int]
    logprobs: TokenLogprobs | None = None
    cached_tokens: int | None = None
    finish: tuple[FinishReason, str | None] | None = None


class SmgReader:
    """Reads one generation's ``trtllm.GenerateResponse``s as :class:`Step`s: a ``chunk``'s new tokens; the
    ``complete``'s output tokens no chunk carried (``output_token_ids`` is cumulative) and its finish reason.
    ``top``: the logprobs asked for (None: none)."""

    #: The stream never ends without a finish here (``engine.Reader``).
    ended = False

    def __init__(self, top: int | None) -> None:
        self._top = top
        self._sent = 0

    def read(self, response: Any) -> Step | None:
        """The step of ``response`` (None: nothing in it)."""
        kind = response.WhichOneof("response")
        top = self._top
        if kind == "chunk":
            chunk = response.chunk
            tokens = list(chunk.token_ids)
            self._sent += len(tokens)
            logprobs = None if top is None else token_logprobs(tokens, chunk.logprobs, top)
            return Step(tokens, logprobs, chunk.cached_tokens)
        if kind == "complete":
            complete = response.complete
            rest = list(complete.output_token_ids[self._sent :])
            rest_logprobs: TokenLogprobs | None = None
            if top is not None:
                rest_logprobs = token_logprobs(rest, complete.logprobs[self._sent :], top) if rest else []
            return Step(rest, rest_logprobs, complete.cached_tokens, finish(complete.finish_reason))
        return None


def finish(reason: str) -> tuple[FinishReason, str | None]:
    """The run's finish reason for ``GenerateComplete.finish_reason``, and why when it is an error."""
    mapped = _FINISH.get(reason)
    if mapped is None:
        return "error", f"TensorRT-LLM ended the generation: {reason or 'no reason given'}"
    return mapped, None


def trace_metadata(request: GenerationRequest) -> tuple[tuple[str, str], ...] | None:
    """The call metadata carrying the request's W3C trace context (``traceparent``, ``tracestate``:
    ``GenerationRequest.trace_headers``), names lower-cased as gRPC wants them."""
    headers = request.trace_headers
    if not headers:
        return None
    return tuple((name.lower(), value) for name, value in headers.items())
