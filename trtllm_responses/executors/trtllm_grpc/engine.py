"""One TensorRT-LLM gRPC engine (``trtllm-serve MODEL --grpc``, service ``trtllm.TrtllmService``): its channel,
what it says of itself, its health, its calls. The gRPC executor (``executor.py``) drives one; a pool of
engines (issue 43, item 2) holds several. :class:`Engine` is what both ask of an engine, whatever its wire:
:class:`GrpcEngine` speaks SMG's protocol, ``openengine_engine.OpenEngineEngine`` OpenEngine's
(``serve --grpc_protocol``).

grpcio and the generated stubs are imported when an engine is made, never by importing this module, so the
package imports without the ``grpc`` extra. Every call but ``Generate`` has a deadline (below); ``Generate``
has none (a generation runs as long as its ``max_tokens`` needs) and fails at once, without waiting for the
channel, while the engine is unreachable.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..base import ExecutorError, GenerationRequest
from .messages import SmgReader, Step, engine_target, generate_request

__all__ = [
    "ABORT_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "HEALTH_TIMEOUT_S",
    "INFO_TIMEOUT_S",
    "RECONNECT_CAP_S",
    "Engine",
    "EngineInfo",
    "GrpcEngine",
    "Reader",
    "import_stubs",
]

logger = logging.getLogger(__name__)

#: How long ``serve`` waits at start for the engine's channel to connect before refusing to start.
CONNECT_TIMEOUT_S = 10.0
#: ``GetServerInfo`` and ``GetModelInfo`` at start.
INFO_TIMEOUT_S = 10.0
#: One ``HealthCheck``; past it the engine counts as unhealthy until the next one answers.
HEALTH_TIMEOUT_S = 2.0
#: One ``Abort``; it is advice to an engine that also stops on the stream's cancellation, so a lost one is logged.
ABORT_TIMEOUT_S = 2.0
#: The longest wait of the channel's reconnection backoff (gRPC's default is 120 s).
RECONNECT_CAP_S = 30.0
#: Where the generated stubs live (this package: PIN.md names the vendored protos).
_STUBS = __package__


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What an engine said of itself at start (``GetServerInfo``, ``GetModelInfo``; 0 or "": not said)."""

    version: str
    backend: str
    model_id: str
    max_seq_len: int
    max_input_len: int
    vocab_size: int
    tensor_parallel_size: int
    pipeline_parallel_size: int


class Reader(Protocol):
    """Reads one generation's responses, in order, as steps (None: a response with nothing in it). ``ended``:
    the stream's end was read without a finish (a context leg's hand-off: ``disagg.ContextReader``)."""

    @property
    def ended(self) -> bool: ...

    def read(self, response: Any) -> Step | None: ...


class Engine(Protocol):
    """What the executor and the pool ask of one engine, whatever its wire: connect and describe it, build and
    start a generation and read its responses, abort one, ask its health, close it."""

    url: str
    grpc: Any

    async def connect(self, timeout: float = CONNECT_TIMEOUT_S) -> EngineInfo: ...

    def request(self, request: GenerationRequest, unapplied: Mapping[str, str]) -> Any: ...

    def reader(self, top: int | None) -> Reader: ...

    def generate(self, message: Any, metadata: Sequence[tuple[str, str]] | None) -> Any: ...

    async def abort(self, request_id: str) -> None: ...

    async def health(self) -> str | None: ...

    async def close(self) -> None: ...


def import_stubs() -> tuple[Any, Any, Any]:
    """``(grpc, trtllm_service_pb2, trtllm_service_pb2_grpc)``, or ExecutorError saying how to install them."""
    # The frontend forks its render workers (and server-run tools) after its channels are open; none of them
    # speaks gRPC, so grpcio's fork handlers have nothing to do there, and with its threads running they only
    # log "Other threads are currently calling into gRPC, skipping fork() handlers" at every start. Read by
    # grpcio when it is first imported; an operator's own setting wins.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    try:
        grpc = importlib.import_module("grpc")
        pb2 = importlib.import_module(f"{_STUBS}.trtllm_service_pb2")
        pb2_grpc = importlib.import_module(f"{_STUBS}.trtllm_service_pb2_grpc")
    except ImportError as exc:
        raise ExecutorError(
            f"--engine trtllm-grpc needs grpcio and protobuf ({exc}): pip install 'trtllm-responses[grpc]'"
        ) from exc
    return grpc, pb2, pb2_grpc


class GrpcEngine:
    """One engine at ``grpc://HOST:PORT``: :meth:`connect` once, then calls; :meth:`close` at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.target = engine_target(url)
        self.grpc, self.pb2, pb2_grpc = import_stubs()
        # gRPC's own reconnection backs off to 120 s; a pool rechecks a lost engine at most 30 s apart
        # (pool.RECHECK_CAP_S), so the channel must try again at least as often.
        options = [("grpc.max_reconnect_backoff_ms", int(RECONNECT_CAP_S * 1000))]
        self._channel = self.grpc.aio.insecure_channel(self.target, options=options)
        self._stub = pb2_grpc.TrtllmServiceStub(self._channel)

    async def connect(self, timeout: float = CONNECT_TIMEOUT_S) -> EngineInfo:
        """Wait for the channel, then ask what the engine is; ExecutorError naming the engine when it cannot."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except asyncio.TimeoutError as exc:
            raise ExecutorError(
                f"cannot reach the TensorRT-LLM gRPC engine at {self.url} within {timeout:g} s: is "
                f"`trtllm-serve MODEL --grpc` running there, and the address reachable from this host?"
            ) from exc
        try:
            server = await self._stub.GetServerInfo(self.pb2.GetServerInfoRequest(), timeout=INFO_TIMEOUT_S)
            model = await self._stub.GetModelInfo(self.pb2.GetModelInfoRequest(), timeout=INFO_TIMEOUT_S)
        except self.grpc.aio.AioRpcError as exc:
            raise ExecutorError(f"the engine at {self.url} did not describe itself: {describe(exc)}") from exc
        return EngineInfo(
            version=server.version,
            backend=server.backend,
            model_id=model.model_id,
            max_seq_len=model.max_seq_len,
            max_input_len=model.max_input_len,
            vocab_size=model.vocab_size,
            tensor_parallel_size=server.tensor_parallel_size,
            pipeline_parallel_size=server.pipeline_parallel_size,
        )

    def request(self, request: GenerationRequest, unapplied: Mapping[str, str]) -> Any:
        """The ``GenerateRequest`` of ``request`` (``messages.generate_request``)."""
        return generate_request(self.pb2, request, unapplied=unapplied)

    def reader(self, top: int | None) -> SmgReader:
        """A reader of one generation's responses (``top``: the logprobs asked for)."""
        return SmgReader(top)

    def generate(self, message: Any, metadata: Sequence[tuple[str, str]] | None) -> Any:
        """Start ``Generate``: the call (an async iterator of ``GenerateResponse``, cancellable)."""
        return self._stub.Generate(message, metadata=metadata, wait_for_ready=False)

    async def abort(self, request_id: str) -> None:
        """``Abort(request_id)``; a failure is logged (the stream's cancellation stops the engine's work too)."""
        try:
            await self._stub.Abort(self.pb2.AbortRequest(request_id=request_id), timeout=ABORT_TIMEOUT_S)
        except self.grpc.aio.AioRpcError as exc:
            logger.warning("Abort of %s on %s failed: %s", request_id, self.url, describe(exc))

    async def health(self) -> str | None:
        """None when ``HealthCheck`` answers ``OK``, else why not (its status text, or the call's error)."""
        try:
            reply = await self._stub.HealthCheck(self.pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_S)
        except self.grpc.aio.AioRpcError as exc:
            return describe(exc)
        return None if reply.status == "OK" else (reply.status or "no status")

    async def close(self) -> None:
        """Close the channel (running calls end cancelled)."""
        await self._channel.close()


def describe(exc: Any) -> str:
    """A gRPC error as ``CODE: details``."""
    code = exc.code()
    return f"{getattr(code, 'name', code)}: {exc.details() or 'no details'}"
