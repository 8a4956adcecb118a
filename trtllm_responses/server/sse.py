"""Server-Sent Events framing: ``event: <type>`` / ``data: <json>`` / blank line. Only here.

Serialization is on the per-token hot path. Delta events (output text,
reasoning text, function-call arguments) are framed from a prefix computed
once per item plus the JSON of the delta, with ``type`` first as OpenAI sends
it; every other event goes through the SDK model's serializer. Both give the
same JSON object (a test pins it).
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from openai.types.responses import (
    ResponseCustomToolCallInputDeltaEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)

from ..core import held_tokens, json_string, to_json

__all__ = [
    "OBFUSCATION_BLOCK",
    "SSE_FRAMING",
    "SSEFraming",
    "encode_event",
    "encode_events",
    "event_json",
    "obfuscate",
    "obfuscation_noise",
    "obfuscation_wanted",
]

_MAX_CACHED_PREFIXES = 4096


class _DeltaFrames:
    """Frames of one delta event type: a prefix per item (its id, output and content index), then the delta."""

    def __init__(self, event_type: str, has_content_index: bool, suffix: bytes) -> None:
        self.head = f'event: {event_type}\ndata: {{"type":"{event_type}","item_id":'.encode()
        self.has_content_index = has_content_index
        self.suffix = suffix + b',"sequence_number":%d}\n\n'
        self.prefixes: dict[str, bytes] = {}

    def frame(self, fields: dict[str, Any]) -> bytes:
        """The SSE frame of a delta event's fields."""
        item_id = fields["item_id"]
        prefix = self.prefixes.get(item_id)
        if prefix is None:
            if len(self.prefixes) >= _MAX_CACHED_PREFIXES:
                self.prefixes.clear()
            where = b',"output_index":%d' % fields["output_index"]
            if self.has_content_index:
                where += b',"content_index":%d' % fields["content_index"]
            prefix = self.prefixes[item_id] = self.head + orjson.dumps(item_id) + where + b',"delta":'
        return prefix + json_string(fields["delta"]) + self.suffix % fields["sequence_number"]


# An item's output index and content index never change, so its id keys its prefix.
_text_delta = _DeltaFrames("response.output_text.delta", True, b',"logprobs":[]')
_reasoning_delta = _DeltaFrames("response.reasoning_text.delta", True, b"")
_arguments_delta = _DeltaFrames("response.function_call_arguments.delta", False, b"")
_custom_input_delta = _DeltaFrames("response.custom_tool_call_input.delta", False, b"")

_FAST: dict[type[Any], Callable[[dict[str, Any]], bytes]] = {
    ResponseTextDeltaEvent: _text_delta.frame,
    ResponseReasoningTextDeltaEvent: _reasoning_delta.frame,
    ResponseFunctionCallArgumentsDeltaEvent: _arguments_delta.frame,
    ResponseCustomToolCallInputDeltaEvent: _custom_input_delta.frame,
}
_generic_prefixes: dict[str, bytes] = {}


def encode_event(event: ResponseStreamEvent) -> bytes:
    """One SSE frame."""
    fast = _FAST.get(type(event))
    if fast is not None:
        return fast(event.__dict__)
    prefix = _generic_prefixes.get(event.type)
    if prefix is None:
        prefix = _generic_prefixes[event.type] = b"event: " + event.type.encode() + b"\ndata: "
    return prefix + to_json(event) + b"\n\n"


def event_json(event: ResponseStreamEvent) -> bytes:
    """The JSON of one event, exactly as its SSE frame carries it (the WebSocket transport sends this)."""
    return encode_event(event)[len(event.type) + 14 : -2]  # past "event: TYPE\ndata: ", before "\n\n"


def encode_events(events: Sequence[ResponseStreamEvent], obfuscated: bool = False) -> bytes:
    """SSE frames of one engine step's events, concatenated: one write per step (``obfuscated``: see obfuscate)."""
    if obfuscated:
        return b"".join([obfuscate(e, encode_event(e)) for e in events])
    if len(events) == 1:
        return encode_event(events[0])
    return b"".join([encode_event(e) for e in events])


#: Delta events pad their ``delta`` with ``obfuscation`` to a multiple of this many characters, as OpenAI's
#: streams do (a one-character delta carries 15 characters of obfuscation, a seven-character one 9).
OBFUSCATION_BLOCK = 16
_OBFUSCATION_ALPHABET = string.ascii_letters + string.digits


def obfuscate(event: ResponseStreamEvent, frame: bytes) -> bytes:
    """``frame`` with an ``obfuscation`` field when ``event`` is a delta event (random letters and digits, so the
    delta's length cannot be read from the frame's size); other frames unchanged."""
    delta = getattr(event, "delta", None)
    if not isinstance(delta, str) or not event.type.endswith(".delta"):
        return frame
    pad = -len(delta) % OBFUSCATION_BLOCK or OBFUSCATION_BLOCK
    return frame[:-3] + b',"obfuscation":"' + obfuscation_noise(pad) + b'"}\n\n'


def obfuscation_noise(length: int) -> bytes:
    """``length`` random letters and digits (an ``obfuscation`` field's value)."""
    return "".join(secrets.choice(_OBFUSCATION_ALPHABET) for _ in range(length)).encode()


def obfuscation_wanted(stream_options: dict[str, Any] | None) -> bool:
    """``stream_options.include_obfuscation`` (default false here: docs/endpoints.md#endpoints)."""
    return bool(stream_options and stream_options.get("include_obfuscation") is True)


#: Tokens of logprobs in one step's events past which each event is written in a turn of the loop of its
#: own (docs/limits.md#hostile-input-and-limits: a message's end carries its logprobs four times: text, part
#: and item done, the response; 17 MiB each at the cap).
APART_TOKENS = 1024


def written_apart(events: Sequence[ResponseStreamEvent]) -> bool:
    """Whether a step's events are to be written one per turn of the event loop (megabytes of logprobs)."""
    return len(events) > 1 and sum(held_tokens(e) for e in events) > APART_TOKENS


_TERMINAL = (b"event: response.completed\n", b"event: response.incomplete\n", b"event: response.failed\n")


class SSEFraming:
    """The SSE framing of a kept run's events (``responses.Framing``): what a background response
    records, replays and relays through Redis."""

    def obfuscated(self, stream_options: dict[str, Any] | None) -> bool:
        """``stream_options.include_obfuscation``."""
        return obfuscation_wanted(stream_options)

    def frame(self, event: ResponseStreamEvent, obfuscated: bool) -> bytes:
        """One event's SSE frame, obfuscated when asked."""
        return obfuscate(event, encode_event(event)) if obfuscated else encode_event(event)

    def is_terminal(self, frame: bytes) -> bool:
        """Whether ``frame`` starts with a terminal event's frame."""
        return frame.startswith(_TERMINAL)

    def failed(self, response: dict[str, Any], sequence_number: int) -> bytes:
        """The ``response.failed`` frame of ``response``."""
        event = {"type": "response.failed", "sequence_number": sequence_number, "response": response}
        return b"event: response.failed\ndata: " + orjson.dumps(event) + b"\n\n"


#: The one SSE framing (stateless).
SSE_FRAMING = SSEFraming()
