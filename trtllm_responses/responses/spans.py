"""The spans of a response's life: prepare's stages, the run (``response``), each generation (``chat``).

docs/tracing-and-dashboards.md#spans. A ``chat {model}`` span (kind client, the GenAI conventions'
inference span) covers one executor request: from its submission to its last delta, with the request's
sampling, an event ``gen_ai.first_token`` (and ``gen_ai.response.time_to_first_chunk``) when its first
delta came, and when it ended its finish reason and its own usage. Every function here builds its
names and attributes only when tracing is on; off, each returns the shared no-op at once. Text goes on a
span only when the operator opted in (``span_content.py``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..core import to_dict
from ..executors import GenerationRequest
from ..ops import trace_attrs, tracing
from .span_content import bounded_json, input_messages, output_messages, system_instructions

if TYPE_CHECKING:
    from openai.types.responses import ResponseUsage

    from ..adapter import Prompt
    from ..request import SessionIdentity
    from ..stream import TokenStreamProcessor
    from .prepared import PreparedResponse

__all__ = [
    "ChatSpan",
    "chat_span",
    "finish_reason",
    "prepared_attributes",
    "response_attributes",
    "stage",
    "usage_attributes",
]


def stage(name: str) -> AbstractContextManager[tracing.SpanLike]:
    """The span of prepare's stage ``name`` (``prepare.<name>``, ``trtllm.stage``), current inside the
    ``with``, a child of ``prepare``'s."""
    if not tracing.enabled():
        return tracing.span("")
    return tracing.span("prepare." + name, {trace_attrs.STAGE: name})


def prepared_attributes(
    response_id: str, prompt: Prompt, session: SessionIdentity, conversation: str | None
) -> dict[str, tracing.AttributeValue]:
    """What ``prepare``'s span says of the response it prepared (ids and counts, never text)."""
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.RESPONSE_ID: response_id,
        trace_attrs.PROMPT_TOKENS: len(prompt.token_ids),
    }
    if session.key is not None:
        attributes[trace_attrs.SESSION_ID] = session.key
    if conversation is not None:
        attributes[trace_attrs.CONVERSATION_ID] = conversation
    return attributes


def response_attributes(prepared: PreparedResponse, background: bool) -> dict[str, tracing.AttributeValue]:
    """The ``response`` span's attributes at its start."""
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.RESPONSE_ID: prepared.response.id,
        trace_attrs.REQUEST_MODEL: prepared.response.model,
        trace_attrs.BACKGROUND: background,
    }
    if prepared.session_key is not None:
        attributes[trace_attrs.SESSION_ID] = prepared.session_key
    if prepared.conversation_id is not None:
        attributes[trace_attrs.CONVERSATION_ID] = prepared.conversation_id
    return attributes


def _counts(usage: ResponseUsage) -> tuple[int, int, int, int]:
    """Input, output, cached input and reasoning tokens of ``usage``."""
    cached = usage.input_tokens_details.cached_tokens if usage.input_tokens_details else 0
    reasoning = usage.output_tokens_details.reasoning_tokens if usage.output_tokens_details else 0
    return usage.input_tokens, usage.output_tokens, cached, reasoning


def _usage(input_tokens: int, output: int, cached: int, reasoning: int) -> dict[str, tracing.AttributeValue]:
    return {
        trace_attrs.INPUT_TOKENS: input_tokens,
        trace_attrs.OUTPUT_TOKENS: output,
        trace_attrs.CACHED_TOKENS: cached,
        trace_attrs.REASONING_TOKENS: reasoning,
    }


def usage_attributes(usage: ResponseUsage) -> dict[str, tracing.AttributeValue]:
    """A usage object as the GenAI conventions' ``gen_ai.usage.*``."""
    return _usage(*_counts(usage))


def _request_attributes(
    prepared: PreparedResponse, generation: GenerationRequest
) -> dict[str, tracing.AttributeValue]:
    sampling = generation.sampling
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.OPERATION: "chat",
        trace_attrs.PROVIDER: trace_attrs.PROVIDER_NAME,
        trace_attrs.REQUEST_MODEL: prepared.response.model,
        trace_attrs.RESPONSE_ID: prepared.response.id,
        trace_attrs.EXECUTOR_REQUEST_ID: generation.request_id,
        trace_attrs.REQUEST_MAX_TOKENS: sampling.max_tokens,
        trace_attrs.REQUEST_TEMPERATURE: sampling.temperature,
        trace_attrs.REQUEST_TOP_P: sampling.top_p,
        trace_attrs.REQUEST_STREAM: bool(prepared.request.stream),
    }
    if sampling.seed is not None:
        attributes[trace_attrs.REQUEST_SEED] = sampling.seed
    if prepared.session_key is not None:
        attributes[trace_attrs.SESSION_ID] = prepared.session_key
    if tracing.capture_content():
        request = prepared.request
        items = request.input if isinstance(request.input, str) else [i.data for i in request.input]
        attributes[trace_attrs.INPUT_MESSAGES_CONTENT] = bounded_json(input_messages(items))
        if request.instructions:
            attributes[trace_attrs.SYSTEM_INSTRUCTIONS_CONTENT] = bounded_json(
                system_instructions(request.instructions)
            )
    return attributes


def finish_reason(processor: TokenStreamProcessor) -> str:
    """Why a generation ended, in the GenAI conventions' words: ``tool_call`` (a server-run call held, or a
    call for the client), ``length``, ``stop``, ``error``, ``cancelled``."""
    if processor.awaiting_tool:
        return "tool_call"
    stream = processor.stream
    final = stream.final_response
    if final is None:
        return "cancelled"
    if final.status == "completed":
        return "tool_call" if stream.called else "stop"
    if final.status == "incomplete":
        details = final.incomplete_details
        return "length" if details is not None and details.reason == "max_output_tokens" else "stop"
    return "error" if final.status == "failed" else str(final.status)


def chat_span(
    prepared: PreparedResponse, generation: GenerationRequest
) -> AbstractContextManager[tracing.SpanLike]:
    """The ``chat {model}`` span of one executor request (kind client), current inside the ``with``."""
    if not tracing.enabled():
        return tracing.span("")
    name = "chat " + prepared.response.model
    return tracing.span(name, _request_attributes(prepared, generation), kind="client")


class ChatSpan:
    """What one generation's ``chat`` span notes while it runs: its first delta (:meth:`first_delta`, once)
    and, at its end (:meth:`close`), its finish reason and the usage of this generation alone."""

    __slots__ = ("live", "_submitted", "_before")

    def __init__(self, live: tracing.SpanLike, processor: TokenStreamProcessor) -> None:
        self.live = live
        self._submitted = time.perf_counter()
        # the response's usage and output items when this generation started (its own are what it adds)
        self._before = (processor.usage(), len(processor.stream.output)) if live.is_recording() else None

    def traced(self, generation: GenerationRequest) -> GenerationRequest:
        """``generation`` carrying this span's W3C context (``trace_headers``) to the engine."""
        headers = tracing.inject(self.live)
        return dataclasses.replace(generation, trace_headers=headers) if headers else generation

    def first_delta(self) -> None:
        """The executor's first delta of this generation came (called once, where the run notes it)."""
        live = self.live
        live.add_event("gen_ai.first_token")
        live.set_attribute(trace_attrs.TIME_TO_FIRST_CHUNK, time.perf_counter() - self._submitted)

    def close(self, processor: TokenStreamProcessor, prompt_tokens: int) -> None:
        """The generation ended: its finish reason, its own usage (its prompt, what the response's usage grew
        by), its output when the operator opted in."""
        live, before = self.live, self._before
        if before is None or not live.is_recording():
            return
        reason = finish_reason(processor)
        usage, items = before
        _, output, cached, reasoning = _counts(usage)
        _, output_now, cached_now, reasoning_now = _counts(processor.usage())
        own = _usage(prompt_tokens, output_now - output, cached_now - cached, reasoning_now - reasoning)
        live.set_attributes({trace_attrs.FINISH_REASONS: (reason,), **own})
        if reason == "error":
            tracing.fail(live, "the generation failed", error_type="generation_failed")
        if tracing.capture_content():
            written = [_as_json(item) for item in processor.stream.output[items:]]
            live.set_attribute(
                trace_attrs.OUTPUT_MESSAGES_CONTENT, bounded_json(output_messages(written, reason))
            )


def _as_json(item: Any) -> Mapping[str, Any]:
    return to_dict(item, logprobs=False)  # type: ignore[no-any-return]
