"""HTTPLimits: what one client connection may cost the server, named in one place.

Every limit has a safe default, a ``serve`` flag of the same name (``cli/command.py``)
and a test that crosses it (``tests/server/test_http_limits.py``). They are enforced by
``server.http_protocol.GuardedHttpToolsProtocol`` (uvicorn's httptools protocol with
deadlines and size checks added), except ``timeout_keep_alive``, which is
uvicorn's own. docs/limits.md#http-limits says what each one does and which limits
belong in a reverse proxy instead.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HTTPLimits"]


@dataclass(frozen=True, slots=True)
class HTTPLimits:
    """Per-connection HTTP limits (sizes in bytes, times in seconds)."""

    #: Request line plus headers. 32 KiB is nginx's default (4 x 8 KiB buffers); an OpenAI client sends
    #: well under 2 KiB. A longer URL alone is 414, a longer head 431.
    max_head_bytes: int = 32 << 10
    #: Header fields per request (Apache's LimitRequestFields). 431 when crossed.
    max_header_count: int = 100
    #: From connecting (or from the first byte of a keep-alive connection's next request) to the end of
    #: the request head. Slowloris clients are cut off here with 408.
    timeout_request_head: float = 10.0
    #: From the end of the head to the end of the body. 60 s carries a 64 MiB body at ~9 Mbit/s.
    timeout_request_body: float = 60.0
    #: An idle keep-alive connection is closed after this long (uvicorn's ``timeout_keep_alive``, whose own
    #: 5 s default raced httpx's 5 s pool: a client reused a connection as the server closed it). Longer than
    #: the idle time of every common client's pool (httpx and openai-python 5 s, Node's undici 4 s, aiohttp
    #: 15 s, nginx's upstream ``keepalive_timeout`` 60 s, Go's ``net/http`` 90 s), so the client closes first
    #: (docs/limits.md#http-limits).
    timeout_keep_alive: float = 120.0
    #: Open connections (or requests in flight) beyond which a new request gets 503 with Retry-After.
    limit_concurrency: int = 2048
    #: Open connections (HTTP or WebSocket) from one client address; one more is answered 503 and closed at
    #: once. Well under ``limit_concurrency``, so one client cannot take every slot (0: no limit; behind a
    #: reverse proxy every client has the proxy's address: raise it there, or let the proxy limit).
    max_connections_per_client: int = 256
