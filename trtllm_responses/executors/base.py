"""The executor seam: prompt token ids and sampling settings in, token deltas out.

An executor is the only part of the server that knows about a model runtime.
The server calls ``generate`` once per response and iterates what it yields:
each :class:`TokenDelta` is what one engine step produced (one token, or
several with ``stream_interval`` or speculative decoding). The last delta
carries a ``finish_reason``. ``abort(request_id)`` asks the executor to stop a
generation early (client gone, server shutting down); its stream then ends
with ``finish_reason="cancelled"`` or simply stops.

Implementations: ``echo.EchoExecutor`` (no model, deterministic) and
``trtllm.TrtllmExecutor`` (TensorRT-LLM's LLM API; the only place
``tensorrt_llm`` is imported).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..constraints import Constraint

__all__ = [
    "EngineLoad",
    "Executor",
    "ExecutorError",
    "FinishReason",
    "GenerationRequest",
    "Generating",
    "KvRelease",
    "SamplingSettings",
    "TokenDelta",
]

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    """How to sample (``responses/sampling.py`` resolves them from the request and the operator's defaults).

    ``temperature`` and ``top_p`` are always stated: TensorRT-LLM samples greedily when they are
    unset. The others are ``None`` when nobody set them (the engine's own behaviour).
    """

    max_tokens: int
    stop_token_ids: tuple[int, ...]
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    logprobs: int | None = None  # top alternatives per output token (0-20); None: no logprobs
    top_k: int | None = None
    min_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One generation: a prompt and how to sample its continuation."""

    request_id: str
    prompt_token_ids: list[int]
    sampling: SamplingSettings
    constraint: Constraint | None = None  # what the output must obey (see constraints/base.py)
    priority: float | None = (
        None  # scheduling priority in [0, 1] (from service_tier); None: the engine's default
    )
    cache_retention_seconds: int | None = (
        None  # keep the prompt's KV cache at least this long (prompt_cache_options.ttl)
    )
    #: The session this generation belongs to (``request/affinity.py``): turns of one session extend one
    #: KV-cache prefix, so an engine that places requests (attention-DP ranks) keeps them together.
    session_key: str | None = None
    #: The session key of the agent that spawned this one (a sub-agent's parent, named by the client's headers:
    #: docs/sessions-and-kv-cache.md#identity): its prefix may be where this session's first turn finds one.
    session_parent: str | None = None
    #: The client said the session ends with this response (Dynamo's ``x-dynamo-session-final: true``): nothing
    #: will extend this prompt after the response, so its KV cache is released once the response ends.
    session_final: bool = False
    #: The KV-cache salt of the tenant asking (``Tenant.salt``): its prompt reuses only blocks made by
    #: requests with the same salt (None: any), so prefix reuse, and the time to first token it saves, never
    #: crosses tenants (docs/tenants.md#sealed-content-kv-prefixes-and-caches).
    cache_salt: str | None = None
    #: The turn may end waiting for a tool the client runs (the request declares function or custom tools): an
    #: engine that keeps KV-cache blocks by priority keeps this turn's raised for a bounded pause
    #: (docs/sessions-and-kv-cache.md#retention).
    client_tools: bool = False
    #: The W3C trace context (``traceparent``, and ``tracestate`` when there is one; lower-case names, the values as
    #: ``ops.tracing.inject()`` wrote them) of the span this generation runs under, so the engine's own spans join
    #: that trace; None when tracing is off or nothing is sampled. Never another header, never content. An executor
    #: hands it on where its engine takes it (TensorRT-LLM's ``generate_async(trace_headers=...)``) and ignores it
    #: elsewhere (docs/tracing-and-dashboards.md#into-the-engine).
    trace_headers: Mapping[str, str] | None = None


#: Why a session's KV cache is let go (:meth:`Executor.release`): ``answered``, the turn ended with a final answer
#: (back to the engine's normal priority: the session may still continue); ``ended``, no one will reuse it (the
#: session ended, the response was deleted, the history was compacted away).
KvRelease = Literal["answered", "ended"]


@dataclass(slots=True)
class TokenDelta:
    """What one engine step produced.

    Made once per engine step, so a plain slotted class (a frozen dataclass
    constructs several times slower); treat it as immutable.

    ``token_ids`` are the new tokens (possibly several, possibly none on the last
    delta). ``finish_reason`` is set on the last delta only; ``error`` explains
    ``finish_reason="error"``. ``cached_tokens`` is how many prompt tokens the
    engine reused from its KV cache, when it reports that. ``logprobs`` is set only
    when the request asked for logprobs.
    """

    token_ids: Sequence[int]
    finish_reason: FinishReason | None = None
    error: str | None = None
    cached_tokens: int | None = None
    #: Per token, when logprobs were asked for: (its logprob, [(token id, logprob), ...] best first).
    logprobs: Sequence[tuple[float, Sequence[tuple[int, float]]]] | None = None


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """What the engine last said of its load (TensorRT-LLM's iteration stats and KV capacity); None: not said."""

    kv_used_blocks: int | None = None
    kv_max_blocks: int | None = None
    kv_tokens_per_block: int | None = None
    queued_requests: int | None = None
    active_requests: int | None = None


class ExecutorError(RuntimeError):
    """The executor failed to run a generation (reported to the client as ``response.failed``)."""


class Executor(abc.ABC):
    """A model runtime behind the server. One instance serves every request of a process."""

    #: A short name for logs and ``/v1/models`` (``echo``, ``trtllm``).
    name: str = "executor"
    #: Prompt plus output tokens the model can hold.
    max_seq_len: int = 131072
    #: The longest prompt the engine takes (TensorRT-LLM without chunked prefill: ``max_num_tokens``);
    #: ``None``: any prompt the context window holds. Longer prompts are refused before generation.
    max_prompt_tokens: int | None = None
    #: Sampling settings (``SamplingSettings`` field names) the engine accepts but would not apply, each with
    #: why: a request that sets one is refused, or has it dropped (``serve --unsupported_sampling``), never
    #: echoed as applied. Known once :meth:`start` has run.
    unapplied_sampling: Mapping[str, str] = MappingProxyType({})
    #: What a request's ``seed`` guarantees where the engine applies it but it need not reproduce a response
    #: (TensorRT-LLM 1.3.0rc29/1.4.0rc1: only when sampled alone), said in the response's ``sampling_notes``;
    #: ``None``: nothing to say. Known once :meth:`start` has run.
    seed_note: str | None = None
    #: Why the engine cannot run constrained generations (structured outputs, required tool calls, grammars),
    #: or ``None`` when it can: such requests are refused with a 400 saying this.
    constraint_refusal: str | None = None
    #: Why the engine would reuse one tenant's KV-cache prefix for another's prompt (it cannot take
    #: ``GenerationRequest.cache_salt``), or ``None`` when it keeps salts apart or reuses nothing: a server
    #: with a tenants file refuses to start on such an engine. Known once :meth:`start` has run.
    prefix_isolation_refusal: str | None = None
    #: Tokens per KV-cache block of the engine (what a prefix is reused in); None: the engine caches none.
    kv_block_tokens: int | None = None
    #: Whether :meth:`release` reaches the engine (False: a no-op, so callers skip the work of asking).
    releases_kv: bool = False

    def engine_load(self) -> EngineLoad | None:
        """The engine's load as last sampled (docs/sessions-and-kv-cache.md#kv-events-and-metrics); None when
        the engine reports none."""
        return None

    def healthy(self) -> bool:
        """Whether the engine can still generate (``/health`` answers 503 when it cannot)."""
        return True

    def engines_health(self) -> Mapping[str, bool]:
        """Per engine of a pool (its URL: whether it takes generations now), for ``/metrics``; {} for an
        executor of one engine."""
        return {}

    def held_contexts(self) -> int:
        """Contexts a prefill engine handed off whose generation leg never ran, since start (disaggregated
        serving: they stay held there until its KV transfer times out); 0 for an executor that does not split."""
        return 0

    def attach_env(self, frontend: int) -> dict[str, str]:
        """What attached frontend ``frontend`` of a group (``serve --num_serve_frontends``) needs in its
        environment to reach this executor's engine; {}: every frontend runs an executor of its own."""
        return {}

    def prompt_refusal(self, prompt_tokens: int) -> str | None:
        """Why a prompt of ``prompt_tokens`` cannot be generated from (``None``: it can, with room to answer)."""
        if prompt_tokens >= self.max_seq_len:
            return f"The input is {prompt_tokens} tokens; this model's context window is {self.max_seq_len} tokens."
        if self.max_prompt_tokens is not None and prompt_tokens > self.max_prompt_tokens:
            return (
                f"The input is {prompt_tokens} tokens; this server takes prompts of at most "
                f"{self.max_prompt_tokens} tokens (TensorRT-LLM's max_num_tokens, with chunked prefill off)."
            )
        return None

    @abc.abstractmethod
    def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        """Stream the continuation of ``request.prompt_token_ids``, one delta per engine step.

        The stream ends after the delta that carries a ``finish_reason``. It may
        raise :class:`ExecutorError` (or any exception) on failure.
        """

    @abc.abstractmethod
    def abort(self, request_id: str) -> None:
        """Stop the generation of ``request_id`` if it is running; a no-op otherwise."""

    def release(
        self,
        session_key: str | None,
        token_ids: Sequence[int],
        cache_salt: str | None,
        *,
        keep: int = 0,
        why: KvRelease = "ended",
    ) -> None:
        """Tell the engine the KV cache of ``token_ids[keep:]`` (a session's tokens as it last sent them, salted with
        ``cache_salt``) is ``why``: answered (normal priority again) or ended (released, else evicted first).
        Returns at once; the engine carries it out on its own time (docs/sessions-and-kv-cache.md#retention). A
        no-op by default (an engine that keeps no cache, or cannot be told)."""

    def reload(self) -> None:
        """Read again what the executor was configured from (SIGHUP; the gRPC executor's file of engines). Safe
        in a signal handler: it returns at once, its work scheduled on the loop. A no-op by default."""

    async def start(self) -> None:
        """Get ready to serve (load a model). Called once before the first request."""

    async def shutdown(self) -> None:
        """Abort what is running and release resources. Called once at server shutdown."""


class Generating:
    """One generation, read with ``async with Generating(executor, request) as deltas: async for ...``.

    Leaving the block closes its deltas, and aborts the generation if no delta with a
    ``finish_reason`` was read (the reader stopped early, or raised): an engine request
    nobody reads never keeps generating.
    """

    def __init__(self, executor: Executor, request: GenerationRequest) -> None:
        self._executor = executor
        self._request_id = request.request_id
        self._deltas = executor.generate(request)
        self.finished = False  # a delta with a finish_reason was read

    async def __aenter__(self) -> Generating:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self.finished:
            self._executor.abort(self._request_id)
        await self._deltas.aclose()

    def __aiter__(self) -> Generating:
        return self

    async def __anext__(self) -> TokenDelta:
        delta = await self._deltas.__anext__()
        if delta.finish_reason is not None:
            self.finished = True
        return delta
