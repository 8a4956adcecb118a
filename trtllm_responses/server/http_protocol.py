"""uvicorn's httptools protocol with the limits uvicorn lacks, and the uvicorn Config that uses it.

uvicorn bounds neither the size nor the arrival time of a request head, and answers in plain text.
``GuardedHttpToolsProtocol`` adds, per connection, the limits of
:class:`~.http_limits.HTTPLimits` (head and body deadlines, head size and header count, the
connection caps), each answered in the OpenAI error envelope and closing the connection, as is any
request httptools cannot parse. What each limit does: docs/limits.md#http-limits.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, ClassVar

import httptools
import orjson
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ..core import (
    APIError,
    HeadersTooLargeError,
    InvalidRequestError,
    OverloadedError,
    RequestTimeoutError,
    URLTooLongError,
)
from .http_limits import HTTPLimits
from .websocket_drain import draining_websocket_protocol

__all__ = ["GuardedHttpToolsProtocol", "protocol_class", "uvicorn_config"]


class _Rejected(Exception):
    """Raised inside a parser callback to stop parsing; the error to send is on the protocol."""


def _seconds(value: float) -> str:
    return "1 second" if value == 1 else f"{value:g} seconds"


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with head/body deadlines, head size and count limits, and enveloped errors."""

    limits: ClassVar[HTTPLimits] = HTTPLimits()
    #: Open transports by client address (one table per server: ``protocol_class`` makes a class per server).
    #: A transport is dropped when its connection ends (weakly held) or is seen closing (a WebSocket that
    #: took the transport over ends without this protocol hearing of it).
    clients: ClassVar[dict[str, weakref.WeakSet[asyncio.BaseTransport]]] = {}
    #: The table's size at which addresses with nothing open are next forgotten (doubles past what a sweep
    #: keeps, so a table of live addresses is not rescanned for every new one).
    sweep_at: ClassVar[int] = 1024
    refused_clients: ClassVar[int] = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._in_head = False  # a request head has begun and is not complete
        self._receiving_body = False  # a request head is complete and its body is not
        self._head_bytes = 0  # raw bytes received while a head was incomplete
        self._head_size = 0  # URL and header bytes seen by the parser
        self._header_count = 0
        self._rejection: APIError | None = None

    # --- deadlines -----------------------------------------------------------------------------------

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._deadline_passed)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        limits = self.limits
        if self._receiving_body:
            if self.pipeline:  # queued behind a response still being written; reading is paused
                self._arm(limits.timeout_request_body)
                return
            cycle = self.cycle
            if cycle.response_started:
                self.transport.close()
                return
            # The app is waiting for the body: it sees a disconnect, its later sends are dropped.
            cycle.disconnected = True
            cycle.message_event.set()
            self._send_error(
                RequestTimeoutError(
                    f"The request body was not received within {_seconds(limits.timeout_request_body)}."
                )
            )
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm(limits.timeout_request_head)  # an earlier response is still being written
            return
        self._send_error(
            RequestTimeoutError(
                f"The request head was not received within {_seconds(limits.timeout_request_head)}."
            )
        )

    # --- the error envelope ----------------------------------------------------------------------------

    def _send_error(self, error: APIError) -> None:
        """Write ``error`` as a complete HTTP response (with the headers its class carries) and close the
        connection."""
        self._disarm()
        body = orjson.dumps(error.to_dict())
        head = [STATUS_LINE[error.status_code]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.append(
            b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n" % len(body)
        )
        for header, text in error.headers.items():
            head.extend([header.lower().encode(), b": ", text.encode(), b"\r\n"])
        head.append(b"\r\n")
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def _reject(self, error: APIError) -> None:
        """Stop parsing from inside a parser callback; ``data_received`` sends ``error``."""
        self._rejection = error
        raise _Rejected(error.message)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's plain-text 400, as an envelope."""
        self._send_error(InvalidRequestError("The request is not valid HTTP.", code="invalid_http"))

    # --- asyncio.Protocol -----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self._admit_client(transport):
            type(self).refused_clients += 1
            if self.refused_clients % 1000 == 1:  # one line per thousand: a flood must not flood the log
                self.logger.warning(
                    "Over --max_connections_per_client for %s: answering 503 (%d so far)",
                    self.client,
                    self.refused_clients,
                )
            self._send_error(
                OverloadedError(
                    f"This client has {self.limits.max_connections_per_client} connections open to the server, "
                    "its limit; close some or retry later.",
                    code="too_many_connections",
                )
            )
            return
        self._arm(self.limits.timeout_request_head)

    def _admit_client(self, transport: asyncio.Transport) -> bool:
        """Count this connection against its client address; False if that address is at its limit."""
        limit = self.limits.max_connections_per_client
        if not limit or not self.client:
            return True
        clients = self.clients
        held = clients.get(self.client[0])
        if held is None:
            if len(clients) >= self.sweep_at:  # forget addresses with nothing open (amortized: see sweep_at)
                for address in [a for a, ts in clients.items() if all(t.is_closing() for t in ts)]:
                    del clients[address]
                type(self).sweep_at = max(1024, 2 * len(clients))
            held = clients[self.client[0]] = weakref.WeakSet()
        if len(held) >= limit:
            for closing in [t for t in held if t.is_closing()]:
                held.discard(closing)
            if len(held) >= limit:
                return False
        held.add(transport)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._in_head or not self._receiving_body:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._disarm()  # the WebSocket protocol takes the connection over
            self._receiving_body = False
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as exc:
            if self._rejection is not None:
                error, self._rejection = self._rejection, None
            else:
                self.logger.debug("Invalid HTTP request: %s", exc)
                error = InvalidRequestError(f"The request is not valid HTTP: {exc}.", code="invalid_http")
            self._send_error(error)
            return
        if (
            self._in_head
            and self._head_bytes > self.limits.max_head_bytes
            and not self.transport.is_closing()
        ):
            self._send_error(self._head_too_large())

    # --- parser callbacks -----------------------------------------------------------------------------

    def _head_too_large(self) -> APIError:
        limit = self.limits.max_head_bytes
        return HeadersTooLargeError(
            f"The request line and headers are larger than {limit} bytes.", code="headers_too_large"
        )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_size = 0
        self._header_count = 0
        if self._deadline is None:
            self._arm(self.limits.timeout_request_head)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._head_size += len(url)
        if len(self.url) > self.limits.max_head_bytes:
            self._reject(
                URLTooLongError(
                    f"The URL is longer than {self.limits.max_head_bytes} bytes.", code="url_too_long"
                )
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_header_count:
            self._reject(
                HeadersTooLargeError(
                    f"The request has more than {self.limits.max_header_count} headers.",
                    code="too_many_headers",
                )
            )
        self._head_size += len(name) + len(value) + 4
        if self._head_size > self.limits.max_head_bytes:
            self._reject(self._head_too_large())
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        limit = self.limits.limit_concurrency
        # This connection is among self.connections; this request's task is not yet among self.tasks.
        if len(self.connections) > limit or len(self.tasks) >= limit:
            self.logger.warning("Over --limit_concurrency %d: answering 503", limit)
            self._reject(
                OverloadedError(
                    "The server is at its connection limit; retry shortly.", code="server_overloaded"
                )
            )
        super().on_headers_complete()
        self._receiving_body = True
        self._arm(self.limits.timeout_request_body)

    def on_message_complete(self) -> None:
        self._receiving_body = False
        self._disarm()
        super().on_message_complete()


def protocol_class(limits: HTTPLimits) -> type[GuardedHttpToolsProtocol]:
    """The protocol class enforcing ``limits`` (uvicorn builds it with its own arguments)."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"limits": limits, "clients": {}, "sweep_at": 1024},
    )


#: Bytes a WebSocket message may hold beyond ``--max_input_bytes`` before the protocol closes the socket
#: (1009): up to it, the app answers an error event and the socket stays usable.
WS_MESSAGE_SLACK = 64 << 10


def uvicorn_config(
    app: Any, limits: HTTPLimits, drain_timeout: float = 35.0, **kwargs: Any
) -> uvicorn.Config:
    """A uvicorn Config serving ``app`` under ``limits``; ``kwargs`` are other uvicorn settings.

    WebSocket connections drain at shutdown (``websocket_drain.py``): in-flight responses end,
    then a 1012 close; ``drain_timeout`` seconds at most. A WebSocket message is bounded by the app's
    ``--max_input_bytes`` (plus WS_MESSAGE_SLACK): the ``websockets`` protocol refuses a longer one while
    reading it, counting decompressed bytes of a permessage-deflate message, so 8 KB on the wire cannot
    become 8 MB in the server.
    """
    service = getattr(app, "service", None)
    if service is not None and "ws_max_size" not in kwargs:
        kwargs["ws_max_size"] = service.max_input_bytes + WS_MESSAGE_SLACK
    return uvicorn.Config(
        app,
        http=protocol_class(limits),
        ws=draining_websocket_protocol(drain_timeout),
        timeout_keep_alive=limits.timeout_keep_alive,  # type: ignore[arg-type]  # a float works (call_later)
        **kwargs,
    )
