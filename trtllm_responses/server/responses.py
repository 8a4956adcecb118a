"""HTTP response classes: pre-serialized JSON, and the Server-Sent Events stream of one response."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable

from openai.types.responses import ResponseStreamEvent
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..service import PreparedResponse, ResponsesService
from .sse import encode_events

__all__ = ["EventStreamResponse", "FramesResponse", "JSONBytesResponse"]

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class JSONBytesResponse(Response):
    """A JSON body that is already bytes (serialized once, by ``wire.to_json`` or the store)."""

    media_type = "application/json"


class FramesResponse(Response):
    """``text/event-stream`` of SSE frames that are already bytes (a background response's recorded events).

    The client going away stops only this reader: the generation goes on.
    """

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[bytes]) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)
        self._frames = frames

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
            async for frame in self._frames:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
        except asyncio.CancelledError:
            if not gone:
                raise
            uncancel = getattr(this_task, "uncancel", None)
            if uncancel is not None:
                uncancel()
            return
        except OSError:  # the socket went away under a write
            return
        finally:
            watcher.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class EventStreamResponse(Response):
    """``text/event-stream``: drives one response and writes each engine step's events as SSE frames.

    A task watches for the client going away; if it does, the driving task is
    cancelled, which aborts the generation in the executor.
    """

    media_type = "text/event-stream"

    def __init__(self, service: ResponsesService, prepared: PreparedResponse) -> None:
        # Like StreamingResponse: no body attribute, so no Content-Length (the body is chunked).
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)
        self._service = service
        self._prepared = prepared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})

        def deliver(events: list[ResponseStreamEvent]) -> Awaitable[None]:
            # Returns send's own awaitable: no extra coroutine frame per engine step.
            return send({"type": "http.response.body", "body": encode_events(events), "more_body": True})

        # Drive in this task (no extra task hop per token); a watcher cancels it if the client leaves.
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
            await self._service.drive(self._prepared, deliver)
        except asyncio.CancelledError:
            if not gone:
                raise
            uncancel = getattr(this_task, "uncancel", None)  # Python >= 3.11
            if uncancel is not None:
                uncancel()
            return  # the client went away; drive aborted the generation
        finally:
            watcher.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
