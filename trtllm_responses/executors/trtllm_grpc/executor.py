"""The gRPC executor (``serve --engine trtllm-grpc --engine_url grpc://HOST:PORT``): gpt-oss on a TensorRT-LLM
engine in another process or on another host, over TensorRT-LLM's token-in/token-out gRPC service
(``trtllm-serve MODEL --grpc``: ``tensorrt_llm/grpc/trtllm_service.proto``, the protocol SMG drives).

It does what the in-process executor (``executors/trtllm.py``) does where the protocol carries it: Harmony's stop tokens,
sampling as the engine's release applies it (``GetServerInfo`` names the release: ``trtllm_releases.py``),
constraints as structural tags, logprobs, cached tokens, the tenant's cache salt, abort (the ``Abort`` call,
and the stream cancelled) and health (``HealthCheck``, polled). What the protocol cannot carry (KV retention,
the session's placement, priority) and what the engine is told but does not apply:
docs/a-fleet-of-engines.md#one-remote-engine. One engine here (``engine.GrpcEngine``); a pool of
them is the next step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from ...harmony import HarmonyEncoding, SpelledControlTokens
from ..base import Executor, ExecutorError, GenerationRequest, TokenDelta
from ..trtllm_releases import MIN_TRTLLM_VERSION, Release
from .engine import CONNECT_TIMEOUT_S, EngineInfo, GrpcEngine, describe
from .messages import (
    TokenLogprobs,
    engine_target,
    finish,
    generate_request,
    token_logprobs,
    trace_metadata,
)

__all__ = ["HEALTH_INTERVAL_S", "TrtllmGrpcExecutor"]

logger = logging.getLogger(__name__)

#: How often the engine's ``HealthCheck`` is asked (``/health`` answers from the last answer).
HEALTH_INTERVAL_S = 5.0


@dataclass(slots=True)
class _Running:
    """One generation on the engine: its call, and whether its ``Abort`` was sent."""

    call: Any
    aborted: bool = False


class TrtllmGrpcExecutor(Executor):
    """Serves generations from one remote TensorRT-LLM gRPC engine.

    ``url``: ``grpc://HOST:PORT``. ``encoding``: the Harmony encoding the server renders with (its vocabulary
    reads spelled control tokens under constraints, and is checked against the engine's).
    ``guided`` (``serve --guided_decoding``): ``off`` refuses constrained requests (an engine started without
    xgrammar); ``on`` sends them as structural tags. ``health_interval``: seconds between health checks;
    ``connect_timeout``: how long :meth:`start` waits for the engine.
    """

    name = "trtllm-grpc"

    def __init__(
        self,
        url: str,
        *,
        encoding: HarmonyEncoding,
        guided: str = "on",
        health_interval: float = HEALTH_INTERVAL_S,
        connect_timeout: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.url = url
        engine_target(url)  # ValueError now, before the server starts, for a malformed URL
        self._connect_timeout = connect_timeout
        self._encoding = encoding
        self._guided = guided
        self._health_interval = health_interval
        self._engine: GrpcEngine | None = None
        self._running: dict[str, _Running] = {}
        self._aborts: set[asyncio.Task[None]] = set()
        self._health_task: asyncio.Task[None] | None = None
        self._unhealthy: str | None = "not started"
        #: The engine's release (``GetServerInfo.version``), known once started.
        self.trtllm_release: Release | None = None
        self.engine_info: EngineInfo | None = None
        if guided == "off":
            self.constraint_refusal = (
                "this server runs without guided decoding (serve --guided_decoding off), so it cannot constrain "
                "what the model writes: structured outputs (text.format json_schema), required or named tool "
                "choices and custom-tool grammars are refused"
            )

    async def start(self) -> None:
        """Connect, read the engine's release and model, refuse what cannot be served; start health checks."""
        self._engine = engine = GrpcEngine(self.url)
        try:
            info = await engine.connect(self._connect_timeout)
            self._accept(info)
        except BaseException:
            self._engine = None
            await engine.close()
            raise
        self.engine_info = info
        self._unhealthy = await engine.health()
        if self._unhealthy is not None:
            logger.warning("The engine at %s is not healthy yet: %s", self.url, self._unhealthy)
        self._health_task = asyncio.get_running_loop().create_task(self._watch_health())

    def _accept(self, info: EngineInfo) -> None:
        """Take the engine's facts, or ExecutorError saying why this engine cannot be served."""
        release = Release(info.version)
        key = release.key
        if key is None or key[:2] < MIN_TRTLLM_VERSION:
            wanted = ".".join(map(str, MIN_TRTLLM_VERSION))
            raise ExecutorError(
                f"the engine at {self.url} runs TensorRT-LLM {info.version or '(version not said)'}; this server "
                f"needs TensorRT-LLM {wanted} or newer (structured outputs and tool calls are xgrammar structural "
                "tags): run a newer trtllm-serve --grpc (docs/a-fleet-of-engines.md#one-remote-engine)"
            )
        if release.grpc_refusal is not None:
            raise ExecutorError(f"the engine at {self.url}: {release.grpc_refusal}")
        first_special = min(self._encoding.special_ids)
        if 0 < info.vocab_size < first_special:
            raise ExecutorError(
                f"the engine at {self.url} serves {info.model_id or 'a model'} with a vocabulary of "
                f"{info.vocab_size} tokens, smaller than gpt-oss's o200k_harmony ({first_special} ordinary "
                "tokens): it is not a gpt-oss model"
            )
        self.trtllm_release = release
        self.unapplied_sampling = release.unapplied_sampling
        self.seed_note = release.seed_note
        for reason in self.unapplied_sampling.values():
            logger.warning("%s", reason)
        if info.max_seq_len > 0:
            self.max_seq_len = info.max_seq_len
        self.prefix_isolation_refusal = (
            f"TensorRT-LLM's gRPC server ({info.version}) does not pass GenerateRequest.cache_salt_id on to the "
            "engine (tensorrt_llm/grpc/smg/servicer.py, Generate): one tenant's prompt would reuse another's "
            "KV-cache blocks. Serve tenants with --engine trtllm, or one engine per tenant."
        )
        logger.info(
            "Engine %s: TensorRT-LLM %s, %s, context window %d tokens (tp %d, pp %d)",
            self.url,
            info.version,
            info.model_id or "model not named",
            self.max_seq_len,
            info.tensor_parallel_size,
            info.pipeline_parallel_size,
        )

    async def _watch_health(self) -> None:
        """Ask ``HealthCheck`` every ``health_interval`` seconds; log each change."""
        engine = self._engine
        while engine is not None:
            await asyncio.sleep(self._health_interval)
            was = self._unhealthy
            self._unhealthy = await engine.health()
            if self._unhealthy != was:
                if self._unhealthy is None:
                    logger.info("The engine at %s is healthy again", self.url)
                else:
                    logger.error("The engine at %s is not healthy: %s", self.url, self._unhealthy)

    def _lost(self, why: str) -> None:
        """The engine stopped answering mid-stream: unhealthy at once (the next health check may restore it)."""
        if self._unhealthy is None:
            logger.error("The engine at %s is not reachable: %s", self.url, why)
        self._unhealthy = why

    def healthy(self) -> bool:
        """Whether the engine's last ``HealthCheck`` answered ``OK`` (False before start)."""
        return self._unhealthy is None

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        """Stream the engine's chunks as deltas; its ``complete`` is the last delta (with any tokens the chunks
        did not carry). A failed call (the engine's errors are gRPC statuses) or a stream that ends without a
        ``complete`` raises ExecutorError.
        Closing this generator before the last delta cancels the call and sends ``Abort``."""
        engine = self._engine
        if engine is None:
            raise ExecutorError("the TensorRT-LLM gRPC executor was not started")
        assert self.trtllm_release is not None
        message = generate_request(engine.pb2, request, unapplied=self.unapplied_sampling)
        running = self._running[request.request_id] = _Running(
            engine.generate(message, trace_metadata(request))
        )
        spelled = None if request.constraint is None else SpelledControlTokens(self._encoding)
        top = request.sampling.logprobs
        sent = 0
        finished = False
        try:
            async for response in _responses(engine, running.call, self._lost):
                kind = response.WhichOneof("response")
                if kind == "chunk":
                    chunk = response.chunk
                    tokens: Any = list(chunk.token_ids)
                    sent += len(tokens)
                    logprobs: TokenLogprobs | None = (
                        None if top is None else token_logprobs(tokens, chunk.logprobs, top)
                    )
                    if spelled is not None:
                        tokens, logprobs = spelled.read(tokens, logprobs)
                    if tokens:
                        yield TokenDelta(tokens, cached_tokens=chunk.cached_tokens, logprobs=logprobs)
                elif kind == "complete":
                    finished = True
                    yield _last(response.complete, sent, top, spelled)
                    return
            raise ExecutorError("the engine closed the stream without finishing the generation")
        finally:
            if self._running.pop(request.request_id, None) is not None and not finished:
                running.call.cancel()
                if not running.aborted:
                    self._send_abort(engine, request.request_id)

    def abort(self, request_id: str) -> None:
        """Send the engine's ``Abort`` for ``request_id`` (its stream then ends ``cancelled``); a no-op when it
        is not running."""
        running = self._running.get(request_id)
        if running is None or running.aborted or self._engine is None:
            return
        running.aborted = True
        self._send_abort(self._engine, request_id)

    def _send_abort(self, engine: GrpcEngine, request_id: str) -> None:
        try:
            task = asyncio.get_running_loop().create_task(engine.abort(request_id))
        except RuntimeError:  # no loop: shutting down
            return
        self._aborts.add(task)
        task.add_done_callback(self._aborts.discard)

    async def shutdown(self) -> None:
        """Abort what runs, stop the health checks, close the channel."""
        for request_id in list(self._running):
            self.abort(request_id)
        if self._aborts:
            await asyncio.wait(set(self._aborts), timeout=2.0)
        if self._health_task is not None:
            self._health_task.cancel()
            self._health_task = None
        if self._engine is not None:
            engine, self._engine = self._engine, None
            self._unhealthy = "shut down"
            await engine.close()


def _last(complete: Any, sent: int, top: int | None, spelled: SpelledControlTokens | None) -> TokenDelta:
    """The last delta, from ``GenerateComplete``: the output tokens no chunk carried (``output_token_ids`` is
    cumulative), held-back spelled tokens, the finish reason."""
    rest: Any = list(complete.output_token_ids[sent:])
    logprobs: TokenLogprobs | None = None
    if top is not None:
        logprobs = token_logprobs(rest, complete.logprobs[sent:], top) if rest else []
    if spelled is not None:
        rest, logprobs = spelled.read(rest, logprobs, last=True)
    reason, error = finish(complete.finish_reason)
    return TokenDelta(rest, reason, error, complete.cached_tokens, logprobs)


async def _responses(engine: GrpcEngine, call: Any, lost: Callable[[str], None]) -> AsyncGenerator[Any, None]:
    """The call's responses; a failed call (the engine gone, a status error) becomes an ExecutorError naming it,
    and an engine that cannot be reached (UNAVAILABLE) is reported to ``lost``."""
    iterator = call.__aiter__()
    while True:
        try:
            response = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except engine.grpc.aio.AioRpcError as exc:
            if exc.code() == engine.grpc.StatusCode.UNAVAILABLE:
                lost(describe(exc))
            raise ExecutorError(
                f"the TensorRT-LLM gRPC engine at {engine.url} failed: {describe(exc)}"
            ) from exc
        yield response
