"""The one reader of a POST body, and the one size rule every POST route is read under.

A body is refused as early as its size shows it too large: on its declared ``Content-Length``
before any of it is read, else as soon as the bytes that arrived cross the limit (a chunked body
that never ends is answered while it is still arriving). The limit is a :class:`BodyLimit`: the
route's byte bound (413 ``request_too_large`` past it) and, on the routes that carry model input,
the service's ``--max_input_bytes`` (400 ``context_length_exceeded``): past both, the error of the
smaller one (the one a body read to its end meets first). The routes and their limits: :data:`MAX_BODY_BYTES` on those that carry model input
(``/v1/responses``, ``/v1/chat/completions``, ``/v1/messages``, ``input_tokens``, ``compact``),
:data:`MAX_CONVERSATION_BODY_BYTES` on the Conversations API's (items stored, not rendered).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from starlette.types import Receive

from ..core import RequestTooLargeError
from ..responses import ResponsesService
from .responses import ClientGone

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_CONVERSATION_BODY_BYTES",
    "BodyLimit",
    "model_input",
    "read_body",
]

#: Largest body of a POST carrying model input (a long conversation replayed statelessly fits easily).
MAX_BODY_BYTES = 64 << 20
#: Largest body of a Conversations API POST: items to store, which ``--max_input_bytes`` does not bound
#: (a conversation may outgrow one turn's window; its turns are checked when rendered).
MAX_CONVERSATION_BODY_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class BodyLimit:
    """What one route's body may weigh: ``max_bytes`` (413 past it) and, on a route that carries model
    input, the ``service``'s ``--max_input_bytes`` (its ``check_input_size``: 400 past it)."""

    max_bytes: int
    service: ResponsesService | None = None

    def check_size(self, size: int) -> None:
        """Raise if a body of ``size`` bytes (declared, or read so far) is too large: past the smaller
        bound, the error of that bound (what reading the body would meet first)."""
        service = self.service
        if service is not None and service.max_input_bytes < self.max_bytes:
            service.check_input_size(size)
            service = None
        if size > self.max_bytes:
            raise RequestTooLargeError(f"The request body is larger than {self.max_bytes >> 20} MiB.")
        if service is not None:
            service.check_input_size(size)


def model_input(service: ResponsesService) -> BodyLimit:
    """The limit of a POST that carries model input: :data:`MAX_BODY_BYTES` and ``--max_input_bytes``."""
    return BodyLimit(MAX_BODY_BYTES, service)


def _declared(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def read_body(receive: Receive, headers: Iterable[tuple[bytes, bytes]], limit: BodyLimit) -> bytes:
    """The body of a request (``receive`` its ASGI channel, ``headers`` its raw headers), read under
    ``limit``; raises :class:`ClientGone` if the client hangs up before it has all arrived."""
    declared = _declared(headers)
    if declared is not None:  # refused before any of it is read
        limit.check_size(declared)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone("the client went away while sending its request")
        chunk = message.get("body", b"")
        size += len(chunk)
        limit.check_size(size)  # refused early, before reading (and parsing) the rest
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
