"""What a user debugging a client needs: a request id on every response, one access-log line per request.

``x-request-id``: the client's own (printable ASCII, at most 128 characters) when it sent
one, else a fresh ``req_…``; echoed on every response, errors and streams included.

One line per request on the ``trtllm_responses.access`` logger at info, written when the
response has been sent: method, path, status, request id, the tenant's name, and for ``POST /v1/responses``
the response id, its session key (checked: ``request/affinity.py``), input/output/cached tokens,
duration and first-token latency. Nothing else a client sent (headers, keys, bodies) is logged
beyond the path.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from starlette.types import Message, Scope, Send

from ..core import new_id

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
        """Write the access-log line."""
        if not logger.isEnabledFor(logging.INFO):
            return
        elapsed = (time.perf_counter() - self.started) * 1000
        parts = [f"{self.method} {self.path} {self.status}", f"request_id={self.request_id}"]
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
        if self.first_token is not None:
            parts.append(f"first_token_ms={(self.first_token - self.started) * 1000:.1f}")
        logger.info(" ".join(parts))
