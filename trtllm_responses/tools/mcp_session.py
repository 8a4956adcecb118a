"""One MCP client session in a task of its own, so nothing the session does can reach the response's task.

The ``mcp`` SDK's client runs its transport in an anyio task group whose cancel
scope is entered by whoever enters the client. Entered by the response's task and
kept open across the loop's generations (calls of one response share a session),
a failure inside the transport (a 900 KB result was enough) cancelled that scope,
and so the response's own task, wherever it was: a non-streamed 500, a stream cut
without a terminal event, a background response lost.

:class:`SessionHost` enters the client in a task it owns and runs each request
(a listing, a call) there; callers wait on a future. A session that fails, or
ends, fails the request waiting on it with :class:`SessionFailed`, which the
provider turns into a failed item. Cancelling the caller does not cancel the
request: :meth:`SessionHost.aclose` does (the loop calls ``reset`` after a
timeout or a cancellation), which is what the MCP server sees.

Tracing on, each request runs in the session's task under its caller's OpenTelemetry context (the
caller's span current), so that what the SDK does for it (its own spans and ``_meta``, 2.x) belongs to
that caller's span, not to whichever call opened the session (``tools/spans.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from .mcp_sdk import Session
from .spans import attached, carried_context

__all__ = ["SessionFailed", "SessionHost"]

T = TypeVar("T")

#: A request, the future its caller waits on, and the caller's trace context (None: tracing off).
_Request = tuple[Callable[[Session], Awaitable[Any]], "asyncio.Future[Any]", object | None]


class SessionFailed(Exception):
    """The session ended (its transport failed or it was closed) before answering; ``__cause__`` says why."""


class SessionHost:
    """Owns one MCP client session in a dedicated task; :meth:`run` executes requests in it, one at a time."""

    def __init__(self, open_client: Callable[[], AbstractAsyncContextManager[Session]]) -> None:
        self._open = open_client
        self._requests: asyncio.Queue[_Request] = asyncio.Queue()
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    async def start(self) -> None:
        """Open the session (raises what opening it raised)."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        # A new task: it inherits no cancel scope of the caller's, and the caller's none of its.
        self._task = loop.create_task(self._serve())
        self._ready.add_done_callback(_retrieve)
        try:
            await asyncio.shield(self._ready)
        except asyncio.CancelledError:
            await self.aclose()
            raise
        except SessionFailed:
            if self._failure is not None:
                raise self._failure from None
            raise

    async def run(self, request: Callable[[Session], Awaitable[T]]) -> T:
        """Run ``request`` in the session's task; its result, or what it raised, or SessionFailed."""
        if self._task is None or self._task.done():
            raise SessionFailed("the MCP session is closed") from self._failure
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)  # a caller that gave up never reads it
        self._requests.put_nowait((request, future, carried_context()))
        return await asyncio.shield(future)

    async def aclose(self) -> None:
        """Cancel what runs in the session and close it; waits until it is closed."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(task)

    async def _serve(self) -> None:
        assert self._ready is not None
        current: asyncio.Future[Any] | None = None
        try:
            async with self._open() as client:
                self._ready.set_result(None)
                while True:
                    request, current, carried = await self._requests.get()
                    try:
                        with attached(carried):
                            result = await request(client)
                        current.set_result(result)
                    except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                        raise
                    except BaseException as exc:  # the request failed; the session goes on
                        if not current.done():
                            current.set_exception(exc)
                    current = None
        except BaseException as exc:  # the transport failed, or aclose cancelled the session
            self._failure = exc
        finally:
            ended = SessionFailed("the MCP session ended before answering")
            ended.__cause__ = self._failure
            waiting = [f for f in (self._ready, current) if f is not None]
            while not self._requests.empty():
                waiting.append(self._requests.get_nowait()[1])
            for future in waiting:
                if not future.done():
                    future.set_exception(ended)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
