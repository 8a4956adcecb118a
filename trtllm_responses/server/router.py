"""ResponsesApp: the ASGI app, and the table of the routes it serves itself.

The routes that generate (``POST /v1/responses``, ``/v1/chat/completions``, ``/v1/messages``) are
the per-token hot path: served from :func:`api_routes` here, each write of their streams goes straight
to the server's ``send``. Every other path, the lifespan and the framework's error handlers are a
FastAPI app inside (``app.create_app``). Around every HTTP request, once: the access record and the
request counter, and the tenant its key names (``scope[TENANT]``, docs/tenants.md); on ``/v1/*`` a
request without a tenant's key is a 401 (in Anthropic's envelope for an Anthropic client).
A route of the table answers a method it does not serve with a 405 (``Allow``), its errors in its
own envelope, and its runs' usage into the access record once the answer is written. Every answer on
``/v1/*`` to a tenant with rate limits carries them (``x-ratelimit-*``, or ``anthropic-ratelimit-*`` for an
Anthropic client; docs/tenants.md#limits), written here for every route.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ..core import APIError, MethodNotAllowedError, ServiceUnavailableError
from ..ops import AccessRecord
from ..responses import ResponsesService
from ..tenants import Quota, Tenant, TenantDirectory, limited
from .call import Call
from .config import ServerConfig
from .create import PATH, create_response
from .dialects import (
    CHAT_PATH,
    COUNT_TOKENS_PATH,
    MESSAGES_PATH,
    MessagesEdge,
    anthropic_error_response,
    create_chat_completion,
    no_messages_route,
    wants_anthropic,
)
from .errors import answer, error_response
from .operations import CLIENT_CLOSED, TENANT, route_label, unauthorized
from .spans import end_request, request_span
from .websocket import serve_websocket

__all__ = ["ResponsesApp", "Route", "api_routes"]

#: A route's handler: the answer to one request (an APIError it raises is answered in the route's envelope).
Handler = Callable[[Call], Awaitable[Response]]
#: An APIError as an HTTP answer, in an API's envelope.
Render = Callable[[APIError], Response]


@dataclass(frozen=True, slots=True)
class Route:
    """A path the app serves itself: its ``handler``, the ``methods`` it takes (None: any), the envelope of
    its errors (``render``); ``slash``: the path with trailing slashes is the same route; ``below``: every
    path that begins with ``path`` and that no other route names."""

    path: str
    handler: Handler
    methods: tuple[str, ...] | None = ("POST",)
    render: Render = error_response
    slash: bool = False
    below: bool = False

    async def serve(self, call: Call) -> Response:
        """The handler's answer, or the 405 of a method the route does not take."""
        method = call.scope["method"]
        if self.methods is not None and method not in self.methods:
            raise MethodNotAllowedError(method, self.path, self.methods)
        return await self.handler(call)


def api_routes(service: ResponsesService, config: ServerConfig) -> tuple[Route, ...]:
    """The routes the app serves itself (every other path is FastAPI's)."""
    messages = MessagesEdge(service, config.model_aliases)
    return (
        Route(PATH, functools.partial(create_response, service)),
        Route(CHAT_PATH, functools.partial(create_chat_completion, service)),
        Route(MESSAGES_PATH, messages.create, render=anthropic_error_response, slash=True),
        Route(COUNT_TOKENS_PATH, messages.count_tokens, render=anthropic_error_response, slash=True),
        Route(MESSAGES_PATH, no_messages_route, None, anthropic_error_response, below=True),
    )


class ResponsesApp:
    """The ASGI app: the routes of :func:`api_routes` here, everything else (and the lifespan) to FastAPI."""

    def __init__(
        self,
        api: FastAPI,
        service: ResponsesService,
        config: ServerConfig | None = None,
        tenants: TenantDirectory | None = None,
    ) -> None:
        self.api = api
        self.service = service
        self.config = config = config or ServerConfig()
        #: Who may ask, by key (reloaded on SIGHUP: ``reload_tenants``).
        self.tenants = tenants = tenants or config.tenant_directory()
        api.state.tenants = tenants
        self._requests = service.metrics.requests
        #: The routes of the table, by path (and those that take every path below theirs).
        self.routes = api_routes(service, config)
        self._exact = {route.path: route for route in self.routes if not route.below}
        self._below = [route for route in self.routes if route.below]

    @property
    def state(self):  # type: ignore[no-untyped-def]
        """The FastAPI app's state (``state.service``)."""
        return self.api.state

    def route(self, path: str) -> Route | None:
        """The route of the table serving ``path``; None: FastAPI's."""
        route = self._exact.get(path)
        if route is not None:
            return route
        route = self._exact.get(path.rstrip("/"))
        if route is not None and route.slash:
            return route
        return next((route for route in self._below if path.startswith(route.path)), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            tenant = self.tenants.identify(scope["headers"])
            if tenant is None:
                await send({"type": "websocket.close", "code": 1008})  # before accept: an HTTP 403
                return
            scope[TENANT] = tenant
            if scope["path"] == PATH:
                await serve_websocket(self.service, self.config, scope, receive, send, self.tenants)
                return
        if scope["type"] != "http":
            await self.api(scope, receive, send)
            return
        record = AccessRecord.start(scope)
        # The request's span is current until its access-log line is written (logs read its ids then).
        with request_span(scope) as live:
            call: list[Call] = []
            try:
                record.status = await self._http(scope, receive, send, record, call)
            finally:
                self._requests.labels(route_label(scope["path"]), scope["method"], str(record.status)).inc()
                end_request(live, scope, record, call[0].streamed if call else None)
                record.log()

    async def _http(
        self, scope: Scope, receive: Receive, send: Send, record: AccessRecord, served: list[Call]
    ) -> int:
        """Serve one HTTP request; its status (499: the client left before any answer). A route of the
        table puts its :class:`Call` in ``served``."""
        path = scope["path"]
        tenant = self._tenant(scope)
        if tenant is not None:
            scope[TENANT] = tenant
            record.tenant = tenant.name
        elif path.startswith("/v1/"):
            render = anthropic_error_response if wants_anthropic(scope) else error_response
            return await answer(_raising(unauthorized(scope)), scope, receive, send, record, path, render)
        rated = tenant is not None and limited(tenant.limits) and path.startswith("/v1/")
        route = self.route(path)
        if route is None:
            record.status = CLIENT_CLOSED  # until a response starts
            if rated:
                assert tenant is not None
                send = await self._with_rate_headers(scope, tenant, send)
            await self.api(scope, receive, record.wrap(send))
            return record.status
        call = Call(scope, receive, send, record)
        served.append(call)
        serve = functools.partial(route.serve, call)
        headers = functools.partial(self._rate_headers, call) if rated else None
        try:
            status = await answer(serve, scope, receive, send, record, path, route.render, headers)
        finally:
            call.done()
        call.account()
        return status

    async def _rate_headers(self, call: Call) -> list[tuple[bytes, bytes]]:
        """The rate-limit headers of a table route's answer: what the tenant had left at its turn's
        admission (or refusal), else now."""
        quota = call.quota or await self._quota(call.tenant)
        return quota.headers(anthropic=wants_anthropic(call.scope)) if quota is not None else []

    async def _quota(self, tenant: Tenant) -> Quota | None:
        """What ``tenant`` has left now; None if it has no rate limit or the store cannot say (its 503 is
        logged; the answer goes out without the headers)."""
        try:
            return await self.service.gate.quota(tenant)
        except ServiceUnavailableError:
            return None

    async def _with_rate_headers(self, scope: Scope, tenant: Tenant, send: Send) -> Send:
        """``send`` that adds the tenant's rate-limit headers (read now) to the answer's head."""
        quota = await self._quota(tenant)
        if quota is None:
            return send
        extra = quota.headers(anthropic=wants_anthropic(scope))

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        return sending

    def _tenant(self, scope: Scope) -> Tenant | None:
        """The tenant of the request's key (the open tenant when no key is asked); None: no valid key."""
        return self.tenants.identify(scope["headers"])


def _raising(error: APIError) -> Callable[[], Awaitable[Response]]:
    async def handler() -> Response:
        raise error

    return handler
