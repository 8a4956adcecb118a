"""tensorrt_llm/grpc/openengine/streaming.py, faked: one engine result as OpenEngine events, and the servicer's
table of active requests.

As there (NVIDIA/TensorRT-LLM ``streaming.py`` at ``45e807d7f0cba48f57aa4db45c1ac6ba030aab66``, ``_format_result``
and ``ActiveRequest``):

- a result with an error: one ``EngineError``;
- per output, a ``token`` event with the tokens new since the last (their logprobs, head-padded by the
  shortfall), none when a step adds none;
- a context-only request: once its output carries ``disaggregated_params`` with a ``ctx_request_id``, one
  ``PrefillReady`` (``disagg.prefill_ready_response``, with the usage); its ``finished`` is then never sent (the
  ``PrefillReady`` is the terminal event), nor a non-terminal finish reason; a context request that ends without
  a hand-off (cancelled before it) gets its real ``finished``;
- ``finished`` once per output, the last with the usage.

Left out: the 30 s ``StallWatchdog`` (a client that stops reading), prompt logprobs, text and stop-text holdback
(the fake has no tokenizer), the worker-process formatting.
"""

from dataclasses import dataclass, field
from typing import Any

from .bindings import generation_pb2
from .disagg import prefill_ready_response
from .formatting import (
    _TERMINAL_FINISH_REASONS,
    _delta_logprobs,
    _engine_error_response,
    _finish_event,
    _logprob_shortfall,
    _token_infos,
    _usage,
)


@dataclass(kw_only=True)
class _OpenEngineFormatState:
    request_id: str = ""
    sampling_params: Any = None
    is_context_only: bool = False
    kv_transfer_backend: str = ""
    sent_token_counts: dict = field(default_factory=dict)
    logprob_shortfalls: dict = field(default_factory=dict)
    finished_indices: set = field(default_factory=set)
    prefill_ready_sent: set = field(default_factory=set)


def _format_result(result: Any, args: _OpenEngineFormatState) -> list[Any]:
    request_id = args.request_id
    sampling_params = args.sampling_params
    responses: list[Any] = []
    error = getattr(result, "error", None)
    if error:
        responses.append(_engine_error_response(request_id, str(error), result))
        return responses
    newly_finished = []
    for output in result.outputs:
        token_ids = output.token_ids or []
        sent = min(args.sent_token_counts.get(output.index, 0), len(token_ids))
        delta = token_ids[sent:]
        if delta:
            shortfall = args.logprob_shortfalls.get(output.index)
            if shortfall is None:
                shortfall = _logprob_shortfall(output)
                if output.logprobs:
                    args.logprob_shortfalls[output.index] = shortfall
            infos = _token_infos(
                delta, _delta_logprobs(output, sent, shortfall), sampling_params.logprobs or 0
            )
            responses.append(
                generation_pb2.GenerateResponse(
                    request_id=request_id,
                    token=generation_pb2.TokenOutput(output_index=output.index, tokens=infos, text=""),
                )
            )
        args.sent_token_counts[output.index] = len(token_ids)
        if args.is_context_only and output.index not in args.prefill_ready_sent:
            out_disagg = getattr(output, "disaggregated_params", None)
            if out_disagg is not None and out_disagg.ctx_request_id is not None:
                args.prefill_ready_sent.add(output.index)
                responses.append(
                    prefill_ready_response(
                        request_id, out_disagg, args.kv_transfer_backend, usage=_usage(result)
                    )
                )
        handoff_pending = (
            args.is_context_only
            and output.finish_reason is not None
            and output.index not in args.prefill_ready_sent
            and not result.finished
        )
        if output.finish_reason and output.index not in args.finished_indices and not handoff_pending:
            args.finished_indices.add(output.index)
            newly_finished.append(output)
    for index, output in enumerate(newly_finished):
        if args.is_context_only and (
            output.index in args.prefill_ready_sent or output.finish_reason not in _TERMINAL_FINISH_REASONS
        ):
            continue
        is_final = len(args.finished_indices) == sampling_params.n and index == len(newly_finished) - 1
        kwargs: dict[str, Any] = {
            "request_id": request_id,
            "finished": _finish_event(output, sampling_params.end_id),
        }
        if is_final:
            kwargs["usage"] = _usage(result)
        responses.append(generation_pb2.GenerateResponse(**kwargs))
    return responses


class ActiveRequest:
    """One request's entry in the servicer's table of in-flight requests (registered while its stream runs)."""

    def __init__(self, table: dict, request_id: str, handle: Any) -> None:
        self._table = table
        self._request_id = request_id
        self._handle = handle

    def register(self) -> bool:
        if self._request_id in self._table:
            return False
        self._table[self._request_id] = self._handle
        return True

    def release(self) -> None:
        if self._table.get(self._request_id) is self._handle:
            del self._table[self._request_id]
