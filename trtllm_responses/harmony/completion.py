"""Whole completions read by the streaming reader (``parser.py``): their messages, and what is said of one
of which nothing could be read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .encoding import HarmonyEncoding
from .headers import MessageHeader
from .parser import ContentDelta, HarmonyStreamParser, MessageStarted

__all__ = [
    "ANSWER_HEADER",
    "QUOTED_CHARS",
    "ParsedMessage",
    "parse_completion",
    "returned_reasoning",
    "unreadable_message",
]


#: The header of the answer a reasoning message closed by ``<|return|>`` also is (:func:`returned_reasoning`).
ANSWER_HEADER = MessageHeader("assistant", channel="final")


def returned_reasoning(header: MessageHeader) -> bool:
    """Whether a message with ``header`` closed by ``<|return|>`` repeats as the answer.

    A body closed by ``<|return|>`` is the answer whatever its header says. A junk channel's body was
    held and is read as the answer (the parser); a clean ``analysis`` body was streamed as reasoning,
    which is not taken back: the answer, a final message with the same text, follows it.
    """
    return header.channel == "analysis" and header.recipient is None


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
            text = "".join(chunks)
            messages.append(ParsedMessage(header, text, event.terminator, event.num_tokens))
            if event.terminator == encoding.return_ and returned_reasoning(header):
                messages.append(ParsedMessage(ANSWER_HEADER, text, event.terminator))
    return messages
