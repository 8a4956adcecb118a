"""Decompressing WebSocket messages a bounded amount per event-loop turn, shared by all connections.

With permessage-deflate a 1.9 KB frame is a 1.9 MB message: decompressing and decoding it costs the
event loop ~5-10 ms. uvicorn's protocol handles every frame of what one read returned, and the loop
runs the reads of every ready socket in one turn, so 20 connections sending 4 such frames each held
the loop for a second before ``/health`` could even be accepted. :class:`PacedWebSocketProtocol`
feeds the parser in slices (when compression is on) and charges each message's decoded bytes to a
:class:`LoopBudget` shared by the server's connections; once a turn has decoded
:data:`DECODED_BYTES_PER_TURN`, every connection's remaining bytes wait (reading paused, in order) for
later turns, first come first served, so other work (``/health``, streams) runs between messages.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import ClassVar

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame

__all__ = ["DECODED_BYTES_PER_TURN", "WIRE_SLICE", "LoopBudget", "PacedWebSocketProtocol"]

#: Decoded message bytes all WebSocket connections together may produce in one event-loop turn (a larger
#: message is decoded whole, then nothing more that turn).
DECODED_BYTES_PER_TURN = 256 << 10
#: Wire bytes handed to the parser at a time on a compressed connection: deflate expands at most ~1,000
#: times, so a slice completes at most about one full-size message.
WIRE_SLICE = 1024


class LoopBudget:
    """Bytes that may be decoded in the current event-loop turn, and who waits for the next ones.

    A charge schedules the refill with ``call_soon``: it runs at the start of the next turn, before
    the waiters it resumes (oldest first, while budget lasts) and before I/O that turn polled.
    """

    def __init__(self, per_turn: int = DECODED_BYTES_PER_TURN) -> None:
        self.per_turn = per_turn
        self.left = per_turn
        self._refill_scheduled = False
        self._waiting: deque[Callable[[], None]] = deque()

    def spent(self) -> bool:
        """Whether this turn's budget is spent."""
        return self.left <= 0

    def busy(self) -> bool:
        """Whether decoding must wait: this turn's budget is spent, or others wait already."""
        return self.left <= 0 or bool(self._waiting)

    def charge(self, size: int) -> None:
        self.left -= size
        if not self._refill_scheduled:
            self._refill_scheduled = True
            asyncio.get_running_loop().call_soon(self._refill)

    def wait(self, resume: Callable[[], None]) -> None:
        """Call ``resume`` in a later turn, once the budget allows (in order of waiting)."""
        self._waiting.append(resume)
        if not self._refill_scheduled:
            self._refill_scheduled = True
            asyncio.get_running_loop().call_soon(self._refill)

    def _refill(self) -> None:
        self._refill_scheduled = False
        self.left = self.per_turn
        # Those waiting now, oldest first, while the budget lasts; one deferred again goes behind the rest.
        waiting, self._waiting = self._waiting, deque()
        while waiting and self.left > 0:
            waiting.popleft()()
        waiting.extend(self._waiting)
        self._waiting = waiting


class PacedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, decoding at most the server's :class:`LoopBudget` per loop turn."""

    #: Shared by the connections of one server (``websocket_drain.py`` makes a subclass per server).
    budget: ClassVar[LoopBudget] = LoopBudget()

    _backlog: bytes = b""
    _deferred = False

    def data_received(self, data: bytes) -> None:
        if self._deferred:  # bytes already waiting come first; read no more until they are decoded
            self._backlog += data
            self.transport.pause_reading()
            return
        self._feed(data, self.budget.busy)

    def _feed(self, data: bytes, wait: Callable[[], bool]) -> None:
        sliced = bool(self.conn.extensions)  # compressed: a small slice may be a large message
        position = 0
        while position < len(data):
            if wait():
                self._defer(data[position:])
                return
            step = data[position : position + WIRE_SLICE] if sliced else data[position:]
            position += len(step)
            super().data_received(step)
            if self.transport.is_closing():
                return

    def _defer(self, rest: bytes) -> None:
        self._backlog = rest
        self._deferred = True
        self.transport.pause_reading()
        self.budget.wait(self._resume)

    def _resume(self) -> None:
        data, self._backlog = self._backlog, b""
        self._deferred = False
        if self.transport.is_closing():
            return
        if not self.read_paused:  # uvicorn pauses reading while the app has not taken a message
            self.transport.resume_reading()
        self._feed(data, self.budget.spent)  # its turn: others waiting behind it do not stop it

    def handle_text(self, event: Frame) -> None:
        self.budget.charge(len(event.data))
        super().handle_text(event)

    def handle_bytes(self, event: Frame) -> None:
        self.budget.charge(len(event.data))
        super().handle_bytes(event)

    def handle_cont(self, event: Frame) -> None:
        self.budget.charge(len(event.data))
        super().handle_cont(event)
