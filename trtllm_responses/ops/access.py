"""What a user debugging a client needs: a request id on every response, one access-log line per request.

``x-request-id``: the client's own (printable ASCII, at most 128 characters) when it sent
one, else a fresh ``req_…``; echoed on every response, errors and streams included.

One line per request on the ``trtllm_responses.access`` logger at info, written when the
response has been sent: method, path, status, request id, the tenant's name, and for ``POST /v1/responses``
the response id, its session key (checked: ``request/affinity.py``), input/output/cached tokens,
duration and first-token latency. Nothing else a client sent (headers, keys, bodies) is logged
beyond the path. The same fields ride on the record as typed values (``log_format.ACCESS_FIELDS``) for
``--log_format json`` (docs/tracing-and-dashboards.md#json-logs); the text line's path has its spaces and
unprintable characters (newlines, controls) percent-encoded, so no path can split the line or forge a field.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from starlette.types import Message, Scope, Send

from ..core import new_id
from .log_format import ACCESS_FIELDS, TRACE_IDS

__all__ = ["REQUEST_ID_HEADER", "AccessRecord", "request_id_of"]

logger = logging.getLogger("trtllm_responses.access")

REQUEST_ID_HEADER = "x-request-id"
_HEADER_BYTES = REQUEST_ID_HEADER.encode()
_MAX_ID = 128


def request_id_of(scope: Scope) -> str:
    """The client's ``x-request-id`` if it is a sane one, else a fresh id."""
    for name, value in scope.get("headers") or ():
        if name == _HEADER_BYTES:
            if 0 < len(value) <= _MAX_ID and all(0x21 <= b <= 0x7E for b in value):
                return value.decode("ascii")
            break
    return new_id("req")


@dataclass(slots=True)
class AccessRecord:
    """One request, as its access-log line reports it."""

    method: str
    path: str
    request_id: str
    started: float
    status: int = 0
    response_id: str | None = None
    session_id: str | None = None  # the response's session key, returned as x-session-id
    tenant: str | None = None  # the tenant's name (docs/tenants.md), never its key
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    first_token: float | None = None  # perf_counter of the executor's first token
    #: (trace_id, span_id) of the request's server span, set by whoever opens it: the line carries them even
    #: when written outside that span (None: the span current when the line is written, if any).
    trace_ids: tuple[str, str] | None = None
    duration_ms: float | None = None  # as the line says, once written
    first_token_ms: float | None = None

    @classmethod
    def start(cls, scope: Scope) -> AccessRecord:
        """A record for the request of ``scope``, its id chosen now."""
        return cls(scope["method"], scope["path"], request_id_of(scope), time.perf_counter())

    def header(self) -> tuple[bytes, bytes]:
        """The ``x-request-id`` response header."""
        return (_HEADER_BYTES, self.request_id.encode("ascii"))

    def wrap(self, send: Send) -> Send:
        """``send`` that adds the request id header and notes the status (for non-streaming routes)."""

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), self.header()]}
            await send(message)

        return send_with_id

    def log(self) -> None:
        """Write the access-log line (its fields on the record too: ``fields``)."""
        if not logger.isEnabledFor(logging.INFO):
            return
        elapsed = (time.perf_counter() - self.started) * 1000
        first_token = None if self.first_token is None else (self.first_token - self.started) * 1000
        parts = [f"{self.method} {printable(self.path)} {self.status}", f"request_id={self.request_id}"]
        if self.tenant is not None:
            parts.append(f"tenant={self.tenant}")
        if self.response_id is not None:
            parts.append(f"response_id={self.response_id}")
        if self.session_id is not None:
            parts.append(f"session_id={self.session_id}")
        if self.input_tokens is not None:
            parts.append(
                f"input_tokens={self.input_tokens} output_tokens={self.output_tokens} "
                f"cached_tokens={self.cached_tokens}"
            )
        parts.append(f"duration_ms={elapsed:.1f}")
        if first_token is not None:
            parts.append(f"first_token_ms={first_token:.1f}")
        self.duration_ms, self.first_token_ms = elapsed, first_token
        extra: dict[str, Any] = {ACCESS_FIELDS: self}  # its fields() made only by a formatter that wants them
        if self.trace_ids is not None:
            extra[TRACE_IDS] = self.trace_ids
        logger.info(" ".join(parts), extra=extra)

    def fields(self) -> dict[str, Any]:
        """The logged line's fields as typed values, those it leaves out (None) left out; milliseconds to 0.1."""
        elapsed, first_token = self.duration_ms, self.first_token_ms
        fields: dict[str, Any] = {
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "request_id": self.request_id,
            "tenant": self.tenant,
            "response_id": self.response_id,
            "session_id": self.session_id,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "duration_ms": None if elapsed is None else round(elapsed, 1),
            "first_token_ms": None if first_token is None else round(first_token, 1),
        }
        return {key: value for key, value in fields.items() if value is not None}


def printable(text: str) -> str:
    """``text`` with each space and unprintable character (controls, line and paragraph separators) as
    its UTF-8 bytes percent-encoded: a path in the text line stays one field of one line."""
    if " " not in text and text.isprintable():
        return text
    return "".join(
        char
        if char != " " and char.isprintable()
        else "".join(f"%{b:02X}" for b in char.encode("utf-8", "surrogatepass"))
        for char in text
    )
