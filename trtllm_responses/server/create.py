"""``POST /v1/responses`` as a plain ASGI endpoint, and the app that routes to it.

Creating a response is the per-token hot path: every engine step is one write
to the socket. Served through the framework, each write passes three wrapper
coroutines (error middleware and exception handlers); served here it goes
straight to the server's ``send``. Every other route, the lifespan and the error
handlers stay FastAPI's (``create_app``), and errors here use the same
envelope (``errors.error_response``).
"""

from __future__ import annotations

import logging
import time

from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..core import InvalidRequestError, to_json
from ..ops import AccessRecord
from ..request import multi_agent_beta, session_key_from_headers
from ..responses import ResponseRun, ResponsesService, Runs
from .chat import CHAT_PATH, create_chat_completion
from .config import ServerConfig
from .errors import answer, error_response
from .messages import MESSAGES_PATH, anthropic_error_response, serve_messages, wants_anthropic
from .operations import CLIENT_CLOSED, authorized, route_label, unauthorized
from .responses import EventStreamResponse, FramesResponse, JSONBytesResponse, unless_client_leaves
from .websocket import serve_websocket

__all__ = ["ResponsesApp", "MAX_BODY_BYTES"]

logger = logging.getLogger(__name__)

PATH = "/v1/responses"
#: Largest request body accepted (a long conversation replayed statelessly fits easily).
MAX_BODY_BYTES = 64 << 20


class _BodyTooLarge(InvalidRequestError):
    status_code = 413


async def _read_body(receive: Receive, service: ResponsesService) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("the client went away while sending its request")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BodyTooLarge(
                f"The request body is larger than {MAX_BODY_BYTES >> 20} MiB.", code="request_too_large"
            )
        service.check_input_size(size)  # refuse early, before reading (and parsing) the rest
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def create_response(
    service: ResponsesService,
    background: Runs,
    scope: Scope,
    receive: Receive,
    send: Send,
    record: AccessRecord,
) -> int:
    """Serve one ``POST /v1/responses``: a JSON response, or an SSE stream. Returns the HTTP status.

    A background response is started by the service (``start_background``); ``background`` (the service's
    ``runs``) is not used here, only passed by ``ResponsesApp``."""
    run: ResponseRun | None = None

    async def handle() -> Response:
        nonlocal run
        affinity = session_key_from_headers(scope["headers"])
        body = await _read_body(receive, service)
        prepared = await service.prepare(
            body, time.perf_counter(), affinity=affinity, multi_agent_beta=multi_agent_beta(scope["headers"])
        )
        record.response_id = prepared.response.id
        record.session_id = prepared.session_key
        run = service.run(prepared)
        if prepared.request.background:
            events = await service.start_background(run)
            if prepared.request.stream:
                return FramesResponse(events.follow(None))
            return JSONBytesResponse(to_json(prepared.response.model_copy(update={"status": "queued"})))
        if prepared.request.stream:
            return EventStreamResponse(run)
        return JSONBytesResponse(await unless_client_leaves(receive, run.drive()))

    status = await answer(handle, scope, receive, send, record, PATH)
    if run is not None and run.usage is not None:
        usage = run.usage
        record.input_tokens = usage.input_tokens
        record.output_tokens = usage.output_tokens
        record.cached_tokens = usage.input_tokens_details.cached_tokens
        record.first_token = run.first_token_at
    return status


class ResponsesApp:
    """The ASGI app: ``POST /v1/responses``, ``POST /v1/chat/completions`` and ``/v1/messages`` here,
    everything else (and the lifespan) to FastAPI."""

    def __init__(
        self,
        api: FastAPI,
        service: ResponsesService,
        background: Runs,
        config: ServerConfig | None = None,
    ) -> None:
        self.api = api
        self.service = service
        self.background = background
        self.config = config or ServerConfig()
        self.api_key = self.config.api_key
        self._requests = service.metrics.requests

    @property
    def state(self):  # type: ignore[no-untyped-def]
        """The FastAPI app's state (``state.service``)."""
        return self.api.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            if self.api_key is not None and not authorized(scope, self.api_key):
                await send({"type": "websocket.close", "code": 1008})  # before accept: an HTTP 403
                return
            if scope["path"] == PATH:
                await serve_websocket(self.service, self.config, scope, receive, send)
                return
        if scope["type"] != "http":
            await self.api(scope, receive, send)
            return
        path = scope["path"]
        method = scope["method"]
        record = AccessRecord.start(scope)
        send_with_id = record.wrap(send)
        try:
            if self.api_key is not None and path.startswith("/v1/") and not authorized(scope, self.api_key):
                render = anthropic_error_response if wants_anthropic(scope) else error_response
                await render(unauthorized(scope))(scope, receive, send_with_id)
            elif path.startswith(MESSAGES_PATH):
                record.status = await serve_messages(
                    self.service, scope, receive, send, record, _read_body, self.config.model_aliases
                )
            elif path == PATH or path == CHAT_PATH:
                if method != "POST":
                    error = InvalidRequestError(
                        f"{method} is not allowed on {path}; use POST.", code="method_not_allowed"
                    )
                    error.status_code = 405
                    await error_response(error, {"Allow": "POST"})(scope, receive, send_with_id)
                elif path == PATH:
                    record.status = await create_response(
                        self.service, self.background, scope, receive, send, record
                    )
                else:
                    record.status = await create_chat_completion(
                        self.service, scope, receive, send, record, _read_body
                    )
            else:
                record.status = CLIENT_CLOSED  # until a response starts
                await self.api(scope, receive, send_with_id)
        finally:
            self._requests.labels(route_label(path), method, str(record.status)).inc()
            record.log()
