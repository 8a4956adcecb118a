"""A gRPC call's responses, read apart from whoever reads them, and whose fault a failed call is.

Shared by both wires (``engine.py``'s SMG and ``openengine_engine.py``): the executor reads every call through
:class:`Responses` (so a client that leaves never cancels the call before its ``Abort``:
``TrtllmGrpcExecutor._stop``) and asks :func:`engine_fault` whether a failure before the first token may run
again on another engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base import ExecutorError
from .engine import Engine, describe

__all__ = ["Responses", "engine_fault"]

#: gRPC statuses that are the request's own fault: the same request would fail on any engine, so it is not
#: retried elsewhere (every other failure before the first token is the engine's: retried once).
_REQUEST_FAULTS = frozenset(
    {"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE", "UNIMPLEMENTED", "PERMISSION_DENIED"}
)


def engine_fault(exc: ExecutorError) -> bool:
    """Whether a failure is the engine's (retried elsewhere), not the request's own (the same everywhere)."""
    # OpenEngine says it in the stream (openengine_messages.EngineFailed); SMG's is the call's status code.
    status = getattr(exc, "status", None)
    if status is not None:
        return status not in _REQUEST_FAULTS
    cause = exc.__cause__
    code = getattr(cause, "code", None)
    if code is None:
        return True  # a stream closed without its finish
    return getattr(code(), "name", "") not in _REQUEST_FAULTS


class Responses:
    """A call's responses, read by a task of their own: cancelling whoever reads them does not cancel the call.

    grpc.aio cancels a call whose read is cancelled (``UnaryStreamCall._read``), and TensorRT-LLM forgets a
    cancelled stream's request before an ``Abort`` sent after it can stop it (:meth:`TrtllmGrpcExecutor._stop`),
    so a reader that leaves (its task cancelled: the client went away) must not be what cancels the call; the
    executor aborts first, then cancels. A failed call (the engine gone, a status error) becomes an
    ExecutorError naming the engine, and an engine that cannot be reached (UNAVAILABLE) is reported to
    ``lost``. What is read waits in memory for the reader: one generation's chunks at most.
    """

    def __init__(self, engine: Engine, call: Any, lost: Callable[[str], None]) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._engine = engine
        self._lost = lost
        #: Ends with the call (the executor holds it until then).
        self.task = asyncio.get_running_loop().create_task(self._read(call))

    async def _read(self, call: Any) -> None:
        put = self._queue.put_nowait
        engine = self._engine
        end = _Ended(ExecutorError(f"the call to the TensorRT-LLM gRPC engine at {engine.url} was cancelled"))
        try:
            async for response in call:
                put(response)
            end = _Ended(None)
        except engine.grpc.aio.AioRpcError as exc:
            if exc.code() == engine.grpc.StatusCode.UNAVAILABLE:
                self._lost(describe(exc))
            failed = ExecutorError(f"the TensorRT-LLM gRPC engine at {engine.url} failed: {describe(exc)}")
            failed.__cause__ = exc  # its status code says whose fault it is (engine_fault)
            end = _Ended(failed)
        except Exception as exc:  # never leave the reader waiting
            end = _Ended(
                ExecutorError(f"reading from the TensorRT-LLM gRPC engine at {engine.url} failed: {exc}")
            )
        finally:  # cancelled (the call was, or the loop is closing) included
            put(end)

    def __aiter__(self) -> Responses:
        return self

    async def __anext__(self) -> Any:
        response = await self._queue.get()
        if type(response) is _Ended:
            self._queue.put_nowait(response)  # read again: still the end
            if response.error is None:
                raise StopAsyncIteration
            raise response.error
        return response


@dataclass(frozen=True)
class _Ended:
    """The end of a call's responses: None when the call ended well, else the ExecutorError it ended with."""

    error: ExecutorError | None
