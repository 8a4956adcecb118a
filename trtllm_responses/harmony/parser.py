"""A token-level streaming reader of Harmony completions that recovers, like an HTML parser.

It reads what the model generates after ``<|start|>assistant`` and reports three transitions: a
message starts (its header), body text arrives, a message ends (with its terminator). Clean Harmony
reads as openai-harmony reads it (tests check both agree); every other token sequence has one
reading (docs/harmony.md#what-the-model-may-write, the table) and nothing reported is taken back. What it
dropped is kept in :attr:`dropped` (its first :data:`MAX_DROPPED_BYTES`); whole completions, and the
error message of one of which nothing could be read, are ``completion.py``'s. Not harmony's own
``StreamableParser``, which crosses into Rust and decodes per token: this one decodes once per
``feed``, so the tokens of one engine step cost one delta.

Two kinds of message are held back until their end says what they are, because no header says it:
text the model wrote before any header, and a body under a junk or empty channel. Each is the answer
when it ends the completion (``<|return|>``, a stop, ``<|end|>`` with nothing after it) and reasoning
when more messages follow; a cut leaves each its default reading (headerless text the answer, a junk
channel's body reasoning). Clean Harmony is never held: its first token is a control token.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Union

from .encoding import HarmonyEncoding
from .headers import MessageHeader, header_fragment, plainly_text, read_header, read_headless

__all__ = [
    "ContentDelta",
    "HarmonyStreamParser",
    "MessageEnded",
    "MessageHeader",
    "MessageStarted",
    "ParseEvent",
]

# A header is a role, a channel, a recipient and a content type: a few dozen tokens.
MAX_HEADER_TOKENS = 512
#: The completion's first header with no control token and this many tokens is text, held until its end.
TEXT_HEADER_TOKENS = 16
#: How much of what was dropped is kept for the error message of an unreadable completion.
MAX_DROPPED_BYTES = 2048


# Transitions are made per engine step on the hot path: plain slotted classes (frozen ones
# construct several times slower). Treat them as immutable.
@dataclass(slots=True)
class MessageStarted:
    """A message's header was read; ``after_body``: a ``<|channel|>`` inside a body began it (a forgotten
    ``<|end|><|start|>assistant``, the header possibly recipient first, its ``to=`` glued to that body);
    ``after_skipped``: a message the reader skipped (one written as a tool, the user…) came since the last
    message it reported ended."""

    header: MessageHeader
    after_body: bool = False
    after_skipped: bool = False


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

# _HOLD: a held body (headerless text, a junk channel's body); _HELD_END: one closed by <|end|>, waiting
# to see whether a message follows; _BARE: a body whose header was nothing (``<|message|>`` alone).
_BETWEEN, _HEADER, _CONTENT, _SKIP, _HOLD, _HELD_END, _BARE = range(7)


def _whole_text(data: bytes) -> str:
    """UTF-8 text of ``data`` cut at its last whole character (a character cut off is not one)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(data, False)


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
        "_after_body",
        "_header_tokens",
        "_held",
        "_held_header",
        "_message_start",
        "_partial",
        "_role",
        "_skipped",
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
        self._after_body = False  # the header being read began inside a body (<|channel|>)
        self._held = bytearray()  # the held body (_HOLD, _HELD_END)
        self._held_header: MessageHeader | None = None  # its header (None: text with no header)
        self._skipped = False  # a message was skipped since the last one reported ended
        #: What the reader dropped (its first MAX_DROPPED_BYTES), for an error message.
        self.dropped = bytearray()

    @property
    def in_header(self) -> bool:
        """True while a header is being read (a message may be starting)."""
        return self._state == _HEADER

    @property
    def skipping(self) -> bool:
        """True while a message the reader skips is being read (one written as a tool, the user…)."""
        return self._state == _SKIP

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
                    self._after_body = token == enc.channel
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
            elif state == _HOLD or state == _HELD_END:
                self._held_token(token, events)
            elif state == _BARE:
                if token not in specials:  # its first text: a body with no header at all, the answer
                    self._open(MessageHeader("assistant"), "", events)
                    body += token_bytes[token]
                elif token == enc.start or token == enc.channel:
                    self._begin(token)  # ``<|message|><|channel|>``: nothing was written
                elif token in self._terminators:
                    self._state = _BETWEEN
                else:
                    self._drop(token_bytes[token])
            elif token == enc.start or token == enc.channel:
                self._begin(token)
            elif token == enc.message:  # a body with no header at all: opened at its first text
                self._begin(token)
                self._state = _BARE
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
        self._after_body = False
        if token == self._enc.start:
            self._role = None
            self._header_specials = False
        else:
            self._role = "assistant"
            self._header_tokens.append(token)
            self._header_specials = True

    @property
    def _unmarked(self) -> bool:
        """The header being read is the completion's first and has no control token yet."""
        return self._first and not self._header_specials

    def _header_token(self, token: int, events: list[ParseEvent]) -> None:
        enc = self._enc
        if token == enc.message:
            if self._unmarked and not self._header_tokens:
                self._state = _BARE  # ``<|message|>`` first: a body with no header, opened at its text
                self._first = False
                return
            header = read_header(self._header_text(), self._role)
            if header.role != "assistant":
                self._skip()  # a message the model wrote as a tool, user…: not its output
            elif not header.placed and (header.recipient is None or header.guessed):
                self._hold(header)  # a junk channel: its end says what it is
            else:
                self._open(header, "", events)
        elif token == enc.start or token == enc.channel:
            if self._unmarked and plainly_text(self._header_text()):
                # Text, then a header: a message the model wrote without one, and more follows: reasoning.
                self._held[:] = self._header_bytes()
                self._held_header = None
                self._release(events, "analysis", enc.end)
                self._begin(token)
                self._after_body = token == enc.channel
            elif token == enc.start:  # <|start|> again: the header so far was nothing
                if self._header_text().strip() not in ("", "assistant"):
                    self._drop(self._header_bytes())
                self._begin(token)
            else:
                self._header_tokens.append(token)
                self._header_specials = True
        elif token in self._terminators:
            self._headless(events, token)
        elif token == enc.constrain:
            self._header_tokens.append(token)
            self._header_specials = True
        elif token in self._specials:
            self._drop(self._bytes[token])  # a reserved token: nothing
        else:
            self._header_tokens.append(token)
            count = len(self._header_tokens)
            if self._unmarked and count >= TEXT_HEADER_TOKENS and not header_fragment(self._header_text()):
                self._held[:] = self._header_bytes()  # plainly text: held until its end says what it is
                self._held_header = None
                self._header_tokens.clear()
                self._state = _HOLD
                self._first = False
            elif count > MAX_HEADER_TOKENS:
                self._overflow(events)

    def _hold(self, header: MessageHeader | None) -> None:
        self._held.clear()
        self._held_header = header
        self._header_tokens.clear()
        self._role = None
        self._first = False
        self._state = _HOLD

    def _held_token(self, token: int, events: list[ParseEvent]) -> None:
        """A token after a held body started (``_HOLD``) or after it was closed by ``<|end|>`` (``_HELD_END``)."""
        enc = self._enc
        if token not in self._specials:
            if self._state == _HOLD:
                self._held += self._bytes[token]
            else:
                self._drop(self._bytes[token])  # text between messages
        elif token == enc.start or token == enc.channel or token == enc.message:
            after_body = self._state == _HOLD and token == enc.channel
            self._release(events, "analysis", enc.end)  # more follows: it was reasoning
            self._begin(token)
            if token == enc.message:
                self._state = _BARE
            self._after_body = after_body
        elif token == enc.end:
            self._state = _HELD_END  # whole: what follows says what it was
        elif token in self._terminators:  # <|return|>, <|call|>, <|endoftext|>: the model ended with it
            self._release(events, "final", enc.end if self._state == _HELD_END else token)
        elif self._state == _HOLD:
            self._drop(self._bytes[token])  # <|constrain|>, reserved: never text

    def _release(self, events: list[ParseEvent], channel: str, terminator: int | None) -> None:
        """The held body, read as ``channel`` now that its end said which: opened, whole, ended."""
        header = self._held_header
        header = (
            MessageHeader("assistant", channel=channel)
            if header is None
            else replace(header, channel=channel, placed=True)
        )
        text = _whole_text(bytes(self._held))
        if self._held_header is None:
            text = text.strip()  # text written with no header: the spaces around it are not its
        self._held.clear()
        self._held_header = None
        self._open(header, text, events)
        self._end(events, bytearray(), terminator)
        self._state = _BETWEEN

    def _reading(self, answer: bool) -> tuple[MessageHeader, str] | None:
        """The header so far read as one with no ``<|message|>``: an assistant's header and its body, or None."""
        reading = read_headless(self._header_text(), self._role, self._unmarked, answer)
        return reading if reading is not None and reading[0].role == "assistant" else None

    def _overflow(self, events: list[ParseEvent]) -> None:
        """A header too long to be one: the text it is (a body whose <|message|> was left out), or nothing."""
        reading = self._reading(False)
        if reading is None:
            self._skip()
            return
        header, text = reading
        self._open(header, text, events)

    def _headless(self, events: list[ParseEvent], token: int | None) -> None:
        """The header ended without ``<|message|>``: its reading, whole, or nothing."""
        self._state = _BETWEEN
        if (
            token == self._enc.end
            and self._unmarked
            and self._header_tokens
            and not header_fragment(self._header_text())
        ):  # headerless text closed by <|end|>: what follows decides (a header is never text)
            self._held[:] = self._header_bytes()
            self._held_header = None
            self._header_tokens.clear()
            self._first = False
            self._state = _HELD_END
            return
        reading = self._reading(token != self._enc.end)
        if reading is None:
            self._drop(self._header_bytes())
            self._header_tokens.clear()
            return
        header, text = reading
        self._open(header, text, events)
        self._end(events, bytearray(), token)
        self._state = _BETWEEN

    def _open(self, header: MessageHeader, text: str, events: list[ParseEvent]) -> None:
        self._header_tokens.clear()
        self._role = None
        self._first = False
        self._state = _CONTENT
        events.append(MessageStarted(header, self._after_body, self._skipped))
        self._after_body = False
        self._skipped = False
        if text:
            events.append(ContentDelta(text))

    def _skip(self) -> None:
        self._drop(self._header_bytes())
        self._header_tokens.clear()
        self._state = _SKIP
        self._skipped = True

    def _end(self, events: list[ParseEvent], body: bytearray, terminator: int | None) -> None:
        if body or self._partial:
            text = self._decode(body, final=True)
            body.clear()
            if text:
                events.append(ContentDelta(text))
        events.append(MessageEnded(terminator, self._tokens_seen - self._message_start))
        self._state = _BETWEEN

    def _header_bytes(self) -> bytes:
        return b"".join([self._bytes[t] for t in self._header_tokens])

    def _header_text(self) -> str:
        return _whole_text(self._header_bytes())

    def _drop(self, data: bytes) -> None:
        room = MAX_DROPPED_BYTES - len(self.dropped)
        if room > 0:
            self.dropped += data[:room]

    def _decode(self, data: bytearray, final: bool = False) -> str:
        """UTF-8 text of body bytes; a character split across calls waits for its last byte.

        ``final``: the body ends here; a character it cut off is dropped (the model never finished it:
        no U+FFFD for it), one the model wrote broken mid-body is U+FFFD.
        """
        if not self._partial:
            try:
                return data.decode()  # the common case: whole characters, no state
            except UnicodeDecodeError:
                pass
        text = self._decoder.decode(bytes(data), False)
        if final:
            self._decoder.reset()
            self._partial = False
        else:
            self._partial = bool(self._decoder.getstate()[0])
        return text

    def finish(self, stopped: bool = True) -> list[ParseEvent]:
        """The output ended (no more tokens). Closes an open body, flushing held-back bytes.

        ``stopped``: the engine stopped on a stop token it kept to itself (the header being read
        then ended as a terminator would end it; a held body ended the completion: the answer);
        False: the output was cut off (a held body keeps its default reading).
        """
        events: list[ParseEvent] = []
        state = self._state
        self._state = _BETWEEN
        if state == _CONTENT:
            self._end(events, bytearray(), None)
        elif state == _HOLD or state == _HELD_END:
            default = "final" if self._held_header is None else "analysis"
            terminator = self._enc.end if state == _HELD_END else None
            self._release(events, "final" if stopped else default, terminator)
        elif state == _HEADER and self._header_tokens:
            if stopped:
                self._headless(events, None)
            elif self._unmarked and not header_fragment(
                self._header_text()
            ):  # text, cut off: the answer so far
                self._held[:] = self._header_bytes()
                self._held_header = None
                self._release(events, "final", None)
            else:
                self._drop(self._header_bytes())
            self._header_tokens.clear()
        self._state = _BETWEEN
        return events
