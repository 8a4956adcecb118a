"""HTTP response classes: pre-serialized JSON, and the Server-Sent Events stream of one response."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from openai.types.responses import ResponseStreamEvent
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..responses import ResponseRun
from .sse import encode_events, obfuscation_wanted, written_apart

__all__ = [
    "ClientGone",
    "EventStreamResponse",
    "FramesResponse",
    "JSONBytesResponse",
    "WriterResponse",
    "unless_client_leaves",
]

T = TypeVar("T")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class JSONBytesResponse(Response):
    """A JSON body that is already bytes (serialized once, by ``wire.to_json`` or the store)."""

    media_type = "application/json"


class _EventStream(Response):
    """``text/event-stream`` written by :meth:`_write` in the serving task; a watcher task cancels that
    task if the client goes away (so whatever it drives stops with it).
    """

    media_type = "text/event-stream"

    def _init_stream(self) -> None:
        # Like StreamingResponse: no body attribute, so no Content-Length (the body is chunked).
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)

    async def _write(self, send: Send) -> bool:
        """Write the stream's frames; False if it ended early and must not be closed with a last frame."""
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        this_task = asyncio.current_task()
        assert this_task is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            await _wait_for_disconnect(receive)
            gone = True
            this_task.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            finished = await self._write(send)
        except asyncio.CancelledError:
            if not gone:
                raise
            uncancel = getattr(this_task, "uncancel", None)  # Python >= 3.11
            if uncancel is not None:
                uncancel()
            return  # the client went away
        finally:
            watcher.cancel()
        if finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class FramesResponse(_EventStream):
    """``text/event-stream`` of SSE frames that are already bytes (a background response's recorded events).

    The client going away stops only this reader: the generation goes on.
    """

    def __init__(self, frames: AsyncIterator[bytes]) -> None:
        self._init_stream()
        self._frames = frames

    async def _write(self, send: Send) -> bool:
        try:
            async for frame in self._frames:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
        except OSError:  # the socket went away under a write
            return False
        return True


class WriterResponse(_EventStream):
    """``text/event-stream`` written by ``write(send)`` in the serving task (the chat completions stream).

    The client going away cancels it, which cancels whatever it drives.
    """

    def __init__(self, write: Callable[[Send], Awaitable[None]]) -> None:
        self._init_stream()
        self._writer = write

    async def _write(self, send: Send) -> bool:
        await self._writer(send)
        return True


class EventStreamResponse(_EventStream):
    """``text/event-stream``: drives one response and writes each engine step's events as SSE frames.

    Driven in the serving task (no extra task hop per token); the client going away
    cancels it, which aborts the generation in the executor.
    """

    def __init__(self, run: ResponseRun) -> None:
        self._init_stream()
        self._run = run

    async def _write(self, send: Send) -> bool:
        obfuscated = obfuscation_wanted(self._run.prepared.request.stream_options)

        def deliver(events: list[ResponseStreamEvent]) -> Awaitable[None]:
            # Returns send's own awaitable: no extra coroutine frame per engine step.
            if written_apart(events):
                return _send_apart(events, obfuscated, send)
            body = encode_events(events, obfuscated)
            return send({"type": "http.response.body", "body": body, "more_body": True})

        await self._run.drive(deliver)
        return True


async def _send_apart(events: list[ResponseStreamEvent], obfuscated: bool, send: Send) -> None:
    """Write a step's events one per turn of the event loop (each may be megabytes of logprobs)."""
    for event in events:
        await send(
            {"type": "http.response.body", "body": encode_events([event], obfuscated), "more_body": True}
        )
        await asyncio.sleep(0)


class ClientGone(ConnectionResetError):
    """The client hung up before it was answered: while sending its body, or while its non-streamed answer was
    being made (recorded as 499, nothing sent)."""


async def unless_client_leaves(receive: Receive, work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` (a non-streamed answer's generation); if the client hangs up first, cancel it and
    raise :class:`ClientGone`.

    Call it once the request's body is read: ``receive`` then yields only ``http.disconnect``. Cancelling
    ``work`` cancels whatever it drives (``ResponseRun.drive`` aborts its generation in the executor),
    so no generation outlives its client. ``work`` runs as a task of its own: a non-streamed answer
    makes no write per token, so the hop costs nothing per token, and this task is never cancelled
    by the watcher (the streaming writer's way) with the race that brings.
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # this request is cancelled (server shutdown): so is its work
        task.cancel()
        gone.cancel()
        raise
    if task.done():
        gone.cancel()
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task  # its generation aborted and its run ended before the request is recorded
    raise ClientGone("the client went away while its response was generated")


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
