"""The gRPC executor (``serve --engine trtllm-grpc --engine_url grpc://HOST:PORT``, repeatable, and
``--engine_urls_file``): gpt-oss on TensorRT-LLM engines in other processes or on other hosts, over TensorRT-LLM's
token-in/token-out gRPC service (``trtllm-serve MODEL --grpc``: ``tensorrt_llm/grpc/trtllm_service.proto``, the
protocol SMG drives), or over its second wire, OpenEngine (``--grpc_protocol openengine``, ``trtllm-serve MODEL
--grpc --grpc-protocol openengine``: ``openengine_engine.py``, docs/a-fleet-of-engines.md#openengine-one-engine-or-a-pool).
Each wire's engine builds its requests and reads its responses (``engine.Engine``); what follows is shared.

It does what the in-process executor (``executors/trtllm.py``) does where the protocol carries it: Harmony's stop tokens,
sampling as the engines' release applies it (``GetServerInfo`` names the release: ``trtllm_releases.py``),
constraints as structural tags, logprobs, cached tokens, the tenant's cache salt, abort (the ``Abort`` call to
the engine the generation runs on, and the stream cancelled) and health (``HealthCheck``, polled). What the
protocol cannot carry (KV retention, the session's placement inside an engine, priority) and what the engine is
told but does not apply: docs/a-fleet-of-engines.md#one-remote-engine.

The engines are a pool (``pool.py``: placement by session key, health, engines joining and leaving on
SIGHUP): every engine must agree on the release's sampling, the vocabulary and the context window. A
generation whose engine fails before any token reached the reader is retried once on another engine; one that
fails after raises ExecutorError, and the response ends ``response.failed`` (``server_error``, which clients
retry): docs/a-fleet-of-engines.md#a-pool-of-engines.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial
from typing import Any

from ...harmony import HarmonyEncoding, SpelledControlTokens
from ..base import Executor, ExecutorError, GenerationRequest, TokenDelta
from ..trtllm_releases import MIN_TRTLLM_VERSION, Release
from .calls import Responses, engine_fault
from .disagg import Split
from .engine import CONNECT_TIMEOUT_S, Engine, EngineInfo, GrpcEngine, Reader
from .messages import trace_metadata
from .pool import EngineList, EnginePool

__all__ = ["HEALTH_INTERVAL_S", "PROTOCOLS", "TrtllmGrpcExecutor"]

logger = logging.getLogger(__name__)

#: How often each engine's ``HealthCheck`` is asked while it is healthy (``/health`` answers from the last
#: answers; an engine out of placement is asked again sooner, ``pool.py``).
HEALTH_INTERVAL_S = 5.0
#: ``serve --grpc_protocol``: the wires TensorRT-LLM's gRPC server speaks (``trtllm-serve --grpc-protocol``).
PROTOCOLS = ("smg", "openengine")


def _engine_class(protocol: str) -> Callable[[str], Engine]:
    """The engine of a URL on ``protocol``'s wire."""
    if protocol == "openengine":
        from .openengine_engine import OpenEngineEngine

        return OpenEngineEngine
    return GrpcEngine


@dataclass(slots=True)
class _Running:
    """One generation on an engine: the engine, its call and what it answered, and its ``Abort`` once sent (None:
    not sent)."""

    engine: Engine
    call: Any
    responses: Responses
    abort_sent: asyncio.Task[None] | None = None

    @property
    def aborted(self) -> bool:
        return self.abort_sent is not None


class _NothingSent(ExecutorError):
    """The engine failed before any token reached the reader: the generation may run elsewhere."""


class TrtllmGrpcExecutor(Executor):
    """Serves generations from a pool of remote TensorRT-LLM gRPC engines (one or more).

    ``urls``: ``grpc://HOST:PORT``, one or several; ``urls_file``: a file of more (``pool.read_urls_file``),
    read at start and again on :meth:`reload` (SIGHUP). ``encoding``: the Harmony encoding the server renders
    with (its vocabulary reads spelled control tokens under constraints, and is checked against the engines').
    ``guided`` (``serve --guided_decoding``): ``off`` refuses constrained requests (engines started without
    xgrammar); ``on`` sends them as structural tags. ``health_interval``: seconds between health checks of a
    healthy engine; ``connect_timeout``: how long :meth:`start` waits for the engines. ``protocol``
    (``serve --grpc_protocol``): the engines' wire, ``smg`` (``trtllm.TrtllmService``, ``engine.GrpcEngine``) or
    ``openengine`` (``openengine.v1``, ``openengine_engine.OpenEngineEngine``); one for every engine.
    ``prefill_urls`` and ``decode_urls``, each with its file ``prefill_urls_file``, ``decode_urls_file`` (read again
    on :meth:`reload` as ``urls_file`` is), instead of ``urls``; OpenEngine only: each turn's context on a prefill
    engine, its generation on a decode engine (``disagg.py``), two pools placed by the same session key.
    """

    name = "trtllm-grpc"

    def __init__(
        self,
        urls: str | Sequence[str] = (),
        *,
        encoding: HarmonyEncoding,
        urls_file: str | None = None,
        guided: str = "on",
        health_interval: float = HEALTH_INTERVAL_S,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        protocol: str = "smg",
        prefill_urls: Sequence[str] = (),
        decode_urls: Sequence[str] = (),
        prefill_urls_file: str | None = None,
        decode_urls_file: str | None = None,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"--grpc_protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
        self.protocol = protocol
        whole = EngineList([urls] if isinstance(urls, str) else urls, urls_file, "--engine_url")
        prefill = EngineList(prefill_urls, prefill_urls_file, "--prefill_engine_url")
        decode = EngineList(decode_urls, decode_urls_file, "--decode_engine_url")

        def pool(urls: Sequence[str]) -> EnginePool:
            # ValueError now, before the server starts, for a malformed URL or none at all
            return EnginePool(
                urls,
                self._accept,
                interval=health_interval,
                connect_timeout=connect_timeout,
                make=_engine_class(protocol),
            )

        #: Disaggregated: the prefill engines (the decode engines are ``_pool``) and the two legs; None: whole turns.
        self._prefill: EnginePool | None = None
        self._split: Split | None = None
        if prefill.given or decode.given:
            if protocol != "openengine" or whole.given or not (prefill.given and decode.given):
                raise ValueError(
                    "prefill and decode engines need both sides, OpenEngine, and no engine for whole turns"
                )
            self._prefill = pool(prefill.read())
            self._pool = pool(decode.read())
            self._split = Split(self._prefill, self._pool)
            sides = [("Prefill engines", prefill, self._prefill), ("Decode engines", decode, self._pool)]
        else:
            self._pool = pool(whole.read())
            sides = [("Engines", whole, self._pool)]
        #: What :meth:`reload` reads again: each pool configured with a file.
        self._files = [side for side in sides if side[1].path is not None]
        self._encoding = encoding
        self._guided = guided
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: dict[str, _Running] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: The engines' release (``GetServerInfo.version`` of the first described), known once started.
        self.trtllm_release: Release | None = None
        self._first: tuple[str, EngineInfo, Release] | None = None
        if guided == "off":
            self.constraint_refusal = (
                "this server runs without guided decoding (serve --guided_decoding off), so it cannot constrain "
                "what the model writes: structured outputs (text.format json_schema), required or named tool "
                "choices and custom-tool grammars are refused"
            )

    @property
    def pool(self) -> EnginePool:
        """The engines generations run on."""
        return self._pool

    async def start(self) -> None:
        """Connect every engine, check what each serves, start the health checks; ExecutorError when an engine
        reached cannot be served, or none can be reached."""
        self._loop = asyncio.get_running_loop()
        await self._pool.start()
        if self._prefill is not None:
            try:
                await self._prefill.start()
            except BaseException:
                await self._pool.close()
                raise
            self._check_handoff(self._prefill)
        self._started = True
        if not self.healthy():
            logger.warning("No engine is healthy yet: %s", self.engines_health())

    @staticmethod
    def _check_handoff(prefill: EnginePool) -> None:
        """Warn of what the prefill engines said of their KV transfer: none (no cache transceiver: a context
        cannot be handed off), and no ``Abort(kv_session)`` (a context whose generation leg never runs is held
        until ``kv_transfer_timeout_ms``)."""
        for engine in prefill.engines():
            connector = getattr(engine, "kv_connector", None)
            if connector is None:
                continue
            if not connector.enabled:
                logger.warning(
                    "The prefill engine %s has no KV transfer (cache_transceiver_config): it cannot hand a "
                    "context off to a decode engine",
                    engine.url,
                )
            elif not connector.abort_cleanup:
                logger.warning(
                    "The prefill engine %s cannot free a context whose generation leg never runs "
                    "(supports_abort_cleanup false): set cache_transceiver_config.kv_transfer_timeout_ms on it",
                    engine.url,
                )

    def _accept(self, url: str, info: EngineInfo) -> None:
        """Take the engine's facts (the first engine's set what is served; every other must agree), or
        ExecutorError saying why this engine cannot be served."""
        release = Release(info.version)
        key = release.key
        if key is None or key[:2] < MIN_TRTLLM_VERSION:
            wanted = ".".join(map(str, MIN_TRTLLM_VERSION))
            raise ExecutorError(
                f"the engine at {url} runs TensorRT-LLM {info.version or '(version not said)'}; this server "
                f"needs TensorRT-LLM {wanted} or newer (structured outputs and tool calls are xgrammar structural "
                "tags): run a newer trtllm-serve --grpc (docs/a-fleet-of-engines.md#one-remote-engine)"
            )
        if self.protocol == "smg" and release.grpc_refusal is not None:
            raise ExecutorError(f"the engine at {url}: {release.grpc_refusal}")
        first_special = min(self._encoding.special_ids)
        if 0 < info.vocab_size < first_special:
            raise ExecutorError(
                f"the engine at {url} serves {info.model_id or 'a model'} with a vocabulary of "
                f"{info.vocab_size} tokens, smaller than gpt-oss's o200k_harmony ({first_special} ordinary "
                "tokens): it is not a gpt-oss model"
            )
        if self._first is not None:
            _agree(url, info, release, *self._first)
            return
        self._first = (url, info, release)
        self._serve_as(info, release)

    def _serve_as(self, info: EngineInfo, release: Release) -> None:
        """What is served, from the first engine described (every other agrees with it)."""
        self.trtllm_release = release
        self.unapplied_sampling = release.unapplied_sampling
        self.seed_note = release.seed_note
        for reason in self.unapplied_sampling.values():
            logger.warning("%s", reason)
        if info.max_seq_len > 0:
            self.max_seq_len = info.max_seq_len
        if self.protocol == "openengine":
            # OpenEngine carries the salt as a string, and TensorRT-LLM's adapter passes it on to generate_async
            # (tensorrt_llm/grpc/openengine/servicer.py: cache_salt=request.kv.cache_salt): tenants stay apart.
            self.prefix_isolation_refusal = None
        else:
            self.prefix_isolation_refusal = (
                f"TensorRT-LLM's gRPC server ({info.version}) does not pass GenerateRequest.cache_salt_id on to the "
                "engine (tensorrt_llm/grpc/smg/servicer.py, Generate): one tenant's prompt would reuse another's "
                "KV-cache blocks. Serve tenants with --engine trtllm, or one engine per tenant."
            )
        logger.info(
            "Engines serve TensorRT-LLM %s, %s, context window %d tokens (tp %d, pp %d)",
            info.version,
            info.model_id or "model not named",
            self.max_seq_len,
            info.tensor_parallel_size,
            info.pipeline_parallel_size,
        )

    def healthy(self) -> bool:
        """Whether some engine's last ``HealthCheck`` answered ``OK`` (False before start); disaggregated, some
        prefill engine and some decode engine."""
        prefill = self._prefill is None or self._prefill.healthy()
        return self._started and self._pool.healthy() and prefill

    def engines_health(self) -> dict[str, bool]:
        """Each engine of the pool (both pools, disaggregated): whether it is in placement."""
        health = dict(self._pool.health())
        for url, ok in ({} if self._prefill is None else self._prefill.health()).items():
            health[url] = health.get(url, True) and ok
        return health

    def held_contexts(self) -> int:
        """Contexts handed off whose generation leg never ran, since start (``disagg.HELD``)."""
        return 0 if self._split is None else self._split.held

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        """Stream an engine's chunks as deltas; its ``complete`` is the last delta (with any tokens the chunks
        did not carry). The engine is the pool's choice for the session; one that fails before any token was
        yielded is left for another, once. A failed call (the engine's errors are gRPC statuses) or a stream
        that ends without a ``complete`` raises ExecutorError. Closing this generator before the last delta
        cancels the call and sends ``Abort``."""
        if not self._started:
            raise ExecutorError("the TensorRT-LLM gRPC executor was not started")
        if self._split is not None:
            whole = self._split.generate(request, self.unapplied_sampling, self._with_retry, self._run_on)
        else:
            whole = self._with_retry(
                self._pool, request, lambda e, retry: self._run_on(e, request, retry=retry)
            )
        async with aclosing(whole) as deltas:
            async for delta in deltas:
                yield delta

    async def _with_retry(
        self,
        pool: EnginePool,
        request: GenerationRequest,
        run: Callable[[Engine, bool], AsyncGenerator[TokenDelta, None]],
    ) -> AsyncGenerator[TokenDelta, None]:
        """``run(engine, retry)`` on the engine of ``pool`` the session's key chooses; once more on another
        when the first fails before any token was yielded (_NothingSent)."""
        engine = pool.choose(request.session_key)
        try:
            # aclosing: closing this generator closes the attempt now (its call cancelled, its engine's load
            # counted down), not whenever the collector finds it.
            async with aclosing(run(engine, True)) as deltas:
                async for delta in deltas:
                    yield delta
            return
        except _NothingSent as failed:
            try:
                other = pool.choose(request.session_key, avoid=(engine.url,))
            except ExecutorError:
                raise ExecutorError(str(failed)) from failed
            logger.warning("%s; %s runs on %s instead", failed, request.request_id, other.url)
        async with aclosing(run(other, False)) as deltas:
            async for delta in deltas:
                yield delta

    async def _run_on(
        self,
        engine: Engine,
        request: GenerationRequest,
        *,
        retry: bool,
        pool: EnginePool | None = None,
        message: Any = None,
        reader: Reader | None = None,
    ) -> AsyncGenerator[TokenDelta, None]:
        """One attempt of :meth:`generate` on ``engine`` (of ``pool``, else the pool); ``retry``: raise
        _NothingSent for an engine's failure before any token was yielded (an abort asked for, or the request's
        own fault, is never retried). ``message`` and ``reader``: a leg's, instead of the engine's own."""
        pool = pool or self._pool
        if message is None:
            message = engine.request(request, self.unapplied_sampling)
        call = engine.generate(message, trace_metadata(request))
        responses = Responses(engine, call, lambda why: pool.lost(engine, why))
        self._tasks.add(responses.task)  # held until the call ends (the loop holds tasks weakly)
        responses.task.add_done_callback(self._tasks.discard)
        running = self._running[request.request_id] = _Running(engine, call, responses)
        spelled = None if request.constraint is None else SpelledControlTokens(self._encoding)
        reader = reader or engine.reader(request.sampling.logprobs)
        yielded = finished = False
        try:
            with pool.running(engine):
                async for response in running.responses:
                    step = reader.read(response)
                    if step is None:
                        continue
                    tokens, logprobs = step.tokens, step.logprobs
                    if step.finish is None:
                        if spelled is not None:
                            tokens, logprobs = spelled.read(tokens, logprobs)
                        if tokens:
                            yielded = True
                            yield TokenDelta(tokens, cached_tokens=step.cached_tokens, logprobs=logprobs)
                        continue
                    finished = True
                    if spelled is not None:
                        tokens, logprobs = spelled.read(tokens, logprobs, last=True)
                    reason, error = step.finish
                    yield TokenDelta(tokens, reason, error, step.cached_tokens, logprobs)
                    return
                if reader.ended:  # a context leg's hand-off: the stream ends there
                    finished = True
                    return
                raise ExecutorError(
                    f"the engine at {engine.url} closed the stream without finishing the generation"
                )
        except ExecutorError as exc:
            finished = True  # the call is over on the engine's side: nothing to abort
            if yielded:
                raise ExecutorError(
                    f"{exc}, mid-stream: retry the request (the session's next turn runs on a healthy engine)"
                ) from exc
            if retry and not running.aborted and engine_fault(exc):
                raise _NothingSent(str(exc)) from exc
            raise
        finally:
            if self._running.get(request.request_id) is running:
                del self._running[request.request_id]
                if not finished:
                    self._stop(running, request.request_id)

    def _stop(self, running: _Running, request_id: str) -> None:
        """A generation nobody reads any more: ``Abort`` it (unless sent already), then cancel its call once the
        engine answered. In that order: TensorRT-LLM forgets a cancelled stream's request (its
        ``GrpcRequestManager.generate`` pops it in a ``finally``, and a handler cancelled while suspended at a
        ``yield`` never reaches its abort), so an ``Abort`` after the cancel finds nothing while the engine
        goes on generating to ``max_tokens``."""
        abort = running.abort_sent or self._send_abort(running, request_id)
        if abort is None:  # no loop: shutting down
            running.call.cancel()
            return
        call = running.call

        async def cancel_once_aborted() -> None:
            try:
                await asyncio.wait((abort,))
            finally:
                call.cancel()

        self._spawn(cancel_once_aborted)

    def abort(self, request_id: str) -> None:
        """Send ``Abort`` for ``request_id`` to the engine it runs on (its stream then ends ``cancelled``); a
        no-op when it is not running."""
        if self._split is not None:
            self._split.cancelled(request_id)  # no generation leg starts after this
        running = self._running.get(request_id)
        if running is None or running.aborted:
            return
        self._send_abort(running, request_id)

    def _send_abort(self, running: _Running, request_id: str) -> asyncio.Task[None] | None:
        running.abort_sent = self._spawn(lambda: running.engine.abort(request_id))
        return running.abort_sent

    def _spawn(self, make: Callable[[], Any]) -> asyncio.Task[None] | None:
        """Run the coroutine ``make()`` makes on the loop, keeping it referenced until done; the task (None: no
        loop, shutting down)."""
        try:
            task = asyncio.get_running_loop().create_task(make())
        except RuntimeError:  # no loop: shutting down
            return None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def reload(self) -> None:
        """Read the files of engines again (``urls_file``, or each side's; SIGHUP; safe in a signal handler):
        engines added join, engines gone drain. A file that does not read, or leaves its pool no engine, is
        logged and changes nothing for that pool."""
        if self._files and self._loop is not None and self._started:
            self._loop.call_soon_threadsafe(self._reload_now)

    def _reload_now(self) -> None:
        for what, listed, pool in self._files:
            urls = listed.reread(what)
            if urls is not None:
                self._spawn(partial(pool.update, urls))

    async def shutdown(self) -> None:
        """Abort what runs, stop the health checks, close the channels."""
        for request_id in list(self._running):
            self.abort(request_id)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=2.0)
        self._started = False
        await self._pool.close()
        if self._prefill is not None:
            await self._prefill.close()


def _agree(
    url: str, info: EngineInfo, release: Release, first_url: str, first: EngineInfo, ours: Release
) -> None:
    """ExecutorError unless the engine at ``url`` serves what the first one (``first_url``) does: the same
    vocabulary, context window and sampling the release applies (a session moves between them)."""
    differ = [
        f"{what} {theirs} where {first_url} has {mine}"
        for what, theirs, mine in (
            ("a vocabulary of", info.vocab_size, first.vocab_size),
            ("a context window of", info.max_seq_len, first.max_seq_len),
        )
        if theirs != mine
    ]
    if sorted(release.unapplied_sampling) != sorted(ours.unapplied_sampling):
        differ.append(
            f"TensorRT-LLM {info.version}, whose sampler applies other settings than {first.version} at {first_url}"
        )
    if differ:
        raise ExecutorError(
            f"the engine at {url} does not serve what the other engines of the pool do: it has {'; '.join(differ)}"
            " (every engine of a pool must serve the same model with the same window: a session moves between them)"
        )
