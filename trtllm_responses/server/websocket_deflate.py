"""Compressing a large outgoing WebSocket message in a thread, not on the event loop.

uvicorn's protocol sends a message with ``conn.send_text``: ``websockets``' permessage-deflate compresses
it right there, on the loop. Logprobs at the cap make a streamed event of ~17 MiB, which deflate (zlib's
default level, uvicorn's 4 KiB window) compresses in ~300 ms: four such events held the loop that long each.
:class:`DeflatingWebSocketProtocol` compresses a message over :data:`INLINE_DEFLATE_CHARS` on a compressed
connection in a worker thread (zlib releases the GIL) and writes the frame from the loop; the frame is
the one ``websockets`` would have written (the same extension object, the same call). The connection's
compressor keeps the LZ77 window of what it sent before (context takeover), so its frames must be made
and written in the order they were sent: while one is being compressed, every later message of the
connection (small ones and a close too) waits behind it, and a send whose caller is cancelled still
finishes, as an inline send would have, so that the peer's decompressor stays in step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.extensions import Extension
from websockets.frames import Frame, Opcode
from websockets.protocol import State

__all__ = ["INLINE_DEFLATE_CHARS", "DeflatingWebSocketProtocol"]

#: A message this long or shorter is compressed on the loop, as ``websockets`` does (~1 ms at 64 KiB; an
#: ordinary delta takes ~2 µs); a longer one in a thread.
INLINE_DEFLATE_CHARS = 64 << 10


def _frame_bytes(opcode: Opcode, data: str | bytes, extensions: Sequence[Extension]) -> bytes:
    """What ``websockets``' ``send_text``/``send_binary`` append to the output for ``data`` (a server's
    frames are not masked): the thread's work."""
    payload = data.encode() if isinstance(data, str) else data
    return Frame(opcode, payload).serialize(mask=False, extensions=extensions)


class DeflatingWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, compressing a message over :data:`INLINE_DEFLATE_CHARS` in a thread."""

    #: The last send that went the ordered way (a thread's compression, or a message behind one), until it
    #: ends.
    _tail: asyncio.Task[None] | None = None

    def send(self, message: Any) -> Coroutine[Any, Any, None]:
        # Not a coroutine itself, and the test written out: an ordinary delta's send costs 0.1-0.5 µs (of ~4)
        # more than uvicorn's (benchmarks/ws_compression.py, send_us).
        if self._tail is None and (
            not self.conn.extensions
            or len(message.get("text") or message.get("bytes") or "") <= INLINE_DEFLATE_CHARS
        ):
            return super().send(message)
        return self._send_ordered(message)

    async def _send_ordered(self, message: Any) -> None:
        task = self.loop.create_task(self._send_after(self._tail, message))
        task.add_done_callback(self._ended)
        self._tail = task
        await asyncio.shield(task)  # a cancelled caller does not stop it: the frame is made, so it is sent

    def _ended(self, task: asyncio.Task[None]) -> None:
        if self._tail is task:
            self._tail = None
        if not task.cancelled():
            task.exception()  # read here: a send whose caller was cancelled ends alone, not logged as lost

    def _deflates_apart(self, message: Any) -> bool:
        """Whether ``message`` is compressed in the thread (only ``websocket.send`` has text or bytes)."""
        size = len(message.get("text") or message.get("bytes") or "")
        return bool(self.conn.extensions) and size > INLINE_DEFLATE_CHARS

    async def _send_after(self, tail: asyncio.Task[None] | None, message: Any) -> None:
        if tail is not None:
            await asyncio.wait([tail])  # its outcome is its own caller's
        if self._deflates_apart(message):
            await self._send_deflated(message)
        else:
            await super().send(message)

    async def _send_deflated(self, message: Any) -> None:
        await self.writable.wait()
        if self.disconnected:
            raise ClientDisconnected()
        if not self._open():  # uvicorn raises what is wrong (a send after close, ...) before compressing
            await super().send(message)
            return
        data = message.get("bytes")
        opcode = Opcode.BINARY if data is not None else Opcode.TEXT
        if data is None:
            data = message["text"]
        frame = await asyncio.to_thread(_frame_bytes, opcode, data, self.conn.extensions)
        if self.disconnected or not self._open():  # closed meanwhile: nothing may follow the close frame
            raise ClientDisconnected()
        self.transport.write(frame)

    def _open(self) -> bool:
        """Whether ``websockets`` would send a data frame now (uvicorn's own checks, then its state's)."""
        return (
            self.handshake_complete
            and not self.close_sent
            and self.initial_response is None
            and self.conn.state is State.OPEN
            and not self.conn.expect_continuation_frame
        )
