"""HTTP response classes: pre-serialized JSON, and Server-Sent Events that always clean up."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["EventStreamResponse", "JSONBytesResponse"]

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class JSONBytesResponse(Response):
    """A JSON body that is already bytes (serialized once, by ``wire.to_json`` or the store)."""

    media_type = "application/json"


class EventStreamResponse(StreamingResponse):
    """``text/event-stream`` from an async iterator of SSE bytes.

    When the client goes away Starlette cancels the streaming task; closing the
    body iterator here runs its ``finally`` at once (aborting the generation),
    instead of whenever the garbage collector finalizes it.
    """

    def __init__(self, body: AsyncIterator[bytes]) -> None:
        super().__init__(body, media_type="text/event-stream", headers=SSE_HEADERS)
        self._body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self._body, "aclose", None)
            if aclose is not None:
                await aclose()
