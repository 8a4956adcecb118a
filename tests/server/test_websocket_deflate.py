"""server/websocket_deflate.py: a large message on a compressed connection is compressed off the loop,
its frame the one ``websockets`` would write, every frame in the order it was sent (issue 44, point 6).

The server's own protocol class (``uvicorn_config`` builds it per server) is driven here over a fake
transport by ``websockets``' sans-I/O client, which offers permessage-deflate as Codex and the
``websockets`` client do: the loop is seen turning while a 2 MiB message is compressed (before: the
compression ran inside ``send``, no other callback ran until it ended), a send whose caller is cancelled
while its message is compressed still reaches the client, and everything decodes in order with the
client's context-takeover decompressor (a frame missing or out of order fails the decompression). The
capped logprobs answer over a real compressed session is ``test_large_answers.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from support.ws_sansio import open_compressed
from websockets.frames import Frame, Opcode

from trtllm_responses.server.websocket_deflate import INLINE_DEFLATE_CHARS
from trtllm_responses.server.websocket_drain import draining_websocket_protocol

#: ~2 MiB of logprob-like JSON: tens of milliseconds to compress.
BIG = json.dumps([{"token": f"w{i % 977}", "logprob": -((i * 7919) % 10007) / 1000} for i in range(64_000)])
OTHER = BIG.replace("token", "tokne")


class _LoopTurns:
    """Counts the event loop's turns while it is entered (a task that yields once a turn)."""

    def __init__(self) -> None:
        self.count = 0
        self._on = True
        self._task: asyncio.Future[None] | None = None

    async def _run(self) -> None:
        while self._on:
            self.count += 1
            await asyncio.sleep(0)

    async def __aenter__(self) -> _LoopTurns:
        self._task = asyncio.ensure_future(self._run())
        await asyncio.sleep(0)  # it runs
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._on = False
        assert self._task is not None
        await self._task


def _text(data: str) -> dict[str, Any]:
    return {"type": "websocket.send", "text": data}


def _serve(script: Any) -> tuple[list[bytes], dict[str, Any]]:
    """Run ``script(send, seen)`` as the app of one compressed connection; the server's writes after the
    handshake, and what the script noted in ``seen``."""
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        await script(send, seen)
        await send({"type": "websocket.close", "code": 1000})

    async def go() -> tuple[list[bytes], Any]:
        protocol, transport, client = open_compressed(draining_websocket_protocol(5.0), app)
        (task,) = protocol.tasks
        await asyncio.wait_for(task, 60)
        protocol.connection_lost(None)
        return transport.writes, client

    writes, client = asyncio.run(go())
    client.receive_data(b"".join(writes))
    events = client.events_received()
    assert events[0].status_code == 101 and client.extensions, "permessage-deflate was not negotiated"
    texts = [bytes(e.data).decode() for e in events if isinstance(e, Frame) and e.opcode is Opcode.TEXT]
    seen["texts"] = texts
    return writes[1:], seen


def _compressed(frame: bytes) -> bool:
    return bool(frame[0] & 0x40)  # RSV1: the message is compressed


def test_a_large_message_is_compressed_while_the_loop_runs() -> None:
    async def script(send: Any, seen: dict[str, Any]) -> None:
        await send(_text("small before"))
        async with _LoopTurns() as turns:
            start = turns.count
            await send(_text(BIG))
            seen["turns"] = turns.count - start
        await send(_text("small after"))

    frames, seen = _serve(script)
    assert seen["texts"] == ["small before", BIG, "small after"]  # byte-exact, in order
    # Before: 0 (the compression ran inside send, the loop ran nothing else until it ended).
    assert seen["turns"] > 1, "the loop did not run while the large message was compressed"
    big = frames[1]
    assert _compressed(big) and len(big) < len(BIG) // 3, "the large message went uncompressed"
    assert len(BIG) > INLINE_DEFLATE_CHARS and all(_compressed(f) for f in frames[:3])


def test_a_cancelled_send_still_reaches_the_client_before_what_follows() -> None:
    """A caller cancelled while its message is compressed (a worker stopped by the connection's time
    limit): the frame is still written, before the next message, so the client's decompressor, which
    carries its window from message to message, reads both."""

    async def script(send: Any, seen: dict[str, Any]) -> None:
        caller = asyncio.ensure_future(send(_text(BIG)))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the compression is under way in its thread
        seen["cancelled"] = caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        await send(_text("small after"))  # waits for the cancelled caller's frame
        await send(_text(OTHER))  # compressed with the window of both before it

    frames, seen = _serve(script)
    assert seen["cancelled"], "the send ended before it could be cancelled"
    assert seen["texts"] == [BIG, "small after", OTHER]
    assert all(_compressed(f) for f in frames[:3])


def test_up_to_the_threshold_a_message_is_compressed_on_the_loop() -> None:
    """At :data:`INLINE_DEFLATE_CHARS` (~1 ms of deflate) the send compresses inline, as ``websockets``
    does (no turn of the loop, no thread); one character more and it goes to the thread."""

    async def script(send: Any, seen: dict[str, Any]) -> None:
        async with _LoopTurns() as turns:
            for size in (INLINE_DEFLATE_CHARS, INLINE_DEFLATE_CHARS + 1):
                start = turns.count
                await send(_text("x" * size))
                seen[size] = turns.count - start

    frames, seen = _serve(script)
    assert seen[INLINE_DEFLATE_CHARS] == 0 and seen[INLINE_DEFLATE_CHARS + 1] >= 1
    assert seen["texts"] == ["x" * INLINE_DEFLATE_CHARS, "x" * (INLINE_DEFLATE_CHARS + 1)]
    assert all(_compressed(f) for f in frames[:2])
