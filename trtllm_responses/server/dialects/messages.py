"""``POST /v1/messages`` (Anthropic's Messages API): a Messages request driven through the Responses path.

The request is translated at its edge (``request/anthropic.py``) into the service's request;
``ResponsesService.prepare`` checks and renders it (the same prompt, tools and Constraint as
``POST /v1/responses``) and ``drive`` generates it through the executor, the Harmony reader and the
stream state machine. Only the writing differs: the typed events go through a
:class:`~.messages_events.MessageWriter` into Messages events (``stream: true``) or a ``message``
object. ``POST /v1/messages/count_tokens`` counts the prompt the same body renders; every answer
under ``/v1/messages`` (errors included) is in Anthropic's shape; message batches are a 404.
Messages are never stored. The pieces every dialect shares: ``edge.py``.
docs/anthropic-messages.md#anthropic-messages.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Scope, Send

from ...core import APIError, LoopSteps, NotFoundError, new_id
from ...request import MessagesOptions, MessagesTranslation, session_identity, translating_messages
from ...responses import Admission, Origin, PreparedResponse, ResponsesService
from ..call import Call
from ..responses import JSONBytesResponse
from .edge import drive_writing, quietly, read_request, respond, writing
from .messages_events import MessageWriter, anthropic_error

__all__ = [
    "COUNT_TOKENS_PATH",
    "MESSAGES_PATH",
    "MessageRun",
    "MessagesEdge",
    "anthropic_error_response",
    "anthropic_models",
    "no_messages_route",
    "wants_anthropic",
]

logger = logging.getLogger(__name__)

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"


def wants_anthropic(scope: Scope) -> bool:
    """Whether a request is Anthropic's: under ``/v1/messages``, or sent with ``anthropic-version``."""
    if scope["path"].startswith(MESSAGES_PATH):
        return True
    return any(name == b"anthropic-version" for name, _ in scope["headers"])


def anthropic_error_response(error: APIError, headers: Mapping[str, str] | None = None) -> Response:
    """The HTTP response of an APIError in Anthropic's envelope (same status, and the headers its class
    carries: a 405's ``Allow``)."""
    if error.headers:
        headers = {**error.headers, **(headers or {})}
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


class MessageRun:
    """One Anthropic message: its generation, driven and written as Messages events or a ``message``."""

    def __init__(
        self,
        service: ResponsesService,
        prepared: PreparedResponse,
        options: MessagesOptions,
        admission: Admission | None = None,
    ) -> None:
        self.run = service.run(prepared, admission)
        #: Its one generation.
        self.runs = (self.run,)
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

    async def json(self) -> bytes:
        """Generate; the ``message`` object. A failed generation is an error (500 unless it says)."""
        writer = self.writer
        await self.run.drive(quietly(writer.feed))
        if writer.error is not None:
            raise writer.error
        return writer.message_json()

    async def stream(self, send: Send) -> None:
        """Write ``message_start``, ``ping``, the blocks' events, ``message_delta``, ``message_stop``.

        A generation that fails once the stream has started ends it with one ``error`` event.
        """
        writer = self.writer
        await send({"type": "http.response.body", "body": writer.start(), "more_body": True})
        await drive_writing(self.run, writing(writer.feed, send), writer, f"Message {self.id}")
        if writer.error is not None:
            await send(
                {"type": "http.response.body", "body": writer.error_frame(writer.error), "more_body": True}
            )


async def no_messages_route(call: Call) -> Response:
    """Any other path under ``/v1/messages``: a 404 (message batches say where to send each request)."""
    if call.scope["path"].startswith(MESSAGES_PATH + "/batches"):
        raise NotFoundError(
            "Message batches are not served here (docs/anthropic-messages.md#anthropic-messages); send each request to "
            "POST /v1/messages.",
            code="unknown_url",
        )
    raise NotFoundError(f"No route for {call.scope['method']} {call.scope['path']}.", code="unknown_url")


class MessagesEdge:
    """``POST /v1/messages`` and ``/v1/messages/count_tokens`` over one service; ``aliases``: the model
    names served (glob patterns, ``--model_aliases``)."""

    def __init__(self, service: ResponsesService, aliases: Sequence[str]) -> None:
        self.service = service
        self.aliases = aliases

    async def create(self, call: Call) -> Response:
        """A ``message``, or its stream of Messages events."""
        translation, prepared = await self._prepare(call, counting=False)
        answer = MessageRun(
            self.service, prepared, translation.options, await call.admit(self.service, prepared)
        )
        return await respond(call, answer, translation.options.stream)

    async def count_tokens(self, call: Call) -> Response:
        """``{"input_tokens": N}``: the prompt the same body renders, counted."""
        _, prepared = await self._prepare(call, counting=True)
        return JSONBytesResponse(orjson.dumps({"input_tokens": len(prepared.prompt.token_ids)}))

    async def _prepare(self, call: Call, counting: bool) -> tuple[MessagesTranslation, PreparedResponse]:
        """The request read, translated (its model one of the aliases) and prepared by the service."""
        service = self.service
        identity = session_identity(call.headers)  # a header that is not a key: a 400 before the body is read
        body = await read_request(call, service)
        with service.working():  # not idle time for the GC schedule
            received = time.perf_counter()
            steps = LoopSteps()  # the translation's, which the preparation continues
            translation = await steps.through(translating_messages(body, counting=counting))
            _check_model(translation.options.model, self.aliases)
            if translation.options.hidden_tools:
                logger.info("Tools not shown to the model: %s", ", ".join(translation.options.hidden_tools))
            try:
                origin = Origin(
                    received_at=received,
                    compact=False,
                    sent_bytes=body.size,
                    tenant=call.tenant,
                    thinking_signatures=True,
                    identity=identity,
                    steps=steps,
                )
                prepared = await service.prepare(await service.body_of(translation.body, origin), origin)
            except APIError as exc:
                raise translation.in_own_terms(exc) from None
        # Answered with x-session-id (server/errors.py: never on an error), a stream as a message.
        call.record.session_id = prepared.session_key
        return translation, prepared
