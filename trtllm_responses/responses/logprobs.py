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

Each token's logprob is written as JSON once, when the token arrives, and held so
(:class:`~trtllm_responses.core.wire.LogprobsJSON`): the delta event carries its tokens' JSON, the done
events, the content part, the message and the final response share the message's. A message at the
cap of ``n × (top_logprobs + 1) × tokens`` (262,080 entries) is ~17 MiB of JSON in 12,480 bytes
objects, not ~6 million Python objects built, collected and freed on the event loop (issue 30).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from openai.types.responses import (
    ResponseContentPartDoneEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

from ..core import LogprobsJSON
from ..executors import TokenDelta
from ..harmony import HarmonyEncoding
from ..stream import ResponseStream, RunControl, TokenStreamProcessor

__all__ = ["LogprobStreamProcessor"]


class _LoggedTextDelta(ResponseTextDeltaEvent):
    """A text delta with logprobs: written by ``wire.to_json`` (the SSE fast path frames empty ones)."""


class LogprobStreamProcessor(TokenStreamProcessor):
    """A TokenStreamProcessor that puts each token's logprob on the output text it produced."""

    def __init__(
        self,
        stream: ResponseStream,
        encoding: HarmonyEncoding,
        prompt_tokens: int,
        top_logprobs: int,
        control: RunControl | None = None,
        parallel_calls: bool = True,
    ) -> None:
        super().__init__(stream, encoding, prompt_tokens, control, parallel_calls)
        self._encoding = encoding
        self._top = top_logprobs
        self._pending: list[bytes] = []  # the JSON of each token's logprob not yet on a delta
        self._message = LogprobsJSON()
        self._tokens: dict[int, bytes] = {}

    def _token(self, token: int) -> bytes:
        """A token's ``{"token":…,"bytes":[…],"logprob":`` (without its value), written once per response:
        the alternatives of 20 top logprobs repeat across tokens."""
        known = self._tokens.get(token)
        if known is None:
            raw = self._encoding.token_bytes[token]
            known = self._tokens[token] = (
                b'{"token":'
                + orjson.dumps(raw.decode("utf-8", "replace"))
                + b',"bytes":'
                + orjson.dumps(list(raw))
                + b',"logprob":'
            )
        return known

    def _logprob(self, token: int, value: tuple[float, Sequence[tuple[int, float]]]) -> bytes:
        """One token's logprob as JSON (``ResponseOutputText.Logprob``: token, bytes, logprob, top_logprobs)."""
        logprob, top = value
        alternatives = [self._token(t) + orjson.dumps(lp) + b"}" for t, lp in list(top)[: self._top]]
        return (
            self._token(token)
            + orjson.dumps(logprob)
            + b',"top_logprobs":['
            + b",".join(alternatives)
            + b"]}"
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
                pending = self._pending
                self._pending = []
                joined = b",".join(pending)
                if pending:
                    self._message.append_json(joined, len(pending))
                object.__setattr__(event, "__class__", _LoggedTextDelta)
                event.__dict__["logprobs"] = LogprobsJSON([joined] if pending else [], len(pending))
            elif kind is ResponseOutputItemAddedEvent:
                self._pending = []
                self._message = LogprobsJSON()
            elif kind is ResponseTextDoneEvent:
                event.__dict__["logprobs"] = self._message  # the message's, shared (read-only from now)
            elif kind is ResponseContentPartDoneEvent:
                part: Any = event.part
                if part.type == "output_text":
                    part.__dict__["logprobs"] = self._message
            elif kind is ResponseOutputItemDoneEvent and isinstance(event.item, ResponseOutputMessage):
                for content in event.item.content:
                    if content.type == "output_text":
                        content.__dict__["logprobs"] = self._message
                self._pending = []
                self._message = LogprobsJSON()
            elif kind is not _LoggedTextDelta:
                if getattr(event, "delta", None) is not None:  # reasoning or call text: no logprobs
                    self._pending = []
        return events
