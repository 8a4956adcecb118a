"""TokenStreamProcessor: executor token deltas through the Harmony parser into a ResponseStream."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from openai.types.responses import (
    ResponseStreamEvent,
    ResponseUsage,
)

from ..core import HarmonyFormatError
from ..executors import TokenDelta
from ..harmony import (
    ANSWER_HEADER,
    ContentDelta,
    HarmonyEncoding,
    HarmonyStreamParser,
    ItemKind,
    MessageEnded,
    MessageStarted,
    trailing_recipient,
    unreadable_message,
)
from .events import (
    make_usage,
)
from .item import StreamStateError
from .response import ResponseStream

__all__ = ["RunControl", "TokenStreamProcessor"]

logger = logging.getLogger(__name__)


class RunControl(Protocol):
    """What the processor asks of the run it streams (``responses/run.py``), at message boundaries and
    at the end only, never per token."""

    def stop_reason(self) -> str | None:
        """A reason to end the response at this message boundary (e.g. ``steered``), or None."""
        ...

    @property
    def cancelled(self) -> bool:
        """A client cancelled the response: a generation that ends cancelled ends it ``cancelled``."""
        ...


_HELD = "\x00held"  # _apply's answer: a server-run call is held (the generation's rest is not read)
_CALLED = "\x00called"  # _apply's answer: the model called a client tool; the response ends at the call


class TokenStreamProcessor:
    """Feeds executor token deltas through the Harmony parser into a ResponseStream; counts usage.

    ``process`` returns the events a delta caused; the delta carrying a finish
    reason also yields the terminal event. ``fail`` ends the stream on an
    executor error. The parser recovers from malformed model output; a response
    of which nothing could be read ends ``failed``, saying what the model wrote.

    At message boundaries it also ends a generation early where reading on would be wrong:
    after a server-run call the model did not stop at (the tool loop runs it; what the model
    wrote after it, without the call's output, is dropped), and after a client call that anything
    but another client call follows (the response ends at its calls: what follows was written
    without their output, an imagined tool reply and what the model built on it; dropped and
    logged). Client calls one after another (the first closed by ``<|end|>``) are parallel calls,
    each its own item, unless ``parallel_calls`` is False (the first ends the response). A generation cut off
    (``length``) between messages right after a final answer or a client call ends
    ``completed``: that message was whole (closed by ``<|end|>``) and nothing was begun. A cut is
    never ``failed``: a response of which nothing could be read fails only when the model ended it.
    A reasoning message closed by ``<|return|>`` is also the answer: a final message repeating it
    follows (what was streamed as reasoning is not taken back).
    """

    def __init__(
        self,
        stream: ResponseStream,
        encoding: HarmonyEncoding,
        prompt_tokens: int,
        control: RunControl | None = None,
        parallel_calls: bool = True,
    ) -> None:
        self.stream = stream
        # Asked between Harmony messages (never per token): a reason to end the response there.
        self._control = control
        self._stop_requested = control.stop_reason if control is not None else None
        self._parser_encoding = encoding
        self._parser = HarmonyStreamParser(encoding)
        self._return = encoding.return_
        self._end_token = encoding.end
        self._prompt_tokens = prompt_tokens
        self._output_tokens = 0
        self._reasoning_tokens = 0
        self._in_reasoning = False
        self._answered = False  # the last message ended was a whole final answer or client call
        self._parallel_calls = parallel_calls
        # The last message ended was a client call closed by <|end|>: only another client call may follow.
        self._after_call = False
        self._read_something = False  # a message of this response was read (any generation)
        self._cached_tokens = 0  # this generation's
        self._cached_before = 0  # earlier generations' (the tool loop's turns)
        self.done = False
        # Parser events (and the rest of a step: its finish) waiting for a parked reasoning item's summary.
        self._deferred: tuple[list[Any], str, Any, Any] | None = None
        # Deltas (the rest of a step) a subclass handed back when the stream paused mid-step.
        self.requeued: list[TokenDelta] = []
        # When the executor's first delta came (perf_counter): set by the service's generation loop, so
        # nothing here checks it per token.
        self.first_token_at: float | None = None

    def start(self) -> list[ResponseStreamEvent]:
        """The opening events."""
        return self.stream.start()

    @property
    def output_tokens(self) -> int:
        """Tokens the executor has produced so far."""
        return self._output_tokens

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the engine reported reusing from its KV cache (every generation of the response)."""
        return self._cached_before + self._cached_tokens

    def count_extra(self, input_tokens: int, output_tokens: int, reasoning_tokens: int) -> None:
        """Add another generation's usage to this response's (automatic compaction's summary run)."""
        self._prompt_tokens += input_tokens
        self._output_tokens += output_tokens
        self._reasoning_tokens += reasoning_tokens

    def usage(self) -> ResponseUsage:
        """Usage so far."""
        return make_usage(
            self._prompt_tokens,
            self._output_tokens,
            self._reasoning_tokens,
            self._cached_before + self._cached_tokens,
        )

    @property
    def awaiting_tool(self) -> bool:
        """The generation stopped on a held tool call: the tool loop runs it and starts the next turn."""
        return self.done and self.stream.final_response is None

    def add_prompt_tokens(self, count: int) -> None:
        """Count ``count`` more input tokens (the prompt grew before the first generation)."""
        self._prompt_tokens += count

    def next_turn(self, prompt_tokens: int) -> None:
        """Get ready for the next generation of the same response (its prompt counts as input)."""
        if not self.awaiting_tool:
            raise StreamStateError("next_turn() without a held tool call")
        self._parser = HarmonyStreamParser(self._parser_encoding)
        self._after_call = False
        self._prompt_tokens += prompt_tokens
        self._cached_before += self._cached_tokens
        self._cached_tokens = 0
        self.done = False

    def process(self, delta: TokenDelta) -> list[ResponseStreamEvent]:
        """Events for one engine step."""
        if self.done:
            raise StreamStateError("the response has already ended")
        tokens = delta.token_ids
        self._output_tokens += len(tokens)
        if delta.cached_tokens is not None:
            self._cached_tokens = delta.cached_tokens
        if delta.finish_reason is None:
            text = self._parser.feed_body(tokens)
            if text is not None:  # the common step: one token of text inside a message
                return self.stream.content_delta(text) if text else []
        events: list[ResponseStreamEvent] = []
        try:
            if tokens:
                # A step that finishes the response is applied whole; others may stop at a boundary.
                stop = self._stop_requested if delta.finish_reason is None else None
                finish = (lambda events: self._finish(delta, events)) if delta.finish_reason else None
                reason = self._apply(self._parser.feed(tokens), events, "completed", stop, finish)
                if reason is None and self._after_call and self._parser.skipping:
                    reason = self._went_on("a message not its own (an imagined tool reply)")
                if self._ended(reason, events):
                    return events  # the step's rest is dropped
            elif delta.finish_reason is not None:
                self._finish(delta, events)
        except HarmonyFormatError as exc:
            events += self.fail(f"The model's output broke the Harmony format: {exc}")
        return events

    def _apply(
        self,
        parsed: list[Any],
        events: list[ResponseStreamEvent],
        cut_status: str,
        stop: Callable[[], str | None] | None = None,
        then: Callable[[list[ResponseStreamEvent]], None] | None = None,
    ) -> str | None:
        """Apply parser events, then ``then``; after each message that ends, ``stop`` may give a reason to end there.

        A reasoning item parked for its summary (``stream.summary_due``) pauses this: the
        rest (and ``then``) wait in ``_deferred`` until :meth:`resume`.
        """
        stream = self.stream
        i = 0
        while i < len(parsed):
            event = parsed[i]
            i += 1
            kind = type(event)
            if kind is ContentDelta:
                events += stream.content_delta(event.text)
            elif kind is MessageStarted:
                header = event.header
                if event.after_body and header.recipient is None:
                    # ``…text to=functions.f<|channel|>commentary``: the recipient was glued to the body
                    recipient = trailing_recipient(stream.last_text)
                    if recipient is not None:
                        header = replace(header, recipient=recipient)
                if self._after_call:
                    if event.after_skipped or not stream.opens_client_call(header):
                        return self._went_on(f"{len(parsed) - i + 1} parsed transitions in this step")
                    self._after_call = False  # another call: a parallel call
                events += stream.message_started(header)
                self._in_reasoning = stream.open_kind is ItemKind.REASONING
                self._read_something = True
                self._answered = False
            else:
                status = "completed" if event.terminator is not None else cut_status
                returned = self._in_reasoning and (
                    event.terminator == self._return
                    or (event.terminator is None and cut_status == "completed")
                )
                answer = stream.open_text if returned else ""
                events += stream.message_ended(status)
                if self._in_reasoning:
                    self._reasoning_tokens += event.num_tokens
                    self._in_reasoning = False
                if stream.held is not None:
                    return _HELD
                self._answered = status == "completed" and stream.answered
                if self._answered and stream.called:
                    if event.terminator != self._end_token or (stop is not None and stop() is not None):
                        return _CALLED  # the model stopped at its call (or the run stops here)
                    if not self._parallel_calls:
                        return self._went_on("the request asked for one call at a time")
                    self._after_call = True  # what follows says whether it was the last call
                    continue
                if returned:
                    # A body closed by <|return|> is the answer: the reasoning streamed stays, the answer
                    # repeats it (harmony/parser.py, ``returned_reasoning``).
                    parsed = [
                        *parsed[:i],
                        MessageStarted(ANSWER_HEADER),
                        ContentDelta(answer),
                        MessageEnded(event.terminator, 0),
                        *parsed[i:],
                    ]
                if stop is not None:
                    reason = stop()
                    if reason is not None:
                        return reason
                if stream.summary_due is not None:
                    self._deferred = (parsed[i:], cut_status, stop, then)
                    return None
        if then is not None:
            then(events)
        return None

    def _went_on(self, what: str) -> str:
        """The model went on after its client calls with something else: the response ends at the calls."""
        logger.info(
            "The model went on after its call (closed by <|end|>): the response ends at its calls, the rest "
            "of its generation is dropped (%s)",
            what,
        )
        return _CALLED

    @property
    def paused(self) -> bool:
        """A reasoning item waits for its summary: feed no more deltas until :meth:`resume`."""
        return self._deferred is not None

    def count_summary(self, output_tokens: int) -> None:
        """Count a summary's side generation: its output tokens are output and reasoning tokens.

        (OpenAI counts reasoning summaries in ``reasoning_tokens``; the summarizer's prompt is
        mostly the reasoning text already counted as output, and is not counted again.)
        """
        self._output_tokens += output_tokens
        self._reasoning_tokens += output_tokens

    def resume(self) -> list[ResponseStreamEvent]:
        """After the parked item's summary: apply what waited for it (it may park the next one)."""
        if self._deferred is None or self.stream.summary_due is not None:
            raise StreamStateError("resume() without a finished summary")
        parsed, cut_status, stop, then = self._deferred
        self._deferred = None
        events: list[ResponseStreamEvent] = []
        try:
            self._ended(self._apply(parsed, events, cut_status, stop, then), events)
        except HarmonyFormatError as exc:
            events += self.fail(f"The model's output broke the Harmony format: {exc}")
        return events

    def _finish(self, delta: TokenDelta, events: list[ResponseStreamEvent]) -> None:
        reason = delta.finish_reason
        if reason == "error":
            events += self.fail(delta.error or "The executor failed.")
            return
        if reason == "cancelled":
            events += self.interrupted("The generation was cancelled.")
            return
        # On "stop" an open message is whole (the engine kept its stop token to itself);
        # on "length" it was cut off.
        stopped = reason == "stop"
        parsed = self._parser.finish(stopped)

        def end(events: list[ResponseStreamEvent]) -> None:
            self.done = True
            if self.stream.held is not None:
                return  # a server-run tool call: the tool loop goes on (awaiting_tool)
            if not self._read_something and self._parser.dropped and stopped:
                # The model ended a completion of which nothing could be read (a cut is incomplete).
                events += self.fail(unreadable_message(bytes(self._parser.dropped)))
                return
            # Cut off between messages right after a whole answer or client call: nothing was lost.
            whole = stopped or self._answered
            events += self.stream.complete(self.usage()) if whole else self.stream.incomplete(self.usage())

        self._ended(self._apply(parsed, events, "completed" if stopped else "incomplete", then=end), events)

    def _ended(self, reason: str | None, events: list[ResponseStreamEvent]) -> bool:
        """Act on :meth:`_apply`'s answer; True when it ended what this processor reads.

        A held server-run call (the tool loop runs it and goes on), or a stop at a message boundary
        (steering: the response is incomplete with that reason).
        """
        if reason is None:
            return False
        self.done = True
        if reason is _CALLED:
            events += self.stream.complete(self.usage())
        elif reason is not _HELD:
            events += self.stream.incomplete(self.usage(), reason)
        return True

    def fail(self, message: str) -> list[ResponseStreamEvent]:
        """End the response as failed (executor error or malformed output)."""
        self.done = True
        return self.stream.fail(message, self.usage())

    def interrupted(self, message: str) -> list[ResponseStreamEvent]:
        """End the response its run stopped: ``cancelled`` if a client cancelled it, else failed with
        ``message`` (the server aborted it)."""
        if self._control is not None and self._control.cancelled:
            self.done = True
            return self.stream.cancel(self.usage())
        return self.fail(message)
