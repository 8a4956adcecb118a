"""What ``trtllm-responses bench`` reads on the wire of each API it loads (``--api``).

A :class:`Wire` names the path, builds the request body, and says which bytes of a
stream are deltas (counted as they arrive, without parsing), where the terminal part
of a stream begins and how many output tokens it (or a non-streaming body) reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["CHAT", "MESSAGES", "RESPONSES", "WIRES", "Wire"]


@dataclass(frozen=True)
class Wire:
    """One API as the load generator sees it."""

    path: str  # under /v1
    deltas: tuple[bytes, ...]  # markers of delta events, counted in the raw stream
    terminals: tuple[bytes, ...]  # where the stream's end begins (its usage or its failure)

    def body(
        self, prompt: str, stream: bool, store: bool, max_tokens: int | None, model: str
    ) -> dict[str, Any]:
        """The request body."""
        if self is CHAT:
            body: dict[str, Any] = {
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
                "stream": stream,
            }
            if stream:
                body["stream_options"] = {"include_usage": True}
            if max_tokens:
                body["max_completion_tokens"] = max_tokens
            return body
        if self is MESSAGES:  # thinking shown, as Responses streams reasoning text
            return {
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens or 1 << 20,
                "thinking": {"type": "adaptive"},
                "stream": stream,
            }
        body = {"model": model, "input": prompt, "stream": stream, "store": store}
        if max_tokens:
            body["max_output_tokens"] = max_tokens
        return body

    def terminal(self, frame: bytes) -> tuple[int, str | None]:
        """Output tokens and error (None: it succeeded) of a stream's end, from its terminal marker on."""
        if self is CHAT:
            if frame.startswith(b'data: {"error"'):
                error = json.loads(frame[6 : frame.index(b"\n\n")])["error"]
                return 0, f"error chunk: {error.get('message')}"
            usage = json.loads(frame[len(CHAT.terminals[0]) : frame.index(b"\n\n") - 1])
            return usage.get("completion_tokens", 0), None
        if self is MESSAGES:
            data = json.loads(frame.split(b"\ndata: ", 1)[1].split(b"\n\n", 1)[0])
            if data["type"] == "error":
                return 0, f"error event: {data['error'].get('message')}"
            return data["usage"].get("output_tokens", 0), None
        response = json.loads(frame.split(b"\ndata: ", 1)[1].split(b"\n\n", 1)[0])["response"]
        tokens = (response.get("usage") or {}).get("output_tokens", 0)
        if response.get("status") in ("completed", "incomplete"):
            return tokens, None
        return tokens, f"status {response.get('status')}: {(response.get('error') or {}).get('message')}"

    def plain(self, body: bytes) -> tuple[int, str | None]:
        """Output tokens and error (None: it succeeded) of a non-streaming answer with HTTP 200 (a Responses
        answer says its failure in ``status``: a ``failed`` response is an error, not a result)."""
        answer = json.loads(body)
        usage = answer.get("usage") or {}
        tokens = usage.get("completion_tokens" if self is CHAT else "output_tokens", 0)
        if self is RESPONSES and answer.get("status") not in ("completed", "incomplete"):
            return tokens, f"status {answer.get('status')}: {(answer.get('error') or {}).get('message')}"
        return tokens, None


RESPONSES = Wire(
    "/responses",
    (
        b"event: response.output_text.delta\n",
        b"event: response.reasoning_text.delta\n",
        b"event: response.function_call_arguments.delta\n",
    ),
    (b"event: response.completed\n", b"event: response.incomplete\n", b"event: response.failed\n"),
)
CHAT = Wire(
    "/chat/completions",
    (b'"delta":{"content"', b'"delta":{"reasoning_content"', b'"delta":{"tool_calls"'),
    (b'"choices":[],"usage":', b'data: {"error"'),
)
MESSAGES = Wire(
    "/messages",
    (
        b'"delta":{"type":"text_delta"',
        b'"delta":{"type":"thinking_delta"',
        b'"delta":{"type":"input_json_delta"',
    ),
    (b"event: message_delta\n", b"event: error\n"),
)
WIRES = {"responses": RESPONSES, "chat": CHAT, "messages": MESSAGES}
