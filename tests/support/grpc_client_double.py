"""A scripted TensorRT-LLM gRPC service for the client side's unit tests (``tests/executors/test_trtllm_grpc.py``).

Not the fake engine (``tests/fake_trtllm/``: TensorRT-LLM's servicer over the fake LLM): a test double that
answers what each test scripts, records what the executor sent (requests, metadata, aborts, cancellations),
and streams as ``tensorrt_llm/grpc/smg/servicer.py`` does: ``chunk`` deltas, then one ``complete`` with the
cumulative output; an ``Abort`` ends a held stream with ``complete(finish_reason="cancelled")``, as
``GenerationResult.abort()`` ends it in the engine. A cancelled stream's request is forgotten at once, as
TensorRT-LLM's ``GrpcRequestManager.generate`` forgets it (its ``finally`` pops the request, and a handler
cancelled while suspended at a ``yield`` never reaches its abort): an ``Abort`` that comes after the cancel
finds nothing, so ``found_aborts`` lists only the aborts that reached a running request.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from trtllm_responses.executors.trtllm_grpc.engine import import_stubs

_, pb2, pb2_grpc = import_stubs()


@dataclass
class Script:
    """What ``Generate`` answers: chunks of tokens (each with its logprob entries), then the finish; ``hold``: wait
    after the chunks until aborted or cancelled; ``error``: an INTERNAL status instead of the finish; ``drop``: end
    the stream with no final response; ``status``: fail the call with this code after the chunks."""

    chunks: list[list[int]] = field(default_factory=lambda: [[1, 2], [3]])
    finish_reason: str = "stop"
    extra: list[int] = field(default_factory=list)  # output tokens only the complete carries
    cached_tokens: int = 0
    logprobs: list[list[Any]] | None = None  # per chunk, TokenLogprob messages
    hold: bool = False
    error: str | None = None
    drop: bool = False
    status: grpc.StatusCode | None = None

    @classmethod
    def of(cls, tokens: list[int], per_chunk: int = 3, **kwargs: Any) -> Script:
        """A script streaming ``tokens`` ``per_chunk`` at a time."""
        return cls(chunks=[tokens[i : i + per_chunk] for i in range(0, len(tokens), per_chunk)], **kwargs)


class ScriptedEngine(pb2_grpc.TrtllmServiceServicer):  # type: ignore[misc]
    """The service: answers from its attributes, records what it was sent."""

    def __init__(self) -> None:
        self.version = "1.3.0rc29"
        self.model = pb2.GetModelInfoResponse(model_id="gpt-oss-tiny", max_seq_len=8192, vocab_size=201088)
        self.health = "OK"
        self.script = Script()
        self.scripts: list[Script] = []  # taken in order, one a Generate, before ``script``
        self.requests: list[Any] = []
        self.metadata: list[dict[str, str]] = []
        self.aborts: list[tuple[str, float]] = []  # (request id, monotonic time)
        self.cancelled: list[str] = []  # streams the client cancelled
        self.found_aborts: list[str] = []  # aborts that reached a running request (the engine stopped it)
        self.ended: list[str] = []  # streams over on the engine's side (finished, aborted or cancelled)
        self._held: dict[str, asyncio.Event] = {}

    async def GetServerInfo(self, request: Any, context: Any) -> Any:
        return pb2.GetServerInfoResponse(
            version=self.version, backend="tensorrt-llm", tensor_parallel_size=1, pipeline_parallel_size=1
        )

    async def GetModelInfo(self, request: Any, context: Any) -> Any:
        return self.model

    async def HealthCheck(self, request: Any, context: Any) -> Any:
        return pb2.HealthCheckResponse(status=self.health)

    async def Abort(self, request: Any, context: Any) -> Any:
        self.aborts.append((request.request_id, time.monotonic()))
        held = self._held.get(request.request_id)
        if held is not None:
            self.found_aborts.append(request.request_id)
            held.set()
        return pb2.AbortResponse(success=held is not None, message="")

    async def Generate(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.requests.append(request)
        self.metadata.append({k: v for k, v in context.invocation_metadata()})
        rid, script = request.request_id, (self.scripts.pop(0) if self.scripts else self.script)
        try:
            sent: list[int] = []
            for index, tokens in enumerate(script.chunks):
                sent += tokens
                chunk = pb2.GenerateStreamChunk(token_ids=tokens, cached_tokens=script.cached_tokens)
                if script.logprobs is not None:
                    chunk.logprobs.extend(script.logprobs[index])
                yield pb2.GenerateResponse(request_id=rid, chunk=chunk)
            if script.status is not None:
                await context.abort(script.status, "engine went away")
            reason = script.finish_reason
            if script.hold:
                self._held[rid] = asyncio.Event()
                await self._held[rid].wait()
                reason = "cancelled"
            if script.drop:
                return
            if script.error is not None:  # as smg/servicer.py fails a request: a gRPC status
                await context.abort(grpc.StatusCode.INTERNAL, script.error)
            complete = pb2.GenerateComplete(
                output_token_ids=sent + script.extra, finish_reason=reason, cached_tokens=script.cached_tokens
            )
            yield pb2.GenerateResponse(request_id=rid, complete=complete)
        except asyncio.CancelledError:
            self.cancelled.append(rid)
            raise
        finally:
            self._held.pop(rid, None)
            self.ended.append(rid)


async def serve_double(engine: ScriptedEngine) -> tuple[Any, int]:
    """A grpc.aio server of ``engine`` on a free loopback port: (server, port)."""
    server = grpc.aio.server()
    pb2_grpc.add_TrtllmServiceServicer_to_server(engine, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


class DoubleInThread:
    """A :class:`ScriptedEngine` served from a thread of its own (its own event loop), for a ``serve`` process
    to reach over loopback while the test drives that process."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc-double", daemon=True)
        self._thread.start()
        self._server, self.port = asyncio.run_coroutine_threadsafe(serve_double(engine), self._loop).result(
            10
        )
        self.url = f"grpc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(None), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
