"""Logprobs on output text: a TokenStreamProcessor for responses that asked for them.

Only requests with ``top_logprobs`` or ``include: ["message.output_text.logprobs"]`` use
:class:`LogprobStreamProcessor`; every other response keeps the plain processor, so the
per-token path costs nothing more when logprobs are not requested.

The executor reports, for each generated token, its logprob and the best alternatives
(``TokenDelta.logprobs``). Tokens are fed one at a time; a token's logprob goes on the
``output_text`` delta its text appears in (a character split over several tokens waits
for its last token; header and terminator tokens carry none). ``output_text.done``, the
``content_part.done`` part and the final message's content carry the whole list, with
``bytes`` and ``top_logprobs`` as the SDK's ``ResponseOutputText.Logprob`` has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openai.types.responses import (
    ResponseContentPartDoneEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from openai.types.responses import response_output_text as output_text
from openai.types.responses import response_text_delta_event as delta_types
from openai.types.responses import response_text_done_event as done_types

from ..executors import TokenDelta
from ..harmony import HarmonyEncoding
from ..stream import ResponseStream, RunControl, TokenStreamProcessor

__all__ = ["LogprobStreamProcessor"]


class _LoggedTextDelta(ResponseTextDeltaEvent):
    """A text delta with logprobs: written by the SDK model's serializer (the SSE fast path frames empty ones)."""


class LogprobStreamProcessor(TokenStreamProcessor):
    """A TokenStreamProcessor that puts each token's logprob on the output text it produced."""

    def __init__(
        self,
        stream: ResponseStream,
        encoding: HarmonyEncoding,
        prompt_tokens: int,
        top_logprobs: int,
        control: RunControl | None = None,
    ) -> None:
        super().__init__(stream, encoding, prompt_tokens, control)
        self._encoding = encoding
        self._top = top_logprobs
        self._pending: list[output_text.Logprob] = []
        self._message: list[output_text.Logprob] = []
        self._tokens: dict[int, tuple[str, list[int]]] = {}

    def _token(self, token: int) -> tuple[str, list[int]]:
        """A token's text and bytes, made once per response and shared by every logprob naming it
        (each is read, never changed): the alternatives of 20 top logprobs repeat across tokens."""
        known = self._tokens.get(token)
        if known is None:
            raw = self._encoding.token_bytes[token]
            known = self._tokens[token] = (raw.decode("utf-8", "replace"), list(raw))
        return known

    def _logprob(self, token: int, value: tuple[float, Sequence[tuple[int, float]]]) -> output_text.Logprob:
        logprob, top = value
        text, raw = self._token(token)
        alternatives = []
        for t, lp in list(top)[: self._top]:
            alt_text, alt_raw = self._token(t)
            alternatives.append(
                output_text.LogprobTopLogprob.model_construct(token=alt_text, bytes=alt_raw, logprob=lp)
            )
        return output_text.Logprob.model_construct(
            token=text, bytes=raw, logprob=logprob, top_logprobs=alternatives
        )

    def process(self, delta: TokenDelta) -> list[ResponseStreamEvent]:
        """Events for one engine step, the step's tokens fed one by one so each logprob finds its text."""
        values = delta.logprobs
        tokens = delta.token_ids
        if values is None or len(values) != len(tokens) or not tokens:
            # A step without tokens (the last one, its stop token trimmed) still ends the message: its
            # done events carry the logprobs gathered so far.
            return self._attach(super().process(delta))
        events: list[ResponseStreamEvent] = []
        last = len(tokens) - 1
        for i, token in enumerate(tokens):
            if self.done:
                break
            if self.paused:  # a reasoning item waits for its summary: the rest of the step waits too
                self.requeued.append(
                    TokenDelta(tokens[i:], delta.finish_reason, delta.error, delta.cached_tokens, values[i:])
                )
                break
            single = TokenDelta(
                (token,),
                delta.finish_reason if i == last else None,
                delta.error if i == last else None,
                delta.cached_tokens,
            )
            self._pending.append(self._logprob(token, values[i]))
            events += self._attach(super().process(single))
        return events

    def _attach(self, events: list[ResponseStreamEvent]) -> list[ResponseStreamEvent]:
        event: Any
        for event in events:
            kind = type(event)
            if kind is ResponseTextDeltaEvent:
                logprobs = self._pending
                self._pending = []
                self._message += logprobs
                object.__setattr__(event, "__class__", _LoggedTextDelta)
                event.__dict__["logprobs"] = [
                    _as(delta_types.Logprob, delta_types.LogprobTopLogprob, lp) for lp in logprobs
                ]
            elif kind is ResponseOutputItemAddedEvent:
                self._pending = []
                self._message = []
            elif kind is ResponseTextDoneEvent:
                event.__dict__["logprobs"] = [
                    _as(done_types.Logprob, done_types.LogprobTopLogprob, lp) for lp in self._message
                ]
            elif kind is ResponseContentPartDoneEvent:
                part: Any = event.part
                if part.type == "output_text":
                    part.__dict__["logprobs"] = list(self._message)
            elif kind is ResponseOutputItemDoneEvent and isinstance(event.item, ResponseOutputMessage):
                for content in event.item.content:
                    if content.type == "output_text":
                        content.__dict__["logprobs"] = list(self._message)
                self._pending = []
                self._message = []
            elif kind is not _LoggedTextDelta:
                if getattr(event, "delta", None) is not None:  # reasoning or call text: no logprobs
                    self._pending = []
        return events


def _as(logprob_type: Any, top_type: Any, lp: output_text.Logprob) -> Any:
    """A Logprob of the output text as the delta/done events' own Logprob type (bytes kept as an extra)."""
    return logprob_type(
        token=lp.token,
        logprob=lp.logprob,
        bytes=lp.bytes,
        top_logprobs=[top_type(token=t.token, logprob=t.logprob, bytes=t.bytes) for t in lp.top_logprobs],
    )
