"""Chat Completions at the transport edge: the stream state machine's typed events → chat chunks.

:class:`ChatChoice` reads the events ``ResponseStream`` emits for one generation (the same events
the Responses transports write) and turns them into one choice of a chat completion: streamed, each
delta framed at once as an SSE ``chat.completion.chunk`` line (:class:`ChunkFrames` builds each
chunk's fixed part once); not streamed, :meth:`ChatChoice.choice_json`. Stop strings apply to the
answer text, held back while it may begin one (``edge.StopMatcher``). The chunks and finish reasons:
docs/chat-completions.md#chat-completions.
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
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

from ...core import APIError, LogprobsJSON, ServerError, json_string
from ..sse import OBFUSCATION_BLOCK, obfuscation_noise
from .edge import EventWriter, StopMatcher, generation_failure

__all__ = ["DONE", "ChatChoice", "ChunkFrames", "chat_usage"]

DONE = b"data: [DONE]\n\n"

_OPEN = b'},"logprobs":null,"finish_reason":null}]}\n\n'


def chat_usage(usages: Sequence[ResponseUsage]) -> dict[str, Any]:
    """The chat ``usage`` of one or more choices: the prompt counted once, completions summed; the prompt's
    details as ``/v1/responses`` counts them (``cache_write_tokens``: prompt tokens the engine computed)."""
    first = usages[0]
    completion = sum(u.output_tokens for u in usages)
    reasoning = sum(u.output_tokens_details.reasoning_tokens for u in usages)
    details = first.input_tokens_details
    return {
        "prompt_tokens": first.input_tokens,
        "completion_tokens": completion,
        "total_tokens": first.input_tokens + completion,
        "prompt_tokens_details": {
            "cached_tokens": details.cached_tokens,
            "cache_write_tokens": details.cache_write_tokens,
        },
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


class ChunkFrames:
    """The SSE frames of one chat completion's chunks (same id, created, model and service tier in each).

    ``include_usage``: every chunk but the usage one carries ``"usage": null`` (the SDK's
    ``ChatCompletionChunk.usage``: "null except for the last chunk"). ``obfuscated``
    (``stream_options.include_obfuscation``): :meth:`obfuscate` pads each chunk with an ``obfuscation`` field.
    """

    def __init__(
        self,
        completion_id: str,
        created: int,
        model: str,
        *,
        service_tier: str = "default",
        include_usage: bool = False,
        obfuscated: bool = False,
    ) -> None:
        fixed = (
            b'data: {"id":'
            + orjson.dumps(completion_id)
            + b',"object":"chat.completion.chunk","created":'
            + str(created).encode()
            + b',"model":'
            + orjson.dumps(model)
            + b',"service_tier":'
            + orjson.dumps(service_tier)
            + b',"system_fingerprint":null'
        )
        self.head = fixed + (b',"usage":null' if include_usage else b"") + b',"choices":['
        self._usage_head = fixed + b',"choices":['
        self.obfuscated = obfuscated
        self._choices: dict[int, bytes] = {}

    def open(self, index: int) -> bytes:
        """The start of a chunk of choice ``index``, up to the inside of its ``delta``."""
        opened = self._choices.get(index)
        if opened is None:
            opened = self._choices[index] = self.head + b'{"index":%d,"delta":{' % index
        return opened

    def role(self, index: int) -> bytes:
        """The first chunk of a choice: ``{"role": "assistant", "content": null}`` (``content`` becomes a string
        with the first text, or at the end if the choice wrote none and called no tool: as not streamed)."""
        return self.open(index) + b'"role":"assistant","content":null' + _OPEN

    def finish(self, index: int, reason: str) -> bytes:
        """The last chunk of a choice: an empty delta and its ``finish_reason``."""
        return self.open(index) + b'},"logprobs":null,"finish_reason":"' + reason.encode() + b'"}]}\n\n'

    def usage(self, usage: dict[str, Any]) -> bytes:
        """The ``include_usage`` chunk: no choices, the usage of the whole request."""
        return self._usage_head + b'],"usage":' + orjson.dumps(usage) + b"}\n\n"

    def obfuscate(self, data: bytes) -> bytes:
        """``data`` (whole chunk frames) with an ``obfuscation`` field in each chunk when asked, padding the
        frame to a multiple of OBFUSCATION_BLOCK bytes (an error chunk is left as it is)."""
        if not self.obfuscated or not data:
            return data
        frames = data.split(b"\n\n")[:-1]  # a frame's JSON holds no raw newline
        return b"".join([frame + b"\n\n" if frame.startswith(_ERROR) else _padded(frame) for frame in frames])

    @staticmethod
    def error(error: APIError) -> bytes:
        """An error once the stream has started (the ``openai`` SDK raises it as an APIError)."""
        return b"data: " + orjson.dumps(error.to_dict()) + b"\n\n"


_ERROR = b'data: {"error"'
_FIELD = len(b',"obfuscation":""\n\n')


def _padded(frame: bytes) -> bytes:
    """A chunk frame (without its blank line) with an ``obfuscation`` field making it a multiple of
    OBFUSCATION_BLOCK bytes long (at least one character of noise)."""
    pad = -(len(frame) + _FIELD) % OBFUSCATION_BLOCK or OBFUSCATION_BLOCK
    return frame[:-1] + b',"obfuscation":"' + obfuscation_noise(pad) + b'"}\n\n'


def _entries_json(logprobs: Sequence[Any]) -> bytes:
    """A text delta's logprobs as chat's ``ChatCompletionTokenLogprob`` entries (the same keys: token, bytes,
    logprob, top_logprobs), comma-joined: the JSON the Responses side holds (``LogprobsJSON``) as is."""
    if isinstance(logprobs, LogprobsJSON):
        return b",".join(logprobs.parts)
    entries = [
        {
            "token": lp.token,
            "bytes": getattr(lp, "bytes", None),
            "logprob": lp.logprob,
            "top_logprobs": [
                {"token": t.token, "bytes": getattr(t, "bytes", None), "logprob": t.logprob}
                for t in (lp.top_logprobs or ())
            ],
        }
        for lp in logprobs
    ]
    return orjson.dumps(entries)[1:-1]


class ChatChoice(EventWriter):
    """One choice of a chat completion, fed the typed events of its generation.

    ``frames`` given (streaming): :meth:`feed` returns the SSE bytes of each step. Without
    it, the choice keeps its text and calls for :meth:`choice_json`. ``on_stop`` is called
    once when a stop string ends the text (the caller stops the generation; its
    ``response.failed`` then ends this choice with ``finish_reason: stop``).
    """

    def __init__(
        self,
        index: int,
        frames: ChunkFrames | None,
        *,
        stop: Sequence[str] = (),
        logprobs: bool = False,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.index = index
        self._frames = frames
        self._open = frames.open(index) if frames is not None else b""
        self._content_head = self._open + b'"content":'
        self._matcher = StopMatcher(stop) if stop else None
        self._plain = frames is not None and not stop  # the per-token fast path applies
        self._logprobs = logprobs
        self._on_stop = on_stop
        self._pending_logprobs: list[bytes] = []  # entries' JSON held back with their text (stop strings)
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []
        self._arguments: list[list[str]] = []
        #: Not streamed: the ``logprobs.content`` entries so far, as JSON (each piece a delta's entries, comma-joined).
        self.token_logprobs: list[bytes] = []
        self.stopped = False  # a stop string ended the text
        self.wrote_text = False  # a content chunk was written (streaming)
        self.finish_reason: str | None = None
        self.usage: ResponseUsage | None = None
        self.error: ServerError | None = None  # the generation failed

    def feed(self, events: list[ResponseStreamEvent]) -> bytes:
        """Read one engine step's events; the chunks they make (streaming), else ``b""``."""
        if self._plain and len(events) == 1:
            event = events[0]
            if type(event) is ResponseTextDeltaEvent:  # the common step: one token of text
                self.wrote_text = True
                return self._content_head + json_string(event.delta) + _OPEN
        out = b""
        for event in events:
            out += self._event(event)
        return out

    def _event(self, event: Any) -> bytes:
        kind = type(event)
        if isinstance(event, ResponseTextDeltaEvent):  # with logprobs: a subclass
            if self.stopped:
                return b""
            logprobs = _entries_json(event.logprobs) if self._logprobs and event.logprobs else None
            return self._content(event.delta, logprobs)
        if self.stopped and kind not in _TERMINAL:
            return b""
        if kind is ResponseReasoningTextDeltaEvent:
            return self._reasoning(event.delta)
        if kind is ResponseFunctionCallArgumentsDeltaEvent:
            return self._call_arguments(event.delta)
        if kind is ResponseOutputItemAddedEvent and event.item.type == "function_call":
            return self._call_started(event.item.call_id, event.item.name)
        if kind is ResponseCompletedEvent:
            return self._finish("tool_calls" if self.tool_calls else "stop", event.response.usage)
        if kind is ResponseIncompleteEvent:
            return self._finish("length", event.response.usage)
        if kind is ResponseFailedEvent:
            if self.stopped:
                return self._finish("stop", event.response.usage)
            self.usage = event.response.usage
            self.error = generation_failure(event.response)
            return self._flush()
        return b""

    # -- deltas ------------------------------------------------------------------------------

    def _content(self, text: str, logprobs: bytes | None) -> bytes:
        """Text (and its logprob entries' JSON, comma-joined) as a content chunk, or kept (non-streaming)."""
        if self._matcher is not None:
            text, stopped = self._matcher.feed(text)
            if logprobs:
                self._pending_logprobs.append(logprobs)
                logprobs = None
            if text and self._pending_logprobs:
                logprobs, self._pending_logprobs = b",".join(self._pending_logprobs), []
            if stopped:
                self.stopped = True
                if self._on_stop is not None:
                    self._on_stop()
            if not text:
                return b""
        if self._frames is None:
            self.content.append(text)
            if logprobs:  # kept as JSON: ~70 bytes an entry, not a dict each (issue 30)
                self.token_logprobs.append(logprobs)
            return b""
        self.wrote_text = True
        if logprobs is None:
            return self._content_head + json_string(text) + _OPEN
        return (
            self._content_head
            + json_string(text)
            + b'},"logprobs":{"content":['
            + logprobs
            + b'],"refusal":null},"finish_reason":null}]}\n\n'
        )

    def _reasoning(self, text: str) -> bytes:
        if self._frames is None:
            self.reasoning.append(text)
            return b""
        quoted = json_string(text)
        return self._open + b'"reasoning_content":' + quoted + b',"reasoning":' + quoted + _OPEN

    def _call_started(self, call_id: str, name: str) -> bytes:
        index = len(self.tool_calls)
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        self.tool_calls.append(call)
        self._arguments.append([])
        if self._frames is None:
            return b""
        return self._open + b'"tool_calls":[' + orjson.dumps({"index": index, **call}) + b"]" + _OPEN

    def _call_arguments(self, text: str) -> bytes:
        if not self.tool_calls:
            return b""
        index = len(self.tool_calls) - 1
        if self._frames is None:
            self._arguments[index].append(text)
            return b""
        return (
            self._open
            + b'"tool_calls":[{"index":%d,"function":{"arguments":' % index
            + json_string(text)
            + b"}}]"
            + _OPEN
        )

    # -- the end -----------------------------------------------------------------------------

    def _flush(self) -> bytes:
        """Text held back for stop strings, once the text has ended without one."""
        if self._matcher is None or self.stopped:
            return b""
        held = self._matcher.flush()
        if not held:
            return b""
        self._matcher = None
        logprobs = b",".join(self._pending_logprobs) or None
        self._pending_logprobs = []
        return self._content(held, logprobs)

    def _finish(self, reason: str, usage: ResponseUsage | None) -> bytes:
        out = self._flush()
        self.finish_reason = reason
        self.usage = usage
        if self._frames is None:
            return out
        if not self.wrote_text and not self.tool_calls:  # content "" as not streamed (null: tool calls only)
            out += self._content_head + b'""' + _OPEN
        return out + self._frames.finish(self.index, reason)

    def choice_json(self) -> dict[str, Any]:
        """This choice as ``ChatCompletion.choices[i]`` (non-streaming), for ``orjson.dumps`` (its logprobs are
        an ``orjson.Fragment``)."""
        for call, parts in zip(self.tool_calls, self._arguments, strict=True):
            call["function"]["arguments"] = "".join(parts)
        content = "".join(self.content)
        reasoning = "".join(self.reasoning) or None
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content if content or not self.tool_calls else None,
            "refusal": None,
            "annotations": [],
            "reasoning_content": reasoning,
            "reasoning": reasoning,
        }
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return {
            "index": self.index,
            "message": message,
            "logprobs": {"content": self.logprobs_json(), "refusal": None} if self._logprobs else None,
            "finish_reason": self.finish_reason,
        }

    def logprobs_json(self) -> orjson.Fragment:
        """``logprobs.content`` (non-streaming): the JSON kept per delta, joined once (orjson writes it as is)."""
        return orjson.Fragment(b"[" + b",".join(self.token_logprobs) + b"]")


_TERMINAL = frozenset({ResponseCompletedEvent, ResponseIncompleteEvent, ResponseFailedEvent})
