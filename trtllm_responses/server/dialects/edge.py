"""What the foreign APIs' edges share: reading the body, driving the runs, answering, and stop strings.

A dialect's request is read as any POST carrying model input is (``body.py``), parsed once, and
translated at the request edge (``request/chat.py``, ``request/anthropic.py``) into the Responses
request ``ResponsesService.prepare`` reads. Its answer is one :class:`DialectRun` (its generations'
runs, driven here, fed to the dialect's writer): streamed, each engine step's events become the
dialect's frames at once (:func:`writing`); not streamed, the writer keeps them (:func:`quietly`)
and the run's JSON is the answer once every generation ended, unless the client leaves first
(:func:`respond`). Stop strings apply to the answer text, held back while it may begin one
(:class:`StopMatcher`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, Protocol

from openai.types.responses import Response as ResponsesResponse
from openai.types.responses import ResponseStreamEvent, ResponseUsage
from starlette.responses import Response
from starlette.types import Send

from ...core import APIError, ServerError
from ...request import JsonBody
from ...responses import ResponseRun, ResponsesService
from ..body import model_input
from ..call import Call
from ..responses import JSONBytesResponse, WriterResponse

__all__ = [
    "NOTHING",
    "Deliver",
    "DialectRun",
    "EventWriter",
    "Feed",
    "StopMatcher",
    "drive_writing",
    "generation_failure",
    "quietly",
    "read_request",
    "respond",
    "writing",
]

logger = logging.getLogger(__name__)

#: Receives one engine step's events (``ResponseRun.drive``).
Deliver = Callable[[list[ResponseStreamEvent]], Awaitable[None]]
#: A writer reading one engine step's events: the bytes they make (streaming), else ``b""``.
Feed = Callable[[list[ResponseStreamEvent]], bytes]


class _Nothing:
    """An awaitable that is already done (a step whose events made no frame: no write): :data:`NOTHING`."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())  # type: ignore[return-value]


NOTHING = _Nothing()


def quietly(feed: Feed) -> Deliver:
    """A ``deliver`` that feeds the writer and writes nothing (not streamed: the writer keeps the answer)."""

    def deliver(events: list[ResponseStreamEvent]) -> Awaitable[None]:
        feed(events)
        return NOTHING

    return deliver


def writing(feed: Feed, send: Send) -> Deliver:
    """A ``deliver`` that writes what the writer makes of each step (streamed).

    It returns ``send``'s own awaitable: no extra coroutine frame per engine step.
    """

    def deliver(events: list[ResponseStreamEvent]) -> Awaitable[None]:
        data = feed(events)
        if not data:
            return NOTHING
        return send({"type": "http.response.body", "body": data, "more_body": True})

    return deliver


class EventWriter:
    """A dialect's writer of one generation, fed the typed events of each engine step (``feed``): the
    frames they make (streamed), or kept for the answer object. ``error``: the generation failed (a
    stream then ends with the dialect's error frame); ``usage``: its usage, once it ended."""

    error: ServerError | None
    usage: ResponseUsage | None

    def feed(self, events: list[ResponseStreamEvent]) -> bytes:
        """Read one engine step's events; the frames they make (streaming), else ``b""``. (Each writer's own,
        its one-token step first, with no call between it and the socket: the per-token path.)"""
        raise NotImplementedError


async def drive_writing(run: ResponseRun, deliver: Deliver, writer: EventWriter, what: str) -> None:
    """Drive a streamed run; a failure of ours (not the client gone under a write) becomes the writer's
    ``error``, so the stream still ends with the dialect's error frame."""
    try:
        await run.drive(deliver)
    except OSError:  # the client went away under a write
        raise
    except Exception:
        logger.exception("%s failed", what)
        writer.error = ServerError(
            "The server had an error while processing the model's output.", code="server_error"
        )


async def read_request(call: Call, service: ResponsesService) -> JsonBody:
    """A dialect request's body, read under the model-input limit and parsed once; a size error names
    ``messages`` (what every dialect calls its input)."""
    try:
        return await service.decode(await call.body(model_input(service)), call.tenant.scope)
    except APIError as exc:
        if exc.param == "input":
            exc.message, exc.param = exc.message.replace("'input'", "'messages'"), "messages"
        raise


class DialectRun(Protocol):
    """A dialect's answer to one request: its id, its generations' runs, written streamed or as JSON."""

    @property
    def id(self) -> str:
        """The answer's id (the access record's ``response_id``)."""

    @property
    def runs(self) -> Sequence[ResponseRun]:
        """The generations it drives (one per choice)."""

    async def stream(self, send: Send) -> None:
        """Drive the runs, writing the dialect's frames as they come."""

    async def json(self) -> bytes:
        """Drive the runs; the dialect's answer object."""


async def respond(call: Call, answer: DialectRun, stream: bool) -> Response:
    """The HTTP answer of ``answer``: its stream, or its JSON once generated (unless the client leaves)."""
    call.record.response_id = answer.id
    call.runs = answer.runs
    call.streamed = stream
    if stream:
        return WriterResponse(answer.stream)
    return JSONBytesResponse(await call.unless_client_leaves(answer.json()))


def generation_failure(response: ResponsesResponse) -> ServerError:
    """What a ``response.failed`` says went wrong, as the error another API's stream ends with."""
    error = response.error
    return ServerError(
        error.message if error is not None else "The generation failed.",
        code=error.code if error is not None else "server_error",
    )


class StopMatcher:
    """Finds the first stop string in text that arrives in pieces, holding back what may begin one."""

    __slots__ = ("_held", "_stops", "matched")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(stops)
        self._held = ""
        #: The stop string found (None until one is).
        self.matched: str | None = None

    def feed(self, text: str) -> tuple[str, bool]:
        """The text that may be sent now, and whether a stop string was found (nothing after it is sent)."""
        text = self._held + text
        cut = -1
        for stop in self._stops:
            at = text.find(stop)
            if at >= 0 and (cut < 0 or at < cut):
                cut = at
                self.matched = stop
        if cut >= 0:
            self._held = ""
            return text[:cut], True
        keep = 0  # the longest end of the text that begins a stop string
        for stop in self._stops:
            tail = text[max(0, len(text) - len(stop) + 1) :] if len(stop) > 1 else ""
            at = tail.find(stop[0]) if tail else -1
            while at >= 0 and len(tail) - at > keep:
                if stop.startswith(tail[at:]):
                    keep = len(tail) - at
                    break
                at = tail.find(stop[0], at + 1)
        self._held = text[len(text) - keep :] if keep else ""
        return (text[: len(text) - keep] if keep else text), False

    def flush(self) -> str:
        """What was held back, once no more text comes."""
        held, self._held = self._held, ""
        return held
