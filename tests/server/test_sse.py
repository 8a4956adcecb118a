"""SSE framing: the fast delta frames say exactly what the SDK serializer says."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import (
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
)
from support.contract import validate_event

from trtllm_responses.core.wire import to_json
from trtllm_responses.server.sse import encode_event, encode_events, event_json

DELTAS = [
    "plain",
    "",
    'quote " backslash \\ slash /',
    "newline\n tab\t nul\x00",
    "unicode é 你好 😀",
    "\u2028\u2029",
    "<|start|>",
]


def frame_parts(frame: bytes) -> tuple[str, dict]:
    assert frame.endswith(b"\n\n") and frame.count(b"\n") == 3
    event_line, data_line = frame[:-2].decode().split("\n")
    assert event_line.startswith("event: ") and data_line.startswith("data: ")
    return event_line[7:], json.loads(data_line[6:])


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize(
    "event_type, extra",
    [
        (ResponseTextDeltaEvent, {"content_index": 0, "logprobs": [], "type": "response.output_text.delta"}),
        (ResponseReasoningTextDeltaEvent, {"content_index": 0, "type": "response.reasoning_text.delta"}),
        (ResponseFunctionCallArgumentsDeltaEvent, {"type": "response.function_call_arguments.delta"}),
    ],
)
def test_fast_delta_frames_equal_the_sdk_serialization(event_type: type, extra: dict, delta: str) -> None:
    event = event_type(item_id="msg_abc", output_index=3, delta=delta, sequence_number=41, **extra)
    name, data = frame_parts(encode_event(event))
    assert name == event.type
    assert data == json.loads(to_json(event))
    assert next(iter(data)) == "type"
    validate_event(data)
    assert json.loads(event_json(event)) == data  # what a WebSocket message carries


def test_event_json_of_a_generic_event_is_its_frame_data() -> None:
    from openai.types.responses import ResponseTextDoneEvent

    done = ResponseTextDoneEvent(
        item_id="m",
        output_index=0,
        content_index=0,
        text="x",
        logprobs=[],
        sequence_number=0,
        type="response.output_text.done",
    )
    assert encode_event(done) == b"event: response.output_text.done\ndata: " + event_json(done) + b"\n\n"
    assert json.loads(event_json(done)) == json.loads(to_json(done))


def test_several_events_make_one_write() -> None:
    events = [
        ResponseTextDeltaEvent(
            item_id="m",
            output_index=0,
            content_index=0,
            delta=str(i),
            logprobs=[],
            sequence_number=i,
            type="response.output_text.delta",
        )
        for i in range(3)
    ]
    assert encode_events(events) == b"".join(encode_event(e) for e in events)
