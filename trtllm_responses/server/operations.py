"""What an operator needs: API-key checks, route labels for metrics, ``/metrics``, graceful shutdown.

- ``--api_key`` or ``--tenants``: ``Authorization: Bearer KEY`` (or Anthropic's ``x-api-key: KEY``) naming a
  tenant is required on ``/v1/*`` (``/health`` and ``/metrics`` stay open for probes and scrapers; ``/stats``
  needs an admin tenant's key); keys are never logged or echoed (``tenants/directory.py``).
- :class:`GracefulShutdown`: on SIGTERM, running responses (streams and background
  ones) get ``--shutdown_timeout`` seconds to finish; then each is aborted in the
  executor, so it ends with a terminal event (``response.failed``, status
  ``failed``) before its connection closes.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable

from starlette.types import Scope

from ..core import AuthenticationError, ServiceUnavailableError
from ..responses import ResponsesService
from ..tenants import Tenant

__all__ = [
    "CLIENT_CLOSED",
    "TENANT",
    "GracefulShutdown",
    "metrics_text",
    "stored_bytes",
    "route_label",
    "tenant_of",
    "unauthorized",
]

logger = logging.getLogger(__name__)

#: The status recorded for a request whose client left before any response (nginx's convention).
CLIENT_CLOSED = 499

_ROUTES = [
    (re.compile(r"^/v1/responses/[^/]+/input_items$"), "/v1/responses/{id}/input_items"),
    (re.compile(r"^/v1/responses/[^/]+/cancel$"), "/v1/responses/{id}/cancel"),
    (re.compile(r"^/v1/responses/[^/]+$"), "/v1/responses/{id}"),
    (re.compile(r"^/v1/conversations/[^/]+/items/[^/]+$"), "/v1/conversations/{id}/items/{item_id}"),
    (re.compile(r"^/v1/conversations/[^/]+/items$"), "/v1/conversations/{id}/items"),
    (re.compile(r"^/v1/conversations/[^/]+$"), "/v1/conversations/{id}"),
]
_KNOWN = {
    "/v1/responses",
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/conversations",
    "/v1/models",
    "/health",
    "/metrics",
    "/stats",
    "/openapi.json",
}


def route_label(path: str) -> str:
    """The route template of ``path`` (ids folded), so labels stay few; ``other`` for unknown paths."""
    if path in _KNOWN:
        return path
    for pattern, label in _ROUTES:
        if pattern.match(path):
            return label
    return "other"


#: The ASGI scope's key for the tenant the request's key names (set by the app before any route runs).
TENANT = "trtllm_responses.tenant"


def tenant_of(scope: Scope) -> Tenant:
    """The tenant of a request the app has let in (``router.ResponsesApp``); KeyError if it never was."""
    return scope[TENANT]  # type: ignore[no-any-return]


def unauthorized(scope: Scope) -> AuthenticationError:
    """The 401 for a request without a valid key (the key itself is never echoed)."""
    has_header = any(name in (b"authorization", b"x-api-key") for name, _ in scope["headers"])
    if has_header:
        return AuthenticationError("Incorrect API key provided.")
    return AuthenticationError(
        "You didn't provide an API key. Send it in the Authorization header: 'Authorization: Bearer KEY'."
    )


async def stored_bytes(service: ResponsesService, tenants: Iterable[Tenant]) -> dict[str, int]:
    """The bytes each of a file's ``tenants`` stores (``ResponseStore.scope_bytes``: one small read each;
    the open and one-key tenants, whose ids have no scope, are not counted)."""
    return {t.name: await service.store.scope_bytes(t.scope) for t in tenants if t.scope}


async def metrics_text(service: ResponsesService, tenants: Iterable[Tenant] = ()) -> tuple[bytes, str]:
    """The Prometheus exposition of this server (gauges read now: the store's, and what ``tenants`` store),
    and its content type."""
    metrics = service.metrics
    metrics.sessions.engine(service.executor.engine_load())
    metrics.frontend.engine(service.executor.healthy())
    metrics.frontend.engines(service.executor.engines_health())
    metrics.frontend.held_contexts(service.executor.held_contexts())
    try:
        stats = await service.store.stats()
        stored = await stored_bytes(service, tenants)
    except ServiceUnavailableError:
        metrics.record_store_error()
    else:
        metrics.store_responses.set(stats.responses)
        metrics.store_bytes.set(stats.bytes)
        metrics.store_evictions.set(stats.evictions)
        for name, nbytes in stored.items():
            metrics.tenants.stored_bytes.labels(name).set(nbytes)
    return metrics.exposition()


class GracefulShutdown:
    """Lets running responses finish for ``timeout`` seconds after SIGTERM, then ends the rest."""

    def __init__(self, service: ResponsesService, timeout: float) -> None:
        self.service = service
        self.runs = service.runs
        self.timeout = timeout
        self.loop: asyncio.AbstractEventLoop | None = None
        self.deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called at startup with the server's loop."""
        self.loop = loop

    def begin(self) -> None:
        """SIGTERM arrived (callable from a signal handler): start the countdown."""
        if self.loop is not None and self.deadline is None:
            self.loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        assert self.loop is not None
        if self.deadline is not None:
            return
        running = len(self.runs.live) + self.runs.active
        logger.info("Shutting down: %d running response(s) get %.1f s to finish", running, self.timeout)
        self.deadline = self.loop.time() + self.timeout
        self._timer = self.loop.call_later(self.timeout, self.abort_all)

    def abort_all(self) -> None:
        """End every running response now: each run is aborted and ends with a terminal event (one that
        the executor had not registered yet is aborted by its run at its first delta: no retry loop)."""
        ended = self.service.abort_all()  # background ones not started yet too
        if ended:
            logger.warning("Shutdown timeout: ended %d running response(s)", ended)

    async def drain(self) -> None:
        """At lifespan shutdown: let background responses run to the deadline, then end them."""
        if self.deadline is not None and self.loop is not None:
            await self.runs.wait(max(0.0, self.deadline - self.loop.time()))
        if self._timer is not None:
            self._timer.cancel()
        self.abort_all()
        await self.runs.wait(5)
