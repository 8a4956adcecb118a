"""RenderPool: Harmony rendering in a worker process, for inputs too large to render on the event loop.

openai-harmony holds the GIL while it tokenizes (measured: a 2 MB encode in a
thread stalls the event loop for its whole 0.4 s), so a thread would not help.
Rendering is linear (``linear.py``) but still ~0.2 µs per character: above a
size threshold the server renders a request's new messages here instead, while
the event loop keeps streaming.

The worker is ``python -m trtllm_responses.harmony.render_pool``, spoken to over
its stdin/stdout with asyncio pipes (no thread, no pickling, and unlike
multiprocessing's spawn it never re-imports the server's main module). Frames
are a 4-byte little-endian length and a payload: a request is the JSON list of
harmony's JSON of each message; the answer is one frame of packed 32-bit token
ids per message. ``serve`` starts it with the server (tests: at the first use);
it renders one request at a time, and is restarted if it dies (the request it
was rendering fails).
"""

from __future__ import annotations

import array
import asyncio
import json
import struct
import sys
from collections.abc import Sequence

from openai_harmony import Message

from ..errors import ServerError

__all__ = ["RenderPool"]

_LENGTH = struct.Struct("<I")


class RenderPool:
    """One worker process that renders Harmony messages; ``render`` awaits it without blocking the loop."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._lock: asyncio.Lock | None = None

    async def _worker(self) -> asyncio.subprocess.Process:
        process = self._process
        if process is None or process.returncode is not None:
            process = self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                __name__,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 20,
            )
        return process

    async def start(self) -> None:
        """Start the worker now (it takes a second or two to load the encoding) rather than at first use."""
        await self._worker()

    async def render(self, messages: Sequence[Message]) -> list[list[int]]:
        """Each message's render, as ``HarmonyEncoding.render`` makes it."""
        payload = json.dumps([m.to_json() for m in messages]).encode()
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            process = await self._worker()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(_LENGTH.pack(len(payload)) + payload)
                await process.stdin.drain()
                out = []
                for _ in messages:
                    (size,) = _LENGTH.unpack(await process.stdout.readexactly(_LENGTH.size))
                    tokens = array.array("I")
                    tokens.frombytes(await process.stdout.readexactly(size))
                    out.append(tokens.tolist())
                return out
            except (OSError, asyncio.IncompleteReadError) as exc:
                await self.aclose()
                raise ServerError("The renderer process failed; please retry.") from exc
            except asyncio.CancelledError:
                # Its reply would arrive out of step with the next request: start afresh.
                await asyncio.shield(self.aclose())
                raise

    async def aclose(self) -> None:
        """Stop the worker and release its pipes."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.returncode is None:
            process.kill()
        await process.wait()
        if process.stdin is not None:
            process.stdin.close()


def _serve() -> None:
    """The worker: render requests from stdin until it closes."""
    from .encoding import load_encoding

    encoding = load_encoding()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while header := stdin.read(_LENGTH.size):
        (size,) = _LENGTH.unpack(header)
        for source in json.loads(stdin.read(size)):
            tokens = array.array("I", encoding.render(Message.from_dict(json.loads(source)))).tobytes()
            stdout.write(_LENGTH.pack(len(tokens)) + tokens)
        stdout.flush()


if __name__ == "__main__":
    _serve()
