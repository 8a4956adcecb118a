"""Server-Sent Events framing: ``event: <type>`` / ``data: <json>`` / blank line. Only here.

Serialization is on the per-token hot path. Delta events (output text,
reasoning text, function-call arguments) are framed from a prefix computed
once per item plus the JSON of the delta, with ``type`` first as OpenAI sends
it; every other event goes through the SDK model's serializer. Both give the
same JSON object (a test pins it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from openai.types.responses import (
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)

from ..wire import to_json

__all__ = ["encode_event", "encode_events"]

_MAX_CACHED_PREFIXES = 4096
_prefixes: dict[tuple[str, str, int, int], bytes] = {}


def _delta_prefix(event_type: str, item_id: str, output_index: int, content_index: int) -> bytes:
    key = (event_type, item_id, output_index, content_index)
    prefix = _prefixes.get(key)
    if prefix is None:
        if len(_prefixes) >= _MAX_CACHED_PREFIXES:
            _prefixes.clear()
        head = f'event: {event_type}\ndata: {{"type":"{event_type}","item_id":'.encode()
        where = b',"output_index":%d' % output_index
        if content_index >= 0:
            where += b',"content_index":%d' % content_index
        prefix = _prefixes[key] = head + orjson.dumps(item_id) + where + b',"delta":'
    return prefix


def _text_delta(fields: dict[str, Any]) -> bytes:
    prefix = _delta_prefix(
        "response.output_text.delta", fields["item_id"], fields["output_index"], fields["content_index"]
    )
    return b'%s%s,"logprobs":[],"sequence_number":%d}\n\n' % (
        prefix,
        orjson.dumps(fields["delta"]),
        fields["sequence_number"],
    )


def _reasoning_delta(fields: dict[str, Any]) -> bytes:
    prefix = _delta_prefix(
        "response.reasoning_text.delta", fields["item_id"], fields["output_index"], fields["content_index"]
    )
    return b'%s%s,"sequence_number":%d}\n\n' % (
        prefix,
        orjson.dumps(fields["delta"]),
        fields["sequence_number"],
    )


def _arguments_delta(fields: dict[str, Any]) -> bytes:
    prefix = _delta_prefix(
        "response.function_call_arguments.delta", fields["item_id"], fields["output_index"], -1
    )
    return b'%s%s,"sequence_number":%d}\n\n' % (
        prefix,
        orjson.dumps(fields["delta"]),
        fields["sequence_number"],
    )


_FAST: dict[type[Any], Callable[[dict[str, Any]], bytes]] = {
    ResponseTextDeltaEvent: _text_delta,
    ResponseReasoningTextDeltaEvent: _reasoning_delta,
    ResponseFunctionCallArgumentsDeltaEvent: _arguments_delta,
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


def encode_events(events: Sequence[ResponseStreamEvent]) -> bytes:
    """SSE frames of one engine step's events, concatenated: one write per step."""
    if len(events) == 1:
        return encode_event(events[0])
    return b"".join([encode_event(e) for e in events])
