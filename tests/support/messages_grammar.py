"""The grammar of an Anthropic Messages stream, checked on the raw SSE frames (used by every Messages stream test).

Every frame is ``event: NAME`` + ``data: JSON`` with ``NAME`` the JSON's ``type``, and validates
against the ``anthropic`` SDK's ``RawMessageStreamEvent`` union (``ping`` and ``error`` against
their own shapes). The order is Anthropic's: ``message_start`` first (empty content, no stop
reason), then content blocks at indices 0, 1, … each ``content_block_start``, deltas of its own
kind (``text_delta`` for text, ``thinking_delta``/``signature_delta`` for thinking, with the
signature last, ``input_json_delta`` for tool_use), ``content_block_stop``; one open at a time; then
``message_delta`` with a stop reason and ``message_stop`` last. A stream that fails ends with one
``error`` event instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from typing import Any

from pydantic import TypeAdapter


@cache
def _sdk() -> tuple[Any, Any, TypeAdapter[Any]]:
    """The anthropic SDK's ``Message``, ``ErrorResponse`` and stream-event adapter, imported on first use (not
    when pytest collects the modules that import this one: support/lazy.py)."""
    from anthropic.types import Message, RawMessageStreamEvent
    from anthropic.types.shared import ErrorResponse

    return Message, ErrorResponse, TypeAdapter(RawMessageStreamEvent)


DELTAS = {
    "text": {"text_delta"},
    "thinking": {"thinking_delta", "signature_delta"},
    "tool_use": {"input_json_delta"},
}


def parse_messages_sse(lines: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` of each frame, checking the framing."""
    frames: list[tuple[str, dict[str, Any]]] = []
    name: str | None = None
    for line in lines:
        if line == "":
            continue
        if line.startswith("event: "):
            assert name is None, f"two event lines in one frame: {line!r}"
            name = line[len("event: ") :]
            continue
        assert line.startswith("data: ") and name is not None, f"unexpected SSE line {line!r}"
        data = json.loads(line[len("data: ") :])
        assert data["type"] == name, f"event {name!r} carries a {data['type']!r}"
        frames.append((name, data))
        name = None
    assert name is None, "a frame without its data"
    return frames


def check_messages_stream(frames: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Assert the grammar; return the message the stream built (its ``content`` as blocks), and
    ``error`` (the error event's ``error`` object, or None)."""
    assert frames and frames[0][0] == "message_start", "a stream begins with message_start"
    error = None
    if frames[-1][0] == "error":
        _sdk()[1].model_validate(frames[-1][1])
        error = frames[-1][1]["error"]
        assert all(name != "error" for name, _ in frames[:-1]), "one error event, last"
        frames = frames[:-1]
    else:
        assert frames[-1][0] == "message_stop", "a stream ends with message_stop"
        assert frames[-2][0] == "message_delta", "message_delta comes right before message_stop"
    for name, data in frames:
        if name != "ping":
            _sdk()[2].validate_python(data)
    message = dict(frames[0][1]["message"])
    assert message["content"] == [] and message["stop_reason"] is None
    blocks: list[dict[str, Any]] = []
    open_block: dict[str, Any] | None = None
    parts: list[str] = []
    signature_seen = False
    for name, data in frames[1:]:
        if name == "ping":
            continue
        if name == "content_block_start":
            assert open_block is None, "a block started while another is open"
            assert data["index"] == len(blocks), "blocks start at 0, 1, … in order"
            open_block = dict(data["content_block"])
            parts, signature_seen = [], False
        elif name == "content_block_delta":
            assert open_block is not None and data["index"] == len(blocks), "a delta outside its block"
            delta = data["delta"]
            assert delta["type"] in DELTAS.get(open_block["type"], set()), (open_block["type"], delta["type"])
            assert not signature_seen, "the signature is the thinking block's last delta"
            if delta["type"] == "signature_delta":
                open_block["signature"] = delta["signature"]
                signature_seen = True
            else:
                parts.append(delta.get("text") or delta.get("thinking") or delta.get("partial_json") or "")
        elif name == "content_block_stop":
            assert open_block is not None and data["index"] == len(blocks)
            kind = open_block["type"]
            if kind == "text":
                open_block["text"] = "".join(parts)
            elif kind == "thinking":
                open_block["thinking"] = "".join(parts)
                assert signature_seen, "a thinking block ends with its signature"
            elif kind == "tool_use":
                open_block["input"] = json.loads("".join(parts) or "{}")
            blocks.append(open_block)
            open_block = None
        elif name == "message_delta":
            assert open_block is None, "message_delta with a block still open"
            message.update(data["delta"])
            message["usage"] = {
                **message["usage"],
                **{k: v for k, v in data["usage"].items() if v is not None},
            }
        elif name == "message_stop":
            pass
        else:
            raise AssertionError(f"unexpected event {name!r}")
    message["content"] = blocks
    if error is None:
        assert message["stop_reason"] in ("end_turn", "tool_use", "max_tokens", "stop_sequence")
        _sdk()[0].model_validate(message)
    return {"message": message, "error": error}
