"""Reasoning summaries: each analysis message summarized by the model itself, in a side generation.

When a request asks for ``reasoning.summary`` (``auto``, ``concise``, ``detailed``; or the
deprecated ``generate_summary``) and the server runs with ``--reasoning_summaries model`` (the
default), every reasoning item that ends whole is summarized: a short generation on the same
executor whose prompt is the summarizer instruction (:data:`SUMMARY_INSTRUCTION`, a developer
message) and the analysis text (a user message), with the assistant's ``final`` channel already
opened so the model writes only the summary (``HarmonyAdapter.side_prompt``). It is bounded:
at most :data:`SUMMARY_TOKENS` output tokens for the mode, reading at most
:data:`MAX_SUMMARIZED_CHARS` of the analysis (its head and tail when longer).

It starts the moment the analysis message ends; the main generation keeps running in the
engine meanwhile (``generation.py``: its tokens are queued, not waited for), and the summary
streams into the reasoning item (``stream/summary.py``) before that item is done. Its output
tokens count as output and reasoning tokens of the response (OpenAI counts summaries in
``reasoning_tokens``).
"""

from __future__ import annotations

import codecs
from typing import Any

from ..adapter import HarmonyAdapter
from ..core import InvalidRequestError
from ..executors import GenerationRequest, SamplingSettings
from ..ops import trace_attrs, tracing
from ..request import ResponsesRequest

__all__ = [
    "MAX_SUMMARIZED_CHARS",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_MODES",
    "SUMMARY_TOKENS",
    "Summarizer",
    "SummaryReader",
    "end_summary_span",
    "summary_cutoff",
    "summary_mode",
]

#: The developer instruction of a summary's side generation (the echo executor keys on its first words).
SUMMARY_INSTRUCTION = (
    "You are summarizing an assistant's private reasoning for the user who asked. Write a short "
    "summary of what the reasoning considered and concluded, in the third person, as a bold title "
    "line then one or two sentences. Do not answer the question yourself and do not invent details."
)
#: The modes OpenAI accepts, and the most output tokens each one's summary may take.
SUMMARY_TOKENS = {"concise": 64, "auto": 128, "detailed": 256}
SUMMARY_MODES = tuple(SUMMARY_TOKENS)
#: How much of an analysis message the summarizer reads: all of it up to this, else its head and tail.
MAX_SUMMARIZED_CHARS = 16384
#: What each mode adds to the instruction.
_MODE_HINTS = {
    "concise": " Keep it to one sentence.",
    "auto": "",
    "detailed": " You may use up to four sentences.",
}


def summary_mode(request: ResponsesRequest) -> str | None:
    """The summary mode a request asks for (None: no summary); an unknown value is a 400."""
    reasoning = request.reasoning
    if reasoning is None:
        return None
    for name in ("summary", "generate_summary"):
        value = getattr(reasoning, name)
        if value is None:
            continue
        if value not in SUMMARY_TOKENS:
            raise InvalidRequestError(
                f"Invalid value for 'reasoning.{name}': {value!r}; expected one of "
                f"{', '.join(repr(m) for m in SUMMARY_MODES)}.",
                param=f"reasoning.{name}",
                code="invalid_value",
            )
        return str(value)
    return None


#: ``stream_options.reasoning_summary_delivery`` values (Codex, openai/codex PRs #29692 and #31306) and whether
#: each cuts a running summary off once the next output item is ready: ``*_cutoff`` do (the summary never
#: delays the answer; what it had is its ``.done`` text, its part ``incomplete``), the others wait for it.
#: ``concurrent_cutoff`` is delivered as ``sequential_cutoff`` (items are never interleaved here:
#: docs/agent-clients.md#fields-and-headers-of-newer-clients). A string not listed is ignored (the default
#: delivery).
SUMMARY_DELIVERIES = {
    "sequential": False,
    "concurrent": False,
    "sequential_cutoff": True,
    "concurrent_cutoff": True,
}


def summary_cutoff(request: ResponsesRequest) -> bool:
    """Whether the request's summaries are cut off when the next item is ready (``stream_options``); a
    ``reasoning_summary_delivery`` that is not a string is a 400."""
    options = request.stream_options
    delivery = options.get("reasoning_summary_delivery") if options else None
    if delivery is None:
        return False
    if not isinstance(delivery, str):
        raise InvalidRequestError(
            "Invalid type for 'stream_options.reasoning_summary_delivery': expected a string.",
            param="stream_options.reasoning_summary_delivery",
            code="invalid_type",
        )
    return SUMMARY_DELIVERIES.get(delivery, False)


def end_summary_span(span: tracing.SpanLike, mode: str, prompt_tokens: int, tokens: int, cut: bool) -> None:
    """End a ``reasoning_summary`` span (``tracing.start_span``, current around the side generation): its
    mode, the side generation's prompt and output tokens, whether the summary was cut short."""
    if span.is_recording():
        span.set_attributes(
            {
                trace_attrs.SUMMARY_MODE: mode,
                trace_attrs.SIDE_INPUT_TOKENS: prompt_tokens,
                trace_attrs.SIDE_OUTPUT_TOKENS: tokens,
                trace_attrs.SUMMARY_CUT: cut,
            }
        )
    span.end()


def _bounded(text: str) -> str:
    if len(text) <= MAX_SUMMARIZED_CHARS:
        return text
    half = MAX_SUMMARIZED_CHARS // 2
    return f"{text[:half]}\n[…]\n{text[-half:]}"


class Summarizer:
    """Builds the side generation that summarizes one analysis message."""

    def __init__(self, adapter: HarmonyAdapter) -> None:
        self.adapter = adapter
        self.encoding = adapter.encoding

    def request(
        self, request_id: str, text: str, mode: str, max_seq_len: int, cache_salt: str | None = None
    ) -> GenerationRequest:
        """The generation summarizing ``text`` (an analysis message) in ``mode``, salted as the response it
        summarizes (``cache_salt``: its tenant's)."""
        prompt = self.adapter.side_prompt(SUMMARY_INSTRUCTION + _MODE_HINTS[mode], _bounded(text))
        budget = min(SUMMARY_TOKENS[mode], max(1, max_seq_len - len(prompt)))
        return GenerationRequest(
            request_id=request_id,
            prompt_token_ids=prompt,
            sampling=SamplingSettings(
                max_tokens=budget,
                stop_token_ids=self.adapter.stop_token_ids,
                temperature=0.0,
            ),
            cache_salt=cache_salt,
        )

    def reader(self) -> SummaryReader:
        """A reader of one side generation's tokens."""
        return SummaryReader(self.encoding.token_bytes, self.encoding.special_ids)


class SummaryReader:
    """The text of a summary, token by token: the ``final`` body up to its first control token.

    Bytes are decoded incrementally (a character split across tokens comes out whole);
    anything after a control token (``<|end|>``, ``<|return|>``, a stray ``<|start|>``) is ignored.
    """

    def __init__(self, token_bytes: Any, special_ids: frozenset[int]) -> None:
        self._bytes = token_bytes
        self._special = special_ids
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.ended = False  # a control token ended the text
        self.tokens = 0  # tokens the side generation produced

    def feed(self, tokens: Any) -> str:
        """The text ``tokens`` add."""
        self.tokens += len(tokens)
        if self.ended:
            return ""
        data = bytearray()
        for token in tokens:
            if token in self._special:
                self.ended = True
                break
            data += self._bytes[token]
        return self._decoder.decode(bytes(data))

    def flush(self) -> str:
        """What is left in the decoder (an incomplete character, as U+FFFD)."""
        return self._decoder.decode(b"", final=True)
