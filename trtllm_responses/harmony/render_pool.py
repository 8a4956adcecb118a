"""RenderPool: Harmony rendering in worker processes, for inputs too large to render on the event loop.

openai-harmony holds the GIL while it tokenizes, so a thread would not help: above a size
threshold the server renders a request's new messages in ``--render_workers`` processes while the
event loop keeps streaming (docs/limits.md#hostile-input-and-limits). A worker is ``python -m
trtllm_responses.harmony.render_pool`` over asyncio pipes, framed as a 4-byte little-endian length
and a payload (the JSON of the messages in, packed 32-bit token ids per message out). A worker that
dies is replaced at its next use and its request fails; one whose caller left finishes anyway. A worker
logs (warnings and up, and its death's traceback) on the stderr it shares with the server, in the server's
``--log_format``.
"""

from __future__ import annotations

import array
import asyncio
import json
import os
import struct
import sys
from collections.abc import Sequence

import orjson
from openai_harmony import Message

from ..core import LoopSteps, ServerError

__all__ = ["RenderPool", "default_render_workers"]

_LENGTH = struct.Struct("<I")
#: A worker's first frame: it has loaded the encoding and takes requests.
_READY = _LENGTH.pack(0)


def default_render_workers() -> int:
    """One worker a core, at most 4 (each holds the vocabulary: ~130 MiB)."""
    return max(1, min(4, os.cpu_count() or 1))


class _Worker:
    """One worker process (started at first use, and again after it died)."""

    def __init__(self, log_format: str = "text") -> None:
        self.log_format = log_format
        self.process: asyncio.subprocess.Process | None = None
        self.started = 0  # processes started for this slot

    async def running(self) -> asyncio.subprocess.Process:
        process = self.process
        if process is None or process.returncode is not None:
            process = self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                __name__,
                self.log_format,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 20,
            )
            self.started += 1
            # The worker says it is ready (an empty frame) once it has loaded the encoding: a second or
            # two of CPU that must be over before the server says it serves, not spent beside requests.
            assert process.stdout is not None
            try:
                ready = await process.stdout.readexactly(_LENGTH.size)
            except asyncio.IncompleteReadError as exc:
                await self.aclose()
                raise ServerError("The renderer process failed to start; please retry.") from exc
            if ready != _READY:
                await self.aclose()
                raise ServerError("The renderer process answered out of step; please retry.")
        return process

    async def exchange(self, payload: bytes, count: int, steps: LoopSteps) -> list[list[int]]:
        process = await self.running()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(_LENGTH.pack(len(payload)) + payload)
            await process.stdin.drain()
            steps.restart()  # waiting for the worker let the loop run
            out = []
            for _ in range(count):
                await steps.boundary()  # 20,000 renders read back are ~50 ms of work
                (size,) = _LENGTH.unpack(await process.stdout.readexactly(_LENGTH.size))
                tokens = array.array("I")
                tokens.frombytes(await process.stdout.readexactly(size))
                out.append(tokens.tolist())
            return out
        except (OSError, asyncio.IncompleteReadError) as exc:
            await self.aclose()
            raise ServerError("The renderer process failed; please retry.") from exc
        except asyncio.CancelledError:
            # Only the pool's own shutdown cancels an exchange; its reply would be out of step.
            await asyncio.shield(self.aclose())
            raise

    async def aclose(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.returncode is None:
            process.kill()
        await process.wait()
        if process.stdin is not None:
            process.stdin.close()


class RenderPool:
    """Worker processes that render Harmony messages; ``render`` awaits one without blocking the loop."""

    def __init__(self, workers: int | None = None, log_format: str = "text") -> None:
        self.size = workers or default_render_workers()
        self._workers = [_Worker(log_format) for _ in range(self.size)]
        self._idle: asyncio.Queue[_Worker] | None = None
        self._exchanges: set[asyncio.Task[list[list[int]]]] = set()

    @property
    def restarts(self) -> int:
        """Worker processes started again after one died or was stopped mid-request."""
        return sum(max(0, w.started - 1) for w in self._workers)

    @property
    def pids(self) -> list[int | None]:
        """Each worker's process id (None: not started)."""
        return [w.process.pid if w.process is not None else None for w in self._workers]

    def _queue(self) -> asyncio.Queue[_Worker]:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for worker in self._workers:
                self._idle.put_nowait(worker)
        return self._idle

    async def start(self) -> None:
        """Start the workers now and wait until each has loaded the encoding (a second or two of CPU each),
        rather than at first use: a server that says it serves does not spend its first seconds on them."""
        await asyncio.gather(*(w.running() for w in self._workers))

    async def render(self, messages: Sequence[Message]) -> list[list[int]]:
        """Each message's render, as ``HarmonyEncoding.render`` makes it."""
        return await self.render_sources([m.to_json() for m in messages])

    async def render_sources(self, sources: Sequence[str], steps: LoopSteps | None = None) -> list[list[int]]:
        """The render of each message whose JSON (``Message.to_json``) is in ``sources``; the renders read
        back in ``steps`` (``core.LoopSteps``) when given."""
        payload = orjson.dumps(list(sources))
        idle = self._queue()
        worker = await idle.get()
        exchange = asyncio.ensure_future(worker.exchange(payload, len(sources), steps or LoopSteps()))
        self._exchanges.add(exchange)

        def release(done: asyncio.Task[list[list[int]]]) -> None:
            self._exchanges.discard(done)
            idle.put_nowait(worker)
            if not done.cancelled():
                done.exception()  # read: a caller that left never will

        exchange.add_done_callback(release)
        # The exchange runs to its end even if this caller is cancelled (a client hung up).
        return await asyncio.shield(exchange)

    async def aclose(self) -> None:
        """Stop the workers and release their pipes."""
        exchanges = list(self._exchanges)
        for exchange in exchanges:
            exchange.cancel()
        # A cancelled exchange closes its own worker (shielded): wait for that, or the loop could close
        # while the worker's pipes are still being torn down.
        await asyncio.gather(*exchanges, return_exceptions=True)
        for worker in self._workers:
            await worker.aclose()


def _serve(log_format: str) -> None:
    """The worker: render requests from stdin until it closes; log in ``log_format`` (``text``: Python's
    default, warnings and up as bare lines)."""
    from .encoding import load_encoding

    if log_format != "text":
        from ..ops import setup_logging

        setup_logging("WARNING", log_format)
    encoding = load_encoding()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdout.write(_READY)
    stdout.flush()
    while header := stdin.read(_LENGTH.size):
        (size,) = _LENGTH.unpack(header)
        for source in json.loads(stdin.read(size)):
            tokens = array.array("I", encoding.render(Message.from_dict(json.loads(source)))).tobytes()
            stdout.write(_LENGTH.pack(len(tokens)) + tokens)
        stdout.flush()


if __name__ == "__main__":
    _serve(sys.argv[1] if len(sys.argv) > 1 else "text")
