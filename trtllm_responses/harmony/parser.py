"""A token-level streaming parser for Harmony completions.

It reads what the model generates after ``<|start|>assistant`` and reports three
transitions: a message starts (its parsed header), body text arrives, a message
ends (with the token that ended it). The header grammar is openai-harmony's
(``StreamableParser::parse_header_from_tokens``); tests check both parsers agree.

Why not harmony's own ``StreamableParser``: it crosses into Rust and decodes per
token. This one looks up token bytes in a table and decodes UTF-8 once per
``feed`` call, so several tokens delivered in one engine step cost one delta. It
also never lets a control token become text: a control token inside a body is a
:class:`HarmonyFormatError`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from ..errors import HarmonyFormatError
from .encoding import HarmonyEncoding

__all__ = [
    "ContentDelta",
    "HarmonyStreamParser",
    "MessageEnded",
    "MessageHeader",
    "MessageStarted",
    "ParseEvent",
    "ParsedMessage",
    "parse_completion",
    "parse_header",
]

_ROLES = frozenset({"user", "assistant", "system", "developer", "tool"})
_CHANNEL_MARK = "<|channel|>"
_CONSTRAIN_MARK = "<|constrain|>"
_CHANNEL_VALUE = re.compile(r"[^\s<]*")
# A header is a role, a channel, a recipient and a content type: a few dozen tokens.
MAX_HEADER_TOKENS = 512


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """What a Harmony header says about the message that follows it."""

    role: str
    name: str | None = None
    channel: str | None = None
    recipient: str | None = None
    content_type: str | None = None


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


def parse_header(text: str, role: str | None) -> MessageHeader:
    """Parse a decoded Harmony header, exactly as openai-harmony does.

    ``role`` is the known role of the first message of a completion (the prompt
    already said ``<|start|>assistant``); later headers carry their own role.
    """
    channel: str | None = None
    idx = text.find(_CHANNEL_MARK)
    if idx >= 0:
        after = text[idx + len(_CHANNEL_MARK) :]
        value = _CHANNEL_VALUE.match(after).group()  # type: ignore[union-attr]
        if not value:
            raise HarmonyFormatError("channel marker present but no channel value found in header")
        channel = value
        text = text[:idx] + after[len(value) :]
    text = text.strip()
    if _CONSTRAIN_MARK in text:
        text = text.replace(_CONSTRAIN_MARK, " " + _CONSTRAIN_MARK).strip()
    parts = text.split()

    name: str | None = None
    if role is None:
        if not parts:
            raise HarmonyFormatError("message header did not contain a role")
        role_str = parts[0]
        if role_str in _ROLES:
            role = role_str
        elif len(parts) > 1 or parts[0].startswith("to="):
            parts.pop(0)
            role, name = "tool", role_str
        else:
            raise HarmonyFormatError(f"unknown role in message header: {role_str!r}")
    if parts and parts[0] == role:
        parts.pop(0)

    recipient: str | None = None
    content_type: str | None = None
    if parts:
        count = len(parts)
        last = parts.pop()
        if last.startswith("to="):
            recipient = last[3:]
        elif count == 1:
            recipient = last
        else:
            content_type = last
            if parts:
                if len(parts) != 1:
                    raise HarmonyFormatError(f"too many words in message header: {text!r}")
                raw = parts.pop()
                recipient = raw.removeprefix("to=")
    return MessageHeader(
        role=role, name=name, channel=channel, recipient=recipient, content_type=content_type
    )


_EXPECT_START, _HEADER, _CONTENT, _DONE = range(4)


class HarmonyStreamParser:
    """Parses a Harmony completion token by token; ``feed`` returns the transitions it caused.

    Consecutive body text inside one ``feed`` call comes back as a single
    :class:`ContentDelta`. Multibyte characters split across calls are held back
    until complete. Raises :class:`HarmonyFormatError` on output that breaks the
    format; the parser is then unusable.
    """

    __slots__ = (
        "_bytes",
        "_decoder",
        "_enc",
        "_header_tokens",
        "_message_start",
        "_partial",
        "_role",
        "_specials",
        "_state",
        "_terminators",
        "_tokens_seen",
    )

    def __init__(self, encoding: HarmonyEncoding, role: str | None = "assistant") -> None:
        self._enc = encoding
        self._bytes = encoding.token_bytes
        self._specials = encoding.special_ids
        self._terminators = encoding.message_terminators | {encoding.endoftext}
        self._state = _HEADER if role is not None else _EXPECT_START
        self._role = role
        self._header_tokens: list[int] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._tokens_seen = 0
        self._message_start = 0
        self._partial = False  # the incremental decoder holds part of a character

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
        for token in tokens:
            self._tokens_seen += 1
            state = self._state
            if state == _CONTENT:
                if token not in specials:
                    body += token_bytes[token]
                    continue
                if token not in self._terminators:
                    raise HarmonyFormatError(
                        f"control token {token_bytes[token].decode()} inside a message body"
                    )
                text = self._decode(body, final=True)
                body.clear()
                if text:
                    events.append(ContentDelta(text))
                events.append(MessageEnded(token, self._tokens_seen - self._message_start))
                self._state = _DONE if token == self._enc.endoftext else _EXPECT_START
            elif state == _HEADER:
                if token == self._enc.message:
                    header = self._decode_header()
                    self._role = None
                    self._header_tokens.clear()
                    self._state = _CONTENT
                    events.append(MessageStarted(header))
                elif token in specials and token not in (self._enc.channel, self._enc.constrain):
                    raise HarmonyFormatError(
                        f"control token {token_bytes[token].decode()} inside a message header"
                    )
                else:
                    self._header_tokens.append(token)
                    if len(self._header_tokens) > MAX_HEADER_TOKENS:
                        raise HarmonyFormatError(f"message header longer than {MAX_HEADER_TOKENS} tokens")
            elif state == _EXPECT_START:
                if token == self._enc.start:
                    self._state = _HEADER
                    self._message_start = self._tokens_seen - 1
                elif token == self._enc.endoftext:
                    self._state = _DONE
                else:
                    raise HarmonyFormatError(
                        f"expected <|start|> between messages, got {token_bytes[token]!r}"
                    )
            else:
                raise HarmonyFormatError(f"output continues after <|endoftext|>: {token_bytes[token]!r}")
        if body:
            text = self._decode(body)
            if text:
                events.append(ContentDelta(text))
        return events

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

    def finish(self) -> list[ParseEvent]:
        """The output ended (no more tokens). Closes an open body, flushing held-back bytes."""
        if self._state != _CONTENT:
            self._state = _DONE
            return []
        events: list[ParseEvent] = []
        text = self._decode(bytearray(), final=True)
        if text:
            events.append(ContentDelta(text))
        events.append(MessageEnded(None, self._tokens_seen - self._message_start))
        self._state = _DONE
        return events

    def _decode_header(self) -> MessageHeader:
        raw = b"".join([self._bytes[t] for t in self._header_tokens])
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HarmonyFormatError("message header is not valid UTF-8") from exc
        return parse_header(text, self._role)


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
