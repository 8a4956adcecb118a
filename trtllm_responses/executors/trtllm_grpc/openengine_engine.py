"""One TensorRT-LLM engine over OpenEngine (``trtllm-serve MODEL --grpc --grpc-protocol openengine``, services
``openengine.v1.Inference`` and ``openengine.v1.Control``): :class:`OpenEngineEngine`, the same small interface
as ``engine.GrpcEngine`` (``engine.Engine``), so the executor and the pool take either (``serve --grpc_protocol``).

- :meth:`~OpenEngineEngine.connect`: ``Control.GetServerInfo`` then ``GetModelInfo``. PR NVIDIA/TensorRT-LLM#17084's
  stub answers every RPC ``UNIMPLEMENTED`` (``Generate`` came with PR #17992: 1.3.0rc28, or a trunk nightly from
  2026-09-17): refused, saying so; an engine that is not TensorRT-LLM, or that needs a newer client revision than
  this schema's (1), is refused. OpenEngine says no vocabulary size, so ``EngineInfo.vocab_size`` is 0 (not said).
- :meth:`~OpenEngineEngine.abort`: ``Control.Abort(request_id)``; ``ABORTED`` or ``ALREADY_FINISHED`` (a request
  whose stream ended: nothing to stop) are both fine; a failed call is logged.
- :meth:`~OpenEngineEngine.health`: ``Control.Health``: healthy while ``READY``, else its failing checks.

grpcio and the stubs are imported when an engine is made, never by importing this module (as ``engine.py``).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import ExecutorError, GenerationRequest
from .engine import (
    ABORT_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    HEALTH_TIMEOUT_S,
    INFO_TIMEOUT_S,
    RECONNECT_CAP_S,
    EngineInfo,
    describe,
    import_stubs,
)
from .messages import engine_target
from .openengine_messages import OpenEngineReader, generate_request

__all__ = ["CLIENT_REVISION", "KvConnector", "OpenEngineEngine"]

logger = logging.getLogger(__name__)

#: The OpenEngine schema revision this server speaks (the vendored v0.1.0's ``manifest.json``).
CLIENT_REVISION = 1
#: The stubs (openengine/PIN.md names the schema).
_STUBS = f"{__package__}.openengine"
#: What the stub of PR #17084 answers, and which release first answers instead.
_STUB = (
    "serves OpenEngine's schema but not its RPCs (GetServerInfo answers UNIMPLEMENTED: the stub of "
    "NVIDIA/TensorRT-LLM PR #17084); Generate came with PR #17992: run TensorRT-LLM 1.3.0rc28 or newer, or a "
    "trunk nightly from 2026-09-17 on (docs/a-fleet-of-engines.md#openengine-one-engine-or-a-pool)"
)


class KvConnector:
    """What an engine said of its KV transfer (``ServerInfo.kv_connector``; disaggregation): whether it has a
    cache transceiver, its backend, and whether ``Abort(kv_session)`` frees a held context."""

    __slots__ = ("abort_cleanup", "backend", "enabled")

    def __init__(self, info: Any) -> None:
        present = info.HasField("kv_connector")
        connector = info.kv_connector
        self.enabled = present and (not connector.HasField("enabled") or connector.enabled)
        self.backend = connector.transfer_backend
        self.abort_cleanup = present and connector.supports_abort_cleanup


class OpenEngineEngine:
    """One engine at ``grpc://HOST:PORT`` speaking OpenEngine: :meth:`connect` once, then calls; :meth:`close`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.target = engine_target(url)
        self.grpc, _, _ = import_stubs()
        self.pb2 = importlib.import_module(f"{_STUBS}.generation_pb2")
        self._lifecycle = importlib.import_module(f"{_STUBS}.lifecycle_pb2")
        self._server = importlib.import_module(f"{_STUBS}.server_pb2")
        self._model_pb2 = importlib.import_module(f"{_STUBS}.model_pb2")
        stubs = importlib.import_module(f"{_STUBS}.openengine_pb2_grpc")
        options = [("grpc.max_reconnect_backoff_ms", int(RECONNECT_CAP_S * 1000))]
        self._channel = self.grpc.aio.insecure_channel(self.target, options=options)
        self._inference = stubs.InferenceStub(self._channel)
        self._control = stubs.ControlStub(self._channel)
        #: The served model's name (``GetModelInfo``), sent as ``GenerateRequest.model``.
        self.model = ""
        #: Its KV transfer, once described.
        self.kv_connector: KvConnector | None = None

    async def connect(self, timeout: float = CONNECT_TIMEOUT_S) -> EngineInfo:
        """Wait for the channel, then ask what the engine is; ExecutorError naming the engine when it cannot, or
        when it cannot be served (module docstring)."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except asyncio.TimeoutError as exc:
            raise ExecutorError(
                f"cannot reach the TensorRT-LLM OpenEngine server at {self.url} within {timeout:g} s: is "
                "`trtllm-serve MODEL --grpc --grpc-protocol openengine` running there, and the address reachable "
                "from this host?"
            ) from exc
        try:
            server = await self._control.GetServerInfo(
                self._server.GetServerInfoRequest(), timeout=INFO_TIMEOUT_S
            )
            model = await self._control.GetModelInfo(
                self._model_pb2.GetModelInfoRequest(), timeout=INFO_TIMEOUT_S
            )
        except self.grpc.aio.AioRpcError as exc:
            if exc.code() == self.grpc.StatusCode.UNIMPLEMENTED:
                raise ExecutorError(f"the engine at {self.url} {_STUB}") from exc
            raise ExecutorError(f"the engine at {self.url} did not describe itself: {describe(exc)}") from exc
        if server.engine_name != "tensorrt_llm":
            raise ExecutorError(
                f"the OpenEngine server at {self.url} is {server.engine_name or 'an unnamed engine'}, not "
                "TensorRT-LLM: this server drives TensorRT-LLM's (sampling and stop tokens as its releases apply them)"
            )
        if server.minimum_client_revision > CLIENT_REVISION:
            raise ExecutorError(
                f"the engine at {self.url} needs OpenEngine clients of schema revision "
                f"{server.minimum_client_revision} or newer; this server speaks revision {CLIENT_REVISION}"
            )
        self.model = model.served_model_name or model.model_id or "model"
        self.kv_connector = KvConnector(server)
        parallelism = server.parallelism
        return EngineInfo(
            version=server.engine_version,
            backend="pytorch",
            model_id=self.model,
            max_seq_len=model.max_context_length,
            max_input_len=0,
            vocab_size=0,  # OpenEngine's ModelInfo has none
            tensor_parallel_size=parallelism.tensor_parallel_size,
            pipeline_parallel_size=parallelism.pipeline_parallel_size,
        )

    def request(self, request: GenerationRequest, unapplied: Mapping[str, str]) -> Any:
        """The ``GenerateRequest`` of ``request`` (``openengine_messages.generate_request``)."""
        return generate_request(self.pb2, request, model=self.model or "model", unapplied=unapplied)

    def reader(self, top: int | None) -> OpenEngineReader:
        """A reader of one generation's responses (``top``: the logprobs asked for)."""
        return OpenEngineReader(self.url, top)

    def generate(self, message: Any, metadata: Sequence[tuple[str, str]] | None) -> Any:
        """Start ``Inference.Generate``: the call (an async iterator of ``GenerateResponse``, cancellable)."""
        return self._inference.Generate(message, metadata=metadata, wait_for_ready=False)

    async def abort(self, request_id: str) -> None:
        """``Control.Abort(request_id)``; a failure is logged (the stream's cancellation stops the engine too)."""
        try:
            await self._control.Abort(
                self._lifecycle.AbortRequest(request_id=request_id), timeout=ABORT_TIMEOUT_S
            )
        except self.grpc.aio.AioRpcError as exc:
            logger.warning("Abort of %s on %s failed: %s", request_id, self.url, describe(exc))

    async def health(self) -> str | None:
        """None while ``Control.Health`` answers ``READY``, else why not (its failing checks, or the call's error)."""
        try:
            reply = await self._control.Health(self._lifecycle.HealthRequest(), timeout=HEALTH_TIMEOUT_S)
        except self.grpc.aio.AioRpcError as exc:
            return describe(exc)
        if reply.state == self._lifecycle.HEALTH_STATE_READY:
            return None
        state = self._lifecycle.HealthState.Name(reply.state)
        failing = [
            f"{c.name}: {c.message or self._lifecycle.HealthState.Name(c.state)}"
            for c in reply.checks
            if c.state != self._lifecycle.HEALTH_STATE_READY
        ]
        return state + (f" ({'; '.join(failing)})" if failing else "")

    async def close(self) -> None:
        """Close the channel (running calls end cancelled)."""
        await self._channel.close()
