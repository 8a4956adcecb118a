"""MainDeltas: a generation's engine deltas, read directly or through a pump while a side generation runs."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncGenerator

from ..executors import TokenDelta

__all__ = ["MainDeltas"]


class MainDeltas:
    """The main generation's deltas: read directly (``deltas``), or, while a summary runs, with
    :meth:`next` from a queue a pump fills.

    The pump keeps pulling the engine's deltas while a summary streams, so the main
    generation never waits for it. Once the summary is done (:meth:`stop_pumping`) the pump
    stops after the pull it is in, :meth:`next` drains what it queued and then reads the
    engine directly again (``direct``), so a queue hop is paid only for the steps taken
    during a summary. Responses without summaries never start it.
    """

    def __init__(self, deltas: AsyncGenerator[TokenDelta, None], ready_token: int | None = None) -> None:
        self.deltas = deltas
        #: A token that says the next output item is ready (``<|message|>``: its header is whole); None: not watched.
        self._ready_token = ready_token
        #: The pump has queued ``ready_token`` or the finish: what a summary delivered with a cutoff stops at.
        self.next_ready = False
        self._queue: asyncio.Queue[TokenDelta | BaseException] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        self._pumping = False
        self._front: collections.deque[TokenDelta] = collections.deque()
        self.finished = False  # the executor sent its finish delta
        self.direct = True  # nothing queued or in flight: read ``deltas`` itself

    async def next(self) -> TokenDelta:
        """The next delta (raises what the executor raised, StopAsyncIteration at its end)."""
        if self._front:
            return self._front.popleft()
        pump = self._pump
        if self._queue.empty() and (pump is None or pump.done()):
            self.direct = True
            return await self.deltas.__anext__()
        item = await self._queue.get()  # a running pump always puts one more (a delta or an error)
        if isinstance(item, BaseException):
            raise item
        return item

    def push_front(self, deltas: list[TokenDelta]) -> None:
        """Deltas to read before the queue's (a step the processor handed back)."""
        self._front.extendleft(reversed(deltas))
        if deltas:
            self.direct = False

    def pump(self) -> None:
        """Pull the engine's deltas in a task of their own (until :meth:`stop_pumping`)."""
        self._pumping = True
        self.next_ready = self.finished
        self.direct = False
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._run())

    def stop_pumping(self) -> None:
        """The summary is done: the pump stops after the pull it is in."""
        self._pumping = False

    async def _run(self) -> None:
        while self._pumping and not self.finished:
            try:
                delta = await self.deltas.__anext__()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # StopAsyncIteration, the executor's error: read in order
                self._queue.put_nowait(exc)
                return
            if delta.finish_reason is not None:
                self.finished = True
                self.next_ready = True
            elif self._ready_token is not None and self._ready_token in delta.token_ids:
                self.next_ready = True
            self._queue.put_nowait(delta)

    async def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump
        await self.deltas.aclose()
