"""Exceptions → OpenAI error responses, mapped once for the whole app.

Every error a client sees has the envelope
``{"error": {"message", "type", "param", "code"}}`` and a fitting status:
our :class:`~trtllm_responses.core.errors.APIError` tree, Starlette's HTTP errors
(unknown route 404 ``unknown_url``; under ``/v1/`` a wrong method too, as OpenAI does; 405 elsewhere), FastAPI validation errors (400, never
422), and anything unexpected (500, logged with its traceback).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from ..core import (
    APIError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    ServerError,
    status_error,
)
from ..ops import AccessRecord
from ..request import SESSION_HEADER
from .operations import CLIENT_CLOSED
from .responses import JSONBytesResponse

__all__ = ["answer", "error_response", "install_error_handlers"]

_SESSION_HEADER = SESSION_HEADER.encode()

logger = logging.getLogger(__name__)


def error_response(error: APIError, headers: Mapping[str, str] | None = None) -> Response:
    """The HTTP response of an APIError: its status and the headers its class carries (a 405's ``Allow``),
    and ``headers`` (those of a framework's HTTP error)."""
    import orjson

    if error.headers:
        headers = {**error.headers, **(headers or {})}
    return JSONBytesResponse(orjson.dumps(error.to_dict()), status_code=error.status_code, headers=headers)


async def answer(
    handler: Callable[[], Awaitable[Response]],
    scope: Scope,
    receive: Receive,
    send: Send,
    record: AccessRecord,
    path: str,
    render: Callable[[APIError], Response] = error_response,
    headers: Callable[[], Awaitable[list[tuple[bytes, bytes]]]] | None = None,
) -> int:
    """Serve one request of a route outside FastAPI (the app's table, ``router.py``).

    ``handler`` builds the response; an APIError it raises becomes the error body (``render``: OpenAI's
    envelope unless the route says, e.g. Anthropic's), anything else a logged 500, and a client gone
    before it was answered (``ConnectionResetError``) is recorded as 499 with nothing sent. The response
    carries the request id, the session key when it was decided (``x-session-id``,
    docs/sessions-and-kv-cache.md#identity) and ``headers()`` (a tenant's rate limits); ``record``
    gets its status, which is returned.
    """
    response: Response
    try:
        response = await handler()
    except ConnectionResetError:
        record.status = CLIENT_CLOSED
        return CLIENT_CLOSED
    except APIError as exc:
        response = render(exc)
    except Exception:
        logger.exception("Unhandled error on POST %s", path)
        response = render(ServerError("The server had an error while processing your request."))
    response.raw_headers.append(record.header())
    if headers is not None:
        response.raw_headers.extend(await headers())
    if record.session_id is not None and response.status_code < 400:
        response.raw_headers.append((_SESSION_HEADER, record.session_id.encode("ascii")))
    record.status = response.status_code
    await response(scope, receive, send)
    return response.status_code


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        error: APIError = NotFoundError(
            f"No route for {request.method} {request.url.path}.", code="unknown_url"
        )
    elif exc.status_code == 405 and _only_templated(request):
        # POST /v1/responses/frobnicate matches /v1/responses/{response_id} (GET, DELETE) only through
        # its template: to the client it is an endpoint this server does not have, not a wrong method.
        error = NotFoundError(f"No route for {request.method} {request.url.path}.", code="unknown_url")
    elif exc.status_code == 405:
        # Starlette's own Allow names the first route matching the path only (GET, not DELETE, for
        # /v1/responses/{id}): list every method a route serves on this path.
        return error_response(
            MethodNotAllowedError(request.method, request.url.path, _allowed_methods(request))
        )
    else:
        error = status_error(exc.status_code)(str(exc.detail), code=None)
    return error_response(error, exc.headers)


_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _only_templated(request: Request) -> bool:
    """Whether the path fits ``/v1/responses/{response_id}…`` only through its template, with a segment that
    cannot be a response id (``frobnicate``): an endpoint this server does not have."""
    parts = request.url.path.split("/")
    return len(parts) >= 4 and parts[1:3] == ["v1", "responses"] and not parts[3].startswith("resp_")


def _allowed_methods(request: Request) -> list[str]:
    """The methods some route of the app serves on the request's path."""
    routes = request.app.router.routes
    allowed = []
    for method in _METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in routes):
            allowed.append(method)
    return allowed


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    param = ".".join(str(p) for p in first["loc"][1:]) or None
    return error_response(InvalidRequestError(f"Invalid value for '{param}': {first['msg']}.", param=param))


async def _unexpected(request: Request, exc: Exception) -> Response:
    logger.exception("Unhandled error on %s %s", request.method, request.url.path)
    return error_response(ServerError("The server had an error while processing your request."))


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
