"""Anthropic Messages at the transport edge: the stream state machine's typed events → Messages events.

:class:`MessageWriter` reads the events ``ResponseStream`` emits for one generation (the same events
the Responses transports write) and turns each output item into a content block: a reasoning item
a ``thinking`` block (its text as ``thinking_delta``s unless the request asked for it omitted, its
sealed reasoning as the ``signature_delta`` before ``content_block_stop``; with
``--redact_reasoning`` a ``redacted_thinking`` block), a message a ``text`` block, a function call a
``tool_use`` block (its arguments as ``input_json_delta``s). Streamed, each step's events become SSE
frames at once (``event: NAME`` + ``data: JSON``); not streamed, :meth:`MessageWriter.message_json`.
Stop sequences apply to the text, held back while it may begin one (``edge.StopMatcher``).
The events and stop reasons: docs/anthropic-messages.md#anthropic-messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

from ...core import APIError, ServerError, json_string
from .edge import EventWriter, StopMatcher, generation_failure

__all__ = ["ERROR_TYPES", "MessageWriter", "anthropic_error", "anthropic_usage", "frame"]

#: HTTP status → Anthropic's error ``type`` (the ``anthropic`` SDK's ``ErrorObject`` union).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error(error: APIError) -> dict[str, Any]:
    """Anthropic's error envelope for ``error``: ``{"type": "error", "error": {"type", "message"}}``."""
    status = error.status_code
    kind = ERROR_TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def frame(name: str, data: dict[str, Any]) -> bytes:
    """One SSE frame: ``event: NAME`` and its JSON."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def anthropic_usage(usage: ResponseUsage | None, prompt_tokens: int) -> dict[str, Any]:
    """Messages ``usage``: input tokens the engine computed, those it read from its KV cache, output tokens
    (``output_tokens_details.thinking_tokens``: those of the analysis channel)."""
    if usage is None:
        return {
            "input_tokens": prompt_tokens,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
    cached = usage.input_tokens_details.cached_tokens
    return {
        "input_tokens": usage.input_tokens - cached,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens_details": {"thinking_tokens": usage.output_tokens_details.reasoning_tokens},
    }


_TEXT_DELTA = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":'
_THINKING_DELTA = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
    b'"delta":{"type":"thinking_delta","thinking":'
)
_JSON_DELTA = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
    b'"delta":{"type":"input_json_delta","partial_json":'
)
_DELTA_END = b"}}\n\n"
#: The blocks opened at their first text (or a thinking block when its item is done), as they start.
_OPENED_AT_FIRST_TEXT: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": ""},
    "thinking": {"type": "thinking", "thinking": "", "signature": ""},
}
_STOP = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":%d}\n\n'
_TERMINAL = frozenset({ResponseCompletedEvent, ResponseIncompleteEvent, ResponseFailedEvent})


class _Block:
    """The content block being written: its kind, index, and (not streaming) what it holds."""

    __slots__ = ("index", "kind", "parts", "head", "block")

    def __init__(self, kind: str, index: int, head: bytes, block: dict[str, Any]) -> None:
        self.kind = kind
        self.index = index
        self.head = head
        self.parts: list[str] = []
        self.block = block


class MessageWriter(EventWriter):
    """One Anthropic message, fed the typed events of its generation.

    ``stream`` True: :meth:`feed` returns the SSE bytes of each step. Else the writer keeps the
    blocks for :meth:`message_json`. ``thinking``: ``shown``, ``omitted`` (thinking blocks carry only
    their signature) or ``none`` (no thinking blocks). ``on_stop`` is called once when a stop
    sequence ends the text (the caller stops the generation; its ``response.failed`` then ends the
    message with ``stop_reason: "stop_sequence"``).
    """

    def __init__(
        self,
        message_id: str,
        model: str,
        prompt_tokens: int,
        *,
        stream: bool,
        thinking: str = "none",
        stop: Sequence[str] = (),
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.id = message_id
        self.model = model
        self.prompt_tokens = prompt_tokens
        self._stream = stream
        self._thinking = thinking
        self._matcher = StopMatcher(stop) if stop else None
        self._plain = stream and not stop  # the per-token fast path applies
        self._on_stop = on_stop
        self._block: _Block | None = None
        self._skipping = False  # the open output item makes no block (reasoning not returned, a server tool)
        self._pending: str | None = None  # the kind of the open item whose block opens at its first text
        self._next_index = 0
        self.blocks: list[dict[str, Any]] = []
        self.tool_uses = 0
        self.stopped: str | None = None  # the stop sequence that ended the text
        self.stop_reason: str | None = None
        self.usage: ResponseUsage | None = None
        self.error: ServerError | None = None

    # -- the frames ------------------------------------------------------------------------------

    def start(self) -> bytes:
        """``message_start`` (and a ``ping``), before any content."""
        message = self._message([], None, None, anthropic_usage(None, self.prompt_tokens))
        return (
            frame("message_start", {"type": "message_start", "message": message})
            + b'event: ping\ndata: {"type":"ping"}\n\n'
        )

    def _message(
        self,
        content: list[dict[str, Any]],
        stop_reason: str | None,
        stop_sequence: str | None,
        usage: dict[str, Any],
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }

    def message_json(self) -> bytes:
        """The ``message`` object (not streaming), once the generation has ended."""
        usage = anthropic_usage(self.usage, self.prompt_tokens)
        return orjson.dumps(self._message(self.blocks, self.stop_reason, self.stopped, usage))

    def error_frame(self, error: APIError) -> bytes:
        """The ``error`` event that ends a stream that failed once started."""
        return frame("error", anthropic_error(error))

    # -- events in --------------------------------------------------------------------------------

    def feed(self, events: list[ResponseStreamEvent]) -> bytes:
        """Read one engine step's events; the frames they make (streaming), else ``b""``."""
        if self._plain and len(events) == 1:
            event = events[0]
            block = self._block
            if type(event) is ResponseTextDeltaEvent and block is not None:  # the common step: one token
                return block.head + json_string(event.delta) + _DELTA_END
        out = b""
        for event in events:
            out += self._event(event)
        return out

    def _event(self, event: Any) -> bytes:
        kind = type(event)
        if isinstance(event, ResponseTextDeltaEvent):
            if self.stopped is not None or self._skipping:
                return b""
            return self._text(event.delta)
        if self.stopped is not None and kind not in _TERMINAL:
            return b""
        if kind is ResponseReasoningTextDeltaEvent:
            if self._skipping or self._thinking != "shown":
                return b""
            return self._delta("thinking", event.delta)
        if kind is ResponseFunctionCallArgumentsDeltaEvent:
            return b"" if self._skipping else self._delta("tool_use", event.delta)
        if kind is ResponseOutputItemAddedEvent:
            return self._item_added(event.item)
        if kind is ResponseOutputItemDoneEvent:
            return self._item_done(event.item)
        if kind is ResponseCompletedEvent:
            return self._finish("tool_use" if self.tool_uses else "end_turn", event.response.usage)
        if kind is ResponseIncompleteEvent:
            return self._finish("max_tokens", event.response.usage)
        if kind is ResponseFailedEvent:
            if self.stopped is not None:
                return self._finish("stop_sequence", event.response.usage)
            self.usage = event.response.usage
            self.error = generation_failure(event.response)
            return self._close()
        return b""

    # -- blocks -----------------------------------------------------------------------------------

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        index = self._next_index
        self._next_index += 1
        head = {"text": _TEXT_DELTA, "thinking": _THINKING_DELTA, "tool_use": _JSON_DELTA}[kind] % index
        self._block = _Block(kind, index, head, block)
        self._pending = None
        if not self._stream:
            return b""
        return frame(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
        )

    def _close(self, extra: dict[str, Any] | None = None) -> bytes:
        """End the open block (``extra``: a thinking block's signature); text held for stop sequences first."""
        out = self._release() if self._block is None or self._block.kind == "text" else b""
        block = self._block
        self._pending = None
        if block is None:
            return out
        self._block = None
        if not self._stream:
            text = "".join(block.parts)
            content = dict(block.block)
            if block.kind == "text":
                content["text"] = text
            elif block.kind == "thinking":
                content["thinking"] = text
                content.update(extra or {})
            elif block.kind == "tool_use":
                content["input"] = _arguments(text)
            self.blocks.append(content)
            return out
        if extra:
            delta = {"type": "signature_delta", "signature": extra["signature"]}
            out += frame(
                "content_block_delta", {"type": "content_block_delta", "index": block.index, "delta": delta}
            )
        return out + _STOP % block.index

    def _item_added(self, item: Any) -> bytes:
        out = self._close()
        kind = item.type
        self._skipping = False
        if kind == "function_call":
            self.tool_uses += 1
            return out + self._open(
                "tool_use", {"type": "tool_use", "id": item.call_id, "name": item.name, "input": {}}
            )
        if kind == "message":
            self._pending = "text"  # opened at its first text: an empty message makes no block
        elif kind == "reasoning" and self._thinking != "none":
            self._pending = "thinking"  # opened at its first text, else when done (its signature)
        else:
            self._skipping = True
        return out

    def _item_done(self, item: Any) -> bytes:
        if self._skipping:
            self._skipping = False
            return b""
        if item.type == "reasoning" and self._thinking != "none":
            sealed = getattr(item, "encrypted_content", None) or ""
            out = b""
            if self._block is None:
                if not item.content and sealed:  # --redact_reasoning: no text was ever shown
                    out = self._open("thinking", {"type": "redacted_thinking", "data": sealed})
                    block = self._block
                    assert block is not None
                    self._block = None
                    self.blocks.append(block.block)
                    if self._stream:
                        out += _STOP % block.index
                    return out
                out = self._open("thinking", dict(_OPENED_AT_FIRST_TEXT["thinking"]))
            return out + self._close({"signature": sealed})
        return self._close()

    def _delta(self, kind: str, text: str) -> bytes:
        """Text, thinking text or tool arguments for the open block (a text or thinking block opens at its
        first text: ``kind`` is then the pending one)."""
        block = self._block
        out = b""
        if block is None:
            if kind != self._pending:  # pending: "text", "thinking" or None, never "tool_use"
                return b""
            out = self._open(kind, dict(_OPENED_AT_FIRST_TEXT[kind]))
            block = self._block
            assert block is not None
        if not self._stream:
            block.parts.append(text)
            return out
        return out + block.head + json_string(text) + _DELTA_END

    def _text(self, text: str) -> bytes:
        """Answer text, through the stop sequences when there are any."""
        if self._matcher is not None:
            text, stopped = self._matcher.feed(text)
            if stopped:
                self.stopped = self._matcher.matched
                out = self._delta("text", text) if text else b""
                if self._on_stop is not None:
                    self._on_stop()
                return out
        return self._delta("text", text) if text else b""

    def _release(self) -> bytes:
        """Text held back for stop sequences, once the text has ended without one."""
        if self._matcher is None or self.stopped is not None:
            return b""
        held = self._matcher.flush()
        return self._delta("text", held) if held else b""

    def _finish(self, reason: str, usage: ResponseUsage | None) -> bytes:
        out = self._close()
        self.stop_reason = reason
        self.usage = usage
        if not self._stream:
            return out
        delta = {"stop_reason": reason, "stop_sequence": self.stopped}
        usage_json = anthropic_usage(usage, self.prompt_tokens)
        out += frame("message_delta", {"type": "message_delta", "delta": delta, "usage": usage_json})
        return out + b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def _arguments(text: str) -> Any:
    """A tool use's ``input``: its arguments' JSON object (``{}`` when empty or not an object)."""
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
