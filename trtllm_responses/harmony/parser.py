"""A token-level streaming reader of Harmony completions that recovers, like an HTML parser.

It reads what the model generates after ``<|start|>assistant`` and reports three transitions: a
message starts (its header), body text arrives, a message ends (with its terminator). Clean Harmony
reads as openai-harmony reads it (tests check both agree); every other token sequence has one
reading (README, "What the model may write", the table) and nothing reported is taken back. What it
dropped is kept in :attr:`dropped` (its first :data:`MAX_DROPPED_BYTES`). Not harmony's own
``StreamableParser``, which crosses into Rust and decodes per token: this one decodes once per
``feed``, so the tokens of one engine step cost one delta.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from .encoding import HarmonyEncoding
from .headers import MessageHeader, read_header, read_headless

__all__ = [
    "ContentDelta",
    "HarmonyStreamParser",
    "MessageEnded",
    "MessageHeader",
    "MessageStarted",
    "ParseEvent",
    "ParsedMessage",
    "parse_completion",
    "unreadable_message",
]

# A header is a role, a channel, a recipient and a content type: a few dozen tokens.
MAX_HEADER_TOKENS = 512
#: The completion's first header with no control token and this many tokens is text: the final answer.
TEXT_HEADER_TOKENS = 16
#: How much of what was dropped is kept for the error message of an unreadable completion.
MAX_DROPPED_BYTES = 2048


# Transitions are made per engine step on the hot path: plain slotted classes (frozen ones
# construct several times slower). Treat them as immutable.
@dataclass(slots=True)
class MessageStarted:
    header: MessageHeader


@dataclass(slots=True)
class ContentDelta:
    text: str


@dataclass(slots=True)
class MessageEnded:
    """The message ended; ``terminator`` is the token id that ended it, or None at end of output.

    ``num_tokens`` counts the message's tokens: its ``<|start|>`` (if any), header, body and terminator.
    """

    terminator: int | None
    num_tokens: int = 0


ParseEvent = Union[MessageStarted, ContentDelta, MessageEnded]

_BETWEEN, _HEADER, _CONTENT, _SKIP = range(4)


class HarmonyStreamParser:
    """Reads a Harmony completion token by token; ``feed`` returns the transitions it caused.

    Consecutive body text inside one ``feed`` call comes back as a single
    :class:`ContentDelta`. Multibyte characters split across calls are held back
    until complete. Never raises on what the model wrote (see the module docstring).
    """

    __slots__ = (
        "_bytes",
        "_decoder",
        "_enc",
        "_first",
        "_header_specials",
        "_header_tokens",
        "_message_start",
        "_partial",
        "_role",
        "_specials",
        "_state",
        "_terminators",
        "_tokens_seen",
        "dropped",
    )

    def __init__(self, encoding: HarmonyEncoding, role: str | None = "assistant") -> None:
        self._enc = encoding
        self._bytes = encoding.token_bytes
        self._specials = encoding.special_ids
        self._terminators = encoding.message_terminators | {encoding.endoftext}
        self._state = _HEADER if role is not None else _BETWEEN
        self._role = role
        self._first = role is not None  # the completion's first header: unmarked text is the answer
        self._header_tokens: list[int] = []
        self._header_specials = False
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._tokens_seen = 0
        self._message_start = 0
        self._partial = False  # the incremental decoder holds part of a character
        #: What the reader dropped (its first MAX_DROPPED_BYTES), for an error message.
        self.dropped = bytearray()

    @property
    def in_header(self) -> bool:
        """True while a header is being read (a message may be starting)."""
        return self._state == _HEADER

    def feed_body(self, tokens: Sequence[int]) -> str | None:
        """The common step, without transition objects: the text of one ordinary token inside a body.

        Returns None, having consumed nothing, unless ``tokens`` is a single
        token that continues the open message body with whole characters; the
        caller then uses :meth:`feed`.
        """
        if len(tokens) != 1 or self._state != _CONTENT or self._partial:
            return None
        token = tokens[0]
        if token in self._specials:
            return None
        try:
            text = self._bytes[token].decode()
        except UnicodeDecodeError:
            return None  # part of a character: feed holds it back
        self._tokens_seen += 1
        return text

    def feed(self, tokens: Sequence[int]) -> list[ParseEvent]:
        """Consume tokens; return the transitions they caused, in order."""
        events: list[ParseEvent] = []
        body = bytearray()
        token_bytes = self._bytes
        specials = self._specials
        enc = self._enc
        for token in tokens:
            self._tokens_seen += 1
            state = self._state
            if state == _CONTENT:
                if token not in specials:
                    body += token_bytes[token]
                    continue
                if token in self._terminators:
                    self._end(events, body, token)
                    self._state = _BETWEEN
                elif token == enc.start or token == enc.channel:
                    self._end(events, body, enc.end)  # a forgotten <|end|>
                    self._begin(token)
                else:
                    self._drop(token_bytes[token])  # <|message|>, <|constrain|>, reserved: never text
            elif state == _HEADER:
                self._header_token(token, events)
            elif state == _SKIP:
                if token in self._terminators:
                    self._state = _BETWEEN
                elif token == enc.start or token == enc.channel:
                    self._begin(token)
                else:
                    self._drop(token_bytes[token])
            elif token == enc.start or token == enc.channel:
                self._begin(token)
            elif token == enc.message:  # a body with no header at all: the assistant's answer
                self._begin(token)
                self._open(MessageHeader("assistant"), "", events)
            elif token not in specials:
                self._drop(token_bytes[token])  # text between messages
        if body:
            text = self._decode(body)
            if text:
                events.append(ContentDelta(text))
        return events

    def _begin(self, token: int) -> None:
        """A header starts at ``token`` (``<|start|>``; ``<|channel|>``: a forgotten ``<|start|>assistant``)."""
        self._state = _HEADER
        self._message_start = self._tokens_seen - 1
        self._header_tokens.clear()
        self._first = False
        if token == self._enc.start:
            self._role = None
            self._header_specials = False
        else:
            self._role = "assistant"
            self._header_tokens.append(token)
            self._header_specials = True

    def _header_token(self, token: int, events: list[ParseEvent]) -> None:
        enc = self._enc
        if token == enc.message:
            header = read_header(self._header_text(), self._role)
            if header.role != "assistant":
                self._skip()  # a message the model wrote as a tool, user…: not its output
            else:
                self._open(header, "", events)
        elif token == enc.start:  # <|start|> again: the header so far was nothing
            if self._header_text().strip() not in ("", "assistant"):
                self._drop(self._header_bytes())
            self._begin(token)
        elif token in self._terminators:
            self._headless(events, token)
            self._state = _BETWEEN
        elif token == enc.channel or token == enc.constrain:
            self._header_tokens.append(token)
            self._header_specials = True
        elif token in self._specials:
            self._drop(self._bytes[token])  # a reserved token: nothing
        else:
            self._header_tokens.append(token)
            count = len(self._header_tokens)
            if (
                self._first and not self._header_specials and count >= TEXT_HEADER_TOKENS
            ) or count > MAX_HEADER_TOKENS:
                self._overflow(events)

    def _reading(self) -> tuple[MessageHeader, str] | None:
        """The header so far read as one with no ``<|message|>``: an assistant's header and its body, or None."""
        reading = read_headless(self._header_text(), self._role, self._first and not self._header_specials)
        return reading if reading is not None and reading[0].role == "assistant" else None

    def _overflow(self, events: list[ParseEvent]) -> None:
        """A header too long to be one: the text it is (the answer, a body whose <|message|> was left out)."""
        reading = self._reading()
        if reading is None:
            self._skip()
            return
        header, text = reading
        self._open(header, text, events)

    def _headless(self, events: list[ParseEvent], token: int | None) -> None:
        """The header ended without ``<|message|>``: its reading, whole, or nothing."""
        reading = self._reading()
        if reading is None:
            self._drop(self._header_bytes())
            self._header_tokens.clear()
            return
        header, text = reading
        self._open(header, text, events)
        self._end(events, bytearray(), token)

    def _open(self, header: MessageHeader, text: str, events: list[ParseEvent]) -> None:
        self._header_tokens.clear()
        self._role = None
        self._first = False
        self._state = _CONTENT
        events.append(MessageStarted(header))
        if text:
            events.append(ContentDelta(text))

    def _skip(self) -> None:
        self._drop(self._header_bytes())
        self._header_tokens.clear()
        self._state = _SKIP

    def _end(self, events: list[ParseEvent], body: bytearray, terminator: int | None) -> None:
        if body or self._partial:
            text = self._decode(body, final=True)
            body.clear()
            if text:
                events.append(ContentDelta(text))
        events.append(MessageEnded(terminator, self._tokens_seen - self._message_start))

    def _header_bytes(self) -> bytes:
        return b"".join([self._bytes[t] for t in self._header_tokens])

    def _header_text(self) -> str:
        return self._header_bytes().decode("utf-8", "replace")

    def _drop(self, data: bytes) -> None:
        room = MAX_DROPPED_BYTES - len(self.dropped)
        if room > 0:
            self.dropped += data[:room]

    def _decode(self, data: bytearray, final: bool = False) -> str:
        """UTF-8 text of body bytes; a character split across calls waits for its last byte."""
        if not self._partial:
            try:
                return data.decode()  # the common case: whole characters, no state
            except UnicodeDecodeError:
                pass
        text = self._decoder.decode(bytes(data), final)
        if final:
            self._decoder.reset()
            self._partial = False
        else:
            self._partial = bool(self._decoder.getstate()[0])
        return text

    def finish(self, stopped: bool = True) -> list[ParseEvent]:
        """The output ended (no more tokens). Closes an open body, flushing held-back bytes.

        ``stopped``: the engine stopped on a stop token it kept to itself (the header being read
        then ended as a terminator would end it); False: the output was cut off.
        """
        events: list[ParseEvent] = []
        state = self._state
        self._state = _BETWEEN
        if state == _CONTENT:
            self._end(events, bytearray(), None)
        elif state == _HEADER and self._header_tokens:
            if stopped:
                self._headless(events, None)
            elif self._first and not self._header_specials:  # unmarked text, cut off: the answer so far
                self._overflow(events)
                if self._state == _CONTENT:
                    self._end(events, bytearray(), None)
                self._state = _BETWEEN
            else:
                self._drop(self._header_bytes())
            self._header_tokens.clear()
        return events


#: How much of what the model wrote an error message quotes.
QUOTED_CHARS = 400


def unreadable_message(dropped: bytes) -> str:
    """The error message of a response of which nothing could be read: what the model wrote, truncated."""
    text = dropped.decode("utf-8", "replace")
    quoted = text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "…"
    return f"The model's output could not be read as Harmony; it wrote: {quoted!r}"


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    """A whole message read from a completion."""

    header: MessageHeader
    text: str
    terminator: int | None
    num_tokens: int = 0  # its tokens: ``<|start|>`` (if any), header, body and terminator


def parse_completion(
    encoding: HarmonyEncoding, tokens: Sequence[int], role: str | None = "assistant"
) -> list[ParsedMessage]:
    """Parse a whole completion into messages (a message cut off at the end is included)."""
    parser = HarmonyStreamParser(encoding, role)
    messages: list[ParsedMessage] = []
    header: MessageHeader | None = None
    chunks: list[str] = []
    for event in [*parser.feed(tokens), *parser.finish()]:
        if isinstance(event, MessageStarted):
            header, chunks = event.header, []
        elif isinstance(event, ContentDelta):
            chunks.append(event.text)
        else:
            assert header is not None
            messages.append(ParsedMessage(header, "".join(chunks), event.terminator, event.num_tokens))
    return messages
