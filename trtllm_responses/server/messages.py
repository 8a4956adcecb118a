"""``POST /v1/messages`` (Anthropic's Messages API): a Messages request driven through the Responses path.

The request is translated at its edge (``request/anthropic.py``) into the service's request;
``ResponsesService.prepare`` checks and renders it (the same prompt, tools and Constraint as
``POST /v1/responses``) and ``drive`` generates it through the executor, the Harmony reader and the
stream state machine. Only the writing differs: the typed events go through a
:class:`~.messages_events.MessageWriter` into Messages events (``stream: true``) or a ``message``
object. ``POST /v1/messages/count_tokens`` counts the prompt the same body renders; every answer
under ``/v1/messages`` (errors included) is in Anthropic's shape; message batches are a 404.
Messages are never stored. docs/anthropic-messages.md#anthropic-messages.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import orjson
from openai.types.responses import ResponseStreamEvent
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..core import APIError, InvalidRequestError, NotFoundError, ServerError, new_id
from ..ops import AccessRecord
from ..request import MessagesOptions, in_messages_terms, translate_messages
from ..responses import Origin, PreparedResponse, ResponsesService
from .errors import answer
from .messages_events import MessageWriter, anthropic_error
from .responses import JSONBytesResponse, WriterResponse, unless_client_leaves

__all__ = [
    "COUNT_TOKENS_PATH",
    "MESSAGES_PATH",
    "MessageRun",
    "anthropic_error_response",
    "anthropic_models",
    "serve_messages",
    "wants_anthropic",
]

logger = logging.getLogger(__name__)

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"

ReadBody = Callable[[Receive, ResponsesService], Awaitable[bytes]]


def wants_anthropic(scope: Scope) -> bool:
    """Whether a request is Anthropic's: under ``/v1/messages``, or sent with ``anthropic-version``."""
    if scope["path"].startswith(MESSAGES_PATH):
        return True
    return any(name == b"anthropic-version" for name, _ in scope["headers"])


def anthropic_error_response(error: APIError, headers: Mapping[str, str] | None = None) -> Response:
    """The HTTP response of an APIError in Anthropic's envelope (same status)."""
    return JSONBytesResponse(
        orjson.dumps(anthropic_error(error)), status_code=error.status_code, headers=headers
    )


def anthropic_models(served: str, aliases: Sequence[str], created: int) -> list[dict[str, Any]]:
    """``GET /v1/models`` in Anthropic's shape: the served model, then each alias that names one model."""
    names = [served] + [a for a in aliases if a != served and not any(c in a for c in "*?[")]
    stamp = datetime.fromtimestamp(created, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    return [
        {"type": "model", "id": name, "display_name": name, "created_at": stamp, "lifecycle": "active"}
        for name in names
    ]


def _check_model(name: str, aliases: Sequence[str]) -> None:
    """A model name must match one of the aliases (glob patterns; ``*`` by default: any name)."""
    if not any(fnmatch.fnmatchcase(name, pattern) for pattern in aliases):
        raise NotFoundError(f"model: {name}", param="model", code="model_not_found")


class _Nothing:
    """An awaitable that is already done (a step whose events made no frame: no write)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())  # type: ignore[return-value]


_NOTHING = _Nothing()


class MessageRun:
    """One Anthropic message: its generation, driven and written as Messages events or a ``message``."""

    def __init__(
        self, service: ResponsesService, prepared: PreparedResponse, options: MessagesOptions
    ) -> None:
        self.run = service.run(prepared)
        self.id = new_id("msg")
        self.writer = MessageWriter(
            self.id,
            options.model,
            len(prepared.prompt.token_ids),
            stream=options.stream,
            thinking=options.thinking,
            stop=options.stop,
            on_stop=self.run.cancel,  # a stop sequence ended the text: the rest is not generated
        )

    async def message_json(self) -> bytes:
        """Generate; the ``message`` object. A failed generation is an error (500 unless it says)."""
        writer = self.writer

        def deliver(events: list[ResponseStreamEvent]) -> Awaitable[None]:
            writer.feed(events)
            return _NOTHING

        await self.run.drive(deliver)
        if writer.error is not None:
            raise writer.error
        return writer.message_json()

    async def stream(self, send: Send) -> None:
        """Write ``message_start``, ``ping``, the blocks' events, ``message_delta``, ``message_stop``.

        A generation that fails once the stream has started ends it with one ``error`` event.
        """
        writer = self.writer
        await send({"type": "http.response.body", "body": writer.start(), "more_body": True})

        def deliver(events: list[ResponseStreamEvent]) -> Awaitable[None]:
            # Returns send's own awaitable: no extra coroutine frame per engine step.
            data = writer.feed(events)
            if not data:
                return _NOTHING
            return send({"type": "http.response.body", "body": data, "more_body": True})

        try:
            await self.run.drive(deliver)
        except OSError:  # the client went away under a write
            raise
        except Exception:  # our bug: the stream still ends with an error event
            logger.exception("Message %s failed", self.id)
            writer.error = ServerError("The server had an error while processing the model's output.")
        if writer.error is not None:
            await send(
                {"type": "http.response.body", "body": writer.error_frame(writer.error), "more_body": True}
            )


async def serve_messages(
    service: ResponsesService,
    scope: Scope,
    receive: Receive,
    send: Send,
    record: AccessRecord,
    read_body: ReadBody,
    aliases: Sequence[str],
) -> int:
    """Serve one request under ``/v1/messages``: create, count_tokens, or a 404/405 in Anthropic's shape."""
    path = scope["path"].rstrip("/") or "/"
    method = scope["method"]
    message: MessageRun | None = None

    async def handle() -> Response:
        nonlocal message
        if path not in (MESSAGES_PATH, COUNT_TOKENS_PATH):
            if path.startswith(MESSAGES_PATH + "/batches"):
                raise NotFoundError(
                    "Message batches are not served here (docs/anthropic-messages.md#anthropic-messages); send each request to "
                    "POST /v1/messages.",
                    code="unknown_url",
                )
            raise NotFoundError(f"No route for {method} {scope['path']}.", code="unknown_url")
        if method != "POST":
            error = InvalidRequestError(
                f"{method} is not allowed on {path}; use POST.", code="method_not_allowed"
            )
            error.status_code = 405
            return anthropic_error_response(error, {"Allow": "POST"})
        body = await service.decode(await read_body(receive, service))
        received = time.perf_counter()
        counting = path == COUNT_TOKENS_PATH
        translation = translate_messages(body, counting=counting)
        _check_model(translation.options.model, aliases)
        if translation.options.hidden_tools:
            logger.info("Tools not shown to the model: %s", ", ".join(translation.options.hidden_tools))
        try:
            origin = Origin(received_at=received, compact=False, sent_bytes=body.size)
            prepared = await service.prepare(service.body_of(translation.body, origin), origin)
        except APIError as exc:
            raise in_messages_terms(exc, translation) from None
        if counting:
            return JSONBytesResponse(orjson.dumps({"input_tokens": len(prepared.prompt.token_ids)}))
        message = MessageRun(service, prepared, translation.options)
        record.response_id = message.id
        if translation.options.stream:
            return WriterResponse(message.stream)
        return JSONBytesResponse(await unless_client_leaves(receive, message.message_json()))

    status = await answer(handle, scope, receive, send, record, path, anthropic_error_response)
    usage = message.run.usage if message is not None else None
    if usage is not None and message is not None:
        record.input_tokens = usage.input_tokens
        record.output_tokens = usage.output_tokens
        record.cached_tokens = usage.input_tokens_details.cached_tokens
        record.first_token = message.run.first_token_at
    return status
