"""tensorrt_llm/grpc/openengine/formatting.py, faked: engine results as OpenEngine messages.

As there (NVIDIA/TensorRT-LLM ``formatting.py`` at ``385d11ab2dfc53a4ef7cb0a3c2a4dd07afd62a7b``):

- ``_token_infos``: without logprobs one ``TokenInfo(token_id)`` a token; with them the sampled token's own
  ``logprob`` and ``rank`` where its top-k dict has it (clamped at -9999), and the candidates of rank <= the
  request's ``logprobs``, sorted by rank. The token strings come from ``tokenizer.decode``; the fake LLM has no
  tokenizer, so they are empty.
- ``_logprob_shortfall``/``_delta_logprobs``: the leading tokens without a logprob (a generation-only leg is
  one short) are head-padded with None.
- ``_finish_event``: 'stop' → STOP (``stop_match.stop_token_id`` for an int ``stop_reason``, ``stop_text`` for
  a string one, else ``eos_token_id=end_id``), 'length' → LENGTH, 'cancelled' and 'timeout' → CANCELLED
  ('timeout' with "generation timed out"), anything else UNSPECIFIED.
- ``_usage``: prompt and completion counts, ``cached_prompt_tokens = result.cached_tokens``.
- ``_engine_error_response``: an ``EngineError`` (``INTERNAL`` unless told, ``retryable`` False unless told)
  with the usage.

Left out: prompt logprobs (``_prompt_output``; the fake LLM computes none) and stop-text holdback
(``_StopPrefixTracker``, ``_token_holdback``: the fake has no tokenizer, so no text and no stop words).
"""

from typing import Any, Optional

from .bindings import error_pb2, generation_pb2

_MIN_LOGPROB = -9999.0
_TERMINAL_FINISH_REASONS = frozenset({"stop", "length", "cancelled", "timeout"})


def clamp_logprob(value: Any) -> float:
    return max(float(value), _MIN_LOGPROB)


def _token_infos(token_ids: list[int], logprobs: Any = (), candidate_limit: int = 0) -> list[Any]:
    if not logprobs:
        return [generation_pb2.TokenInfo(token_id=token_id) for token_id in token_ids]
    infos = []
    for index, token_id in enumerate(token_ids):
        entry = logprobs[index] if index < len(logprobs) else None
        kwargs: dict[str, Any] = {"token_id": token_id, "token": ""}
        if isinstance(entry, (int, float)):
            kwargs["logprob"] = clamp_logprob(entry)
        elif isinstance(entry, dict):
            sampled = entry.get(token_id)
            if sampled is not None:
                kwargs["logprob"] = clamp_logprob(sampled.logprob)
                if sampled.rank is not None:
                    kwargs["rank"] = sampled.rank
            candidates = []
            if candidate_limit > 0:
                ranked = sorted(
                    (
                        (tid, c)
                        for tid, c in entry.items()
                        if c.rank is not None and c.rank <= candidate_limit
                    ),
                    key=lambda item: item[1].rank,
                )
                for tid, candidate in ranked:
                    candidates.append(
                        generation_pb2.LogProb(
                            token_id=tid,
                            logprob=clamp_logprob(candidate.logprob),
                            token="",
                            rank=candidate.rank,
                        )
                    )
            kwargs["candidates"] = candidates
        infos.append(generation_pb2.TokenInfo(**kwargs))
    return infos


def _logprob_shortfall(output: Any) -> int:
    logprobs = output.logprobs or []
    if not logprobs:
        return 0
    return max(0, len(output.token_ids or []) - len(logprobs))


def _delta_logprobs(output: Any, sent_token_count: int, shortfall: int) -> Any:
    logprobs = output.logprobs or []
    if not shortfall:
        return logprobs[sent_token_count:]
    if sent_token_count >= shortfall:
        return logprobs[sent_token_count - shortfall :]
    return [None] * (shortfall - sent_token_count) + list(logprobs)


def _finish_event(output: Any, end_id: Optional[int]) -> Any:
    reason_map = {
        "stop": generation_pb2.FINISH_REASON_STOP,
        "length": generation_pb2.FINISH_REASON_LENGTH,
        "cancelled": generation_pb2.FINISH_REASON_CANCELLED,
        "timeout": generation_pb2.FINISH_REASON_CANCELLED,
    }
    kwargs: dict[str, Any] = {
        "output_index": output.index,
        "reason": reason_map.get(output.finish_reason, generation_pb2.FINISH_REASON_UNSPECIFIED),
    }
    if output.finish_reason == "timeout":
        kwargs["message"] = "generation timed out"
    if output.finish_reason == "stop":
        if isinstance(output.stop_reason, int):
            kwargs["stop_match"] = generation_pb2.StopMatch(stop_token_id=output.stop_reason)
        elif isinstance(output.stop_reason, str):
            kwargs["stop_match"] = generation_pb2.StopMatch(stop_text=output.stop_reason)
        elif end_id is not None:
            kwargs["stop_match"] = generation_pb2.StopMatch(eos_token_id=end_id)
    return generation_pb2.GenerationFinished(**kwargs)


def _usage(result: Any) -> Any:
    prompt_tokens = len(result.prompt_token_ids or ())
    completion_tokens = sum(len(output.token_ids or []) for output in (result.outputs or ()))
    return generation_pb2.Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        cached_prompt_tokens=result.cached_tokens,
    )


def _engine_error_response(
    request_id: str,
    message: str,
    result: Any,
    *,
    code: int = error_pb2.ERROR_CODE_INTERNAL,
    retryable: bool = False,
) -> Any:
    return generation_pb2.GenerateResponse(
        request_id=request_id,
        error=error_pb2.EngineError(code=code, message=message, retryable=retryable),
        usage=_usage(result),
    )
