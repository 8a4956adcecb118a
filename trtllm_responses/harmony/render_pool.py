"""RenderPool: Harmony rendering in a worker process, for inputs too large to render on the event loop.

openai-harmony holds the GIL while it tokenizes (measured: a 2 MB encode in a
thread stalls the event loop for its whole 0.4 s), so a thread would not help.
Rendering is linear (``linear.py``) but still ~0.2 µs per character: above a
size threshold the server renders a request's new messages here instead, while
the event loop keeps streaming. Messages cross as harmony's JSON, token ids come
back as packed 32-bit arrays.

The worker process starts at the first use (not every server needs it) and
loads the encoding from the same vocab folder as the server.
"""

from __future__ import annotations

import array
import asyncio
import json
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from openai_harmony import Message

from .encoding import HarmonyEncoding, load_encoding

__all__ = ["RenderPool"]

_worker_encoding: HarmonyEncoding | None = None


def _start_worker() -> None:
    global _worker_encoding
    _worker_encoding = load_encoding()


def _render_in_worker(sources: Sequence[str]) -> list[bytes]:
    assert _worker_encoding is not None
    render = _worker_encoding.render
    return [array.array("I", render(Message.from_dict(json.loads(s)))).tobytes() for s in sources]


class RenderPool:
    """One worker process that renders Harmony messages; ``render`` awaits it without blocking the loop."""

    def __init__(self) -> None:
        self._executor: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            # spawn: a fresh interpreter, not a fork of a server holding sockets, threads and an engine.
            self._executor = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker
            )
        return self._executor

    async def render(self, messages: Sequence[Message]) -> list[list[int]]:
        """Each message's render, as harmony (linear) makes it."""
        sources = [m.to_json() for m in messages]
        packed = await asyncio.get_running_loop().run_in_executor(self._pool(), _render_in_worker, sources)
        out = []
        for data in packed:
            tokens = array.array("I")
            tokens.frombytes(data)
            out.append(tokens.tolist())
        return out

    def close(self) -> None:
        """Stop the worker (pending renders are cancelled)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
