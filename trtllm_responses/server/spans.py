"""The spans of the requests a client sends: one per HTTP request, one per WebSocket connection and turn.

docs/tracing-and-dashboards.md#spans. Each HTTP request is one span of kind server, named
``"{method} {route}"`` (the route's template, ``http.route``), continuing the client's ``traceparent``;
what is known only once it was answered (the tenant, the response's id and session, the status, the
transport) is set when it ends (:func:`end_request`), before the access-log line is written, which is
written while the span is current. A WebSocket connection is one such span for its handshake; each
``response.create`` turn is a span of its own (:func:`turn_span`): a child of the connection when the
client's handshake carried a ``traceparent`` (the client put the connection in its trace), else the root
of a trace of its own, linked to the connection (a connection lives up to an hour; OpenTelemetry links
the work done under a long-lived operation rather than growing one trace for the whole of it).

Tracing off (``tracing.enabled()`` false) builds nothing here: one module global read per request.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from starlette.types import Scope

from ..ops import AccessRecord, trace_attrs, tracing
from ..tenants import Tenant
from .operations import route_label

__all__ = ["continues_client", "end_request", "request_span", "socket_span", "turn_span"]

#: The API a path's requests belong to (``trtllm.api``), by the path's start.
_APIS = (
    ("/v1/chat/completions", "chat.completions"),
    ("/v1/messages", "messages"),
    ("/v1/responses", "responses"),
    ("/v1/conversations", "conversations"),
)


#: Polled by probes and scrapers (every second, for ever): no span unless the caller sent a ``traceparent``.
_POLLED = frozenset(("/health", "/metrics", "/stats"))
_UNTRACED: AbstractContextManager[tracing.SpanLike] = nullcontext(tracing.NULL_SPAN)


def _api(path: str) -> str | None:
    return next((api for start, api in _APIS if path.startswith(start)), None)


def _route(path: str) -> str | None:
    """The route template of ``path`` as far as it is known before routing (FastAPI's, once routed, wins)."""
    label = route_label(path)
    return None if label == "other" else label


def request_span(scope: Scope) -> AbstractContextManager[tracing.SpanLike]:
    """The span of one HTTP request (current inside the ``with``), continuing the client's trace."""
    if not tracing.enabled():
        return tracing.span("")  # the shared no-op
    method, path = scope["method"], scope["path"]
    if path in _POLLED and not continues_client(scope):
        return _UNTRACED
    route = _route(path)
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.HTTP_METHOD: method,
        trace_attrs.URL_PATH: path,
    }
    if route is not None:
        attributes[trace_attrs.HTTP_ROUTE] = route
    api = _api(path)
    if api is not None:
        attributes[trace_attrs.API] = api
    name = f"{method} {route}" if route is not None else method
    return tracing.server_span(name, scope["headers"], attributes)


def end_request(live: tracing.SpanLike, scope: Scope, record: AccessRecord, streamed: bool | None) -> None:
    """What the answer said, on the request's span: status (an error from 500 up; ``error.type`` from 400,
    the HTTP conventions' rule for a server span), request id, tenant, response and session, transport
    (``streamed``: None for a route that does not generate)."""
    if not live.is_recording():
        return
    routed = scope.get("route")
    template = getattr(routed, "path", None)
    if isinstance(template, str):  # FastAPI's own template: /v1/responses/{response_id}
        live.set_attribute(trace_attrs.HTTP_ROUTE, template)
        tracing.rename(live, f"{scope['method']} {template}")
    status = record.status
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.HTTP_STATUS: status,
        trace_attrs.REQUEST_ID: record.request_id,
    }
    if record.tenant is not None:
        attributes[trace_attrs.TENANT] = record.tenant
    if record.response_id is not None:
        attributes[trace_attrs.RESPONSE_ID] = record.response_id
    if record.session_id is not None:
        attributes[trace_attrs.SESSION_ID] = record.session_id
    if streamed is not None:
        attributes[trace_attrs.TRANSPORT] = "sse" if streamed else "json"
    live.set_attributes(attributes)
    if status >= 500:
        tracing.fail(live, f"HTTP {status}", error_type=str(status))
    elif status >= 400:
        live.set_attribute(trace_attrs.ERROR_TYPE, str(status))


def socket_span(scope: Scope, tenant: Tenant) -> AbstractContextManager[tracing.SpanLike]:
    """The span of one WebSocket connection on ``/v1/responses`` (its handshake's ``traceparent`` continued)."""
    if not tracing.enabled():
        return tracing.span("")
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.HTTP_METHOD: "GET",
        trace_attrs.HTTP_ROUTE: scope["path"],
        trace_attrs.URL_PATH: scope["path"],
        trace_attrs.API: "responses",
        trace_attrs.TRANSPORT: "websocket",
        trace_attrs.TENANT: tenant.name,
    }
    return tracing.server_span(f"GET {scope['path']}", scope.get("headers") or (), attributes)


def continues_client(scope: Scope) -> bool:
    """Whether the handshake carried the client's ``traceparent`` (its turns are then children of it)."""
    return any(name == b"traceparent" for name, _ in scope.get("headers") or ())


def turn_span(
    connection: tracing.SpanLike, child: bool, tenant: Tenant
) -> AbstractContextManager[tracing.SpanLike]:
    """The span of one ``response.create`` turn of a connection: a child of ``connection`` when ``child``
    (the client traced the connection), else a trace of its own linked to it (the module docstring)."""
    if not tracing.enabled():
        return tracing.span("")
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.API: "responses",
        trace_attrs.TRANSPORT: "websocket",
        trace_attrs.TENANT: tenant.name,
    }
    if child:
        return tracing.span("response.create", attributes, kind="server")
    return tracing.linked_span("response.create", connection, attributes)
