"""What the gRPC executor sends to a TensorRT-LLM engine over OpenEngine (``serve --grpc_protocol openengine``)
and how it reads the answers: ``GenerationRequest`` → ``openengine.v1.GenerateRequest``, ``GenerateResponse`` →
:class:`~.messages.Step`. Pure functions over the generated messages (``generation_pb2``, handed in: nothing
here imports protobuf or grpcio).

What TensorRT-LLM's adapter does with each field is ``tensorrt_llm/grpc/openengine/request_mapping.py``
(``sampling_params_from_request``, ``conversation_params_from_request``), ``servicer.py`` (``Generate``) and
``streaming.py``/``formatting.py`` (the events); tests/fake_trtllm/tensorrt_llm/grpc/openengine/ copies them.
docs/a-fleet-of-engines.md#openengine-one-engine-or-a-pool lists what is mapped and what is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...constraints import structural_tag
from ..base import ExecutorError, FinishReason, GenerationRequest, SamplingSettings
from .messages import Step, TokenLogprobs

__all__ = [
    "EngineFailed",
    "OpenEngineReader",
    "finish",
    "generate_request",
    "token_logprobs",
]

#: The sampling settings sent only where set (``SamplingParams``' optional fields of the same names).
_OPTIONAL_SAMPLING = ("top_k", "min_p", "seed", "frequency_penalty", "presence_penalty")
#: ``FinishReason`` (generation.proto) by number: UNSPECIFIED, STOP, LENGTH, CANCELLED.
_FINISH: dict[int, FinishReason] = {1: "stop", 2: "length", 3: "cancelled"}
#: ``ErrorCode``s that are the request's own fault, as the gRPC status the executor's retry reads
#: (``executor._REQUEST_FAULTS``); every other code is the engine's.
_REQUEST_FAULT_CODES = {
    "ERROR_CODE_INVALID_ARGUMENT": "INVALID_ARGUMENT",
    "ERROR_CODE_UNSUPPORTED_FEATURE": "UNIMPLEMENTED",
    "ERROR_CODE_MODEL_NOT_FOUND": "FAILED_PRECONDITION",
    "ERROR_CODE_ROLE_MISMATCH": "FAILED_PRECONDITION",
}


class EngineFailed(ExecutorError):
    """The engine ended a generation it had accepted with an ``EngineError`` event. ``status``: the gRPC status
    name the executor's retry reads (a request's own fault, or the engine's)."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


def generate_request(
    pb2: Any, request: GenerationRequest, *, model: str, unapplied: Mapping[str, str]
) -> Any:
    """The ``GenerateRequest`` of a generation (``pb2``: ``generation_pb2``): its prompt tokens, sampling,
    Harmony's stop tokens left out of the output, ``max_tokens``, logprobs, the constraint as a structural tag,
    the tenant's cache salt, and in ``extra`` the session key as ``conversation_id`` and ``detokenize`` false.

    ``model`` must be non-empty (the servicer refuses an empty one; it serves any name). Logprobs:
    ``return_output_logprobs`` with the best ``max(k, 1)`` candidates by rank, so the sampled token's own comes
    with its alternatives.
    """
    settings = request.sampling
    message = pb2.GenerateRequest(
        request_id=request.request_id,
        model=model,
        token_ids=pb2.TokenIds(ids=request.prompt_token_ids),
        sampling=_sampling(pb2, settings, unapplied),
        stopping=pb2.StoppingOptions(
            max_tokens=settings.max_tokens,
            include_stop_in_output=False,
            conditions=[pb2.StopCondition(stop_token_id=t) for t in settings.stop_token_ids],
        ),
    )
    if settings.logprobs is not None:
        message.response.return_output_logprobs = True
        message.response.output_candidates.top_n = max(settings.logprobs, 1)
    if request.constraint is not None:
        message.guided.structural_tag = structural_tag(request.constraint)
    if request.cache_salt is not None:
        message.kv.cache_salt = request.cache_salt
    extra: dict[str, Any] = {"detokenize": False}
    if request.session_key is not None:
        extra["conversation_id"] = request.session_key
    message.extra.update(extra)
    return message


def _sampling(pb2: Any, settings: SamplingSettings, unapplied: Mapping[str, str]) -> Any:
    """``SamplingParams``: ``temperature`` and ``top_p`` always (unset, the adapter takes 1.0 for both), the
    optional ones where set and applied by the engine's release."""
    sampling = pb2.SamplingParams(temperature=settings.temperature, top_p=settings.top_p)
    for name in _OPTIONAL_SAMPLING:
        value = getattr(settings, name)
        if value is not None and name not in unapplied:
            setattr(sampling, name, value % 2**64 if name == "seed" else value)  # seed: uint64 on the wire
    return sampling


def token_logprobs(infos: Sequence[Any], top: int) -> TokenLogprobs | None:
    """Per token of a ``TokenOutput``: its logprob and the best ``top`` candidates (by ``rank``).

    TensorRT-LLM's ``_token_infos`` sets the sampled token's own ``logprob`` even when it is outside the best n;
    a token without one (the first of a generation-only leg: the context worker did not hand it over) is
    reported as its candidate entry, else at the lowest candidate. None when a token has neither.
    """
    out: list[tuple[float, Sequence[tuple[int, float]]]] = []
    for info in infos:
        ranked = [
            (c.token_id, float(c.logprob))
            for c in sorted(info.candidates, key=lambda c: c.rank if c.HasField("rank") else 1 << 32)
        ]
        if info.HasField("logprob"):
            own = float(info.logprob)
        else:
            mine = [lp for t, lp in ranked if t == info.token_id]
            if not mine and not ranked:
                return None
            own = mine[0] if mine else ranked[-1][1]
        out.append((own, ranked[:top]))
    return out


def finish(finished: Any) -> tuple[FinishReason, str | None]:
    """The run's finish reason for a ``GenerationFinished``, and why when it is an error."""
    mapped = _FINISH.get(finished.reason)
    if mapped is None:
        return "error", f"TensorRT-LLM ended the generation: {finished.message or 'no reason given'}"
    return mapped, None


class OpenEngineReader:
    """Reads one generation's ``openengine.v1.GenerateResponse``s as steps: a ``token`` event's tokens (and
    logprobs, ``top`` asked for); ``finished`` ends it, with the usage's ``cached_prompt_tokens``; an ``error``
    event raises :class:`EngineFailed`; a ``PrefillReady`` (the answer to a context-only request, never sent
    here by this reader's caller) raises ExecutorError. ``url``: the engine's, for the messages. ``cached``: the
    cached tokens to report instead of the engine's (a disaggregated turn's are its prefill engine's).
    ``first``: the logprobs of the stream's first token where the engine sends none (a generation leg's first
    token is the context leg's: TensorRT-LLM's ``_logprob_shortfall``)."""

    #: The stream never ends without a finish here (``engine.Reader``).
    ended = False

    def __init__(
        self, url: str, top: int | None, *, cached: int | None = None, first: TokenLogprobs | None = None
    ) -> None:
        self._url = url
        self._top = top
        self._cached = cached
        self._first = first

    def read(self, response: Any) -> Step | None:
        """The step of ``response`` (None: nothing in it)."""
        kind = response.WhichOneof("event")
        if kind == "token":
            infos = response.token.tokens
            tokens = [t.token_id for t in infos]
            if self._top is None:
                return Step(tokens)
            first, self._first = self._first, None
            if first and infos and not infos[0].HasField("logprob"):
                rest = token_logprobs(infos[1:], self._top)
                return Step(tokens, None if rest is None else [*first[:1], *rest])
            return Step(tokens, token_logprobs(infos, self._top))
        if kind == "finished":
            return Step(
                [], [] if self._top is not None else None, self.cached(response), finish(response.finished)
            )
        if kind == "error":
            raise engine_failed(self._url, response.error)
        if kind == "prefill_ready":
            raise ExecutorError(
                f"the engine at {self._url} answered a hand-off (PrefillReady) to a whole turn"
            )
        return None  # prompt logprobs: never asked for

    def cached(self, response: Any) -> int | None:
        """The prompt tokens reused, from a final response's usage (or as told at start)."""
        if self._cached is not None:
            return self._cached
        usage = response.usage
        return usage.cached_prompt_tokens if usage.HasField("cached_prompt_tokens") else None


def engine_failed(url: str, error: Any) -> EngineFailed:
    """The :class:`EngineFailed` of an ``EngineError`` event."""
    code = type(error).DESCRIPTOR.fields_by_name["code"].enum_type.values_by_number.get(error.code)
    name = code.name if code is not None else str(error.code)
    retry = " (retryable)" if error.retryable else ""
    return EngineFailed(
        f"the TensorRT-LLM engine at {url} failed the generation: {name}{retry}: {error.message or 'no message'}",
        _REQUEST_FAULT_CODES.get(name, name),
    )
