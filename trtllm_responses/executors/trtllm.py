"""The TensorRT-LLM executor: gpt-oss on TensorRT-LLM's LLM API. With ``trtllm_setup.py`` (its set-up checks,
re-exported here), the only place ``tensorrt_llm`` is imported; what each release offers is ``trtllm_releases.py``.

One ``tensorrt_llm.LLM`` per process (:meth:`TrtllmExecutor.start`); each response is one streaming
``generate_async``, each step's ``token_ids_diff`` one :class:`TokenDelta` (the server parses
tokens: TensorRT-LLM does not detokenize). Sampling is always stated, constraints become a
structural tag (``constraints/guided.py``), and ``abort`` is carried out by TensorRT-LLM
asynchronously. The call, finish reasons, versions and what is refused before generating:
docs/serving-on-tensorrt-llm.md#serving-gpt-oss-on-tensorrt-llm.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import os
import secrets
import tempfile
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from ..constraints import Constraint, structural_tag
from ..harmony import HarmonyEncoding, SpelledControlTokens, load_encoding
from .base import (
    EngineLoad,
    Executor,
    ExecutorError,
    GenerationRequest,
    KvRelease,
    SamplingSettings,
    TokenDelta,
)
from .kv_publisher import KvEventsSettings
from .trtllm_kv import (
    AFFINITY_KEY,
    DEFAULT_TOOL_PAUSE_SECONDS,
    affinity_on,
    attention_dp_rank,
    release_config,
    turn_config,
)
from .trtllm_releases import Release, one_model_drafting
from .trtllm_setup import (
    MIN_TRTLLM_VERSION,
    MULTI_FRONTEND_SINCE,
    TrtllmUnavailableError,
    build_tensorrt_engine,
    check_backend,
    check_frontends,
    check_llm_arguments,
    check_trtllm_version,
    import_tensorrt_llm,
)
from .trtllm_watch import EngineWatch, kv_block_tokens, watch_for, with_kv_events

__all__ = [
    "DEFAULT_TOOL_PAUSE_SECONDS",
    "MIN_TRTLLM_VERSION",
    "MULTI_FRONTEND_SINCE",
    "KvEventsSettings",
    "Release",
    "TrtllmExecutor",
    "TrtllmUnavailableError",
    "attention_dp_rank",
    "build_tensorrt_engine",
    "check_backend",
    "check_frontends",
    "check_llm_arguments",
    "check_trtllm_version",
    "import_tensorrt_llm",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LEN = 131072  # gpt-oss's context window
#: TensorRT-LLM's default ``max_num_tokens`` (``BuildConfig.max_num_tokens``, ``llmapi/llm_args.py``).
DEFAULT_MAX_NUM_TOKENS = 8192
_FINISH = {"stop": "stop", "length": "length", "cancelled": "cancelled"}
#: Releases (:meth:`TrtllmExecutor.release`) waiting for the engine at most; past it one is dropped (logged).
MAX_PENDING_RELEASES = 256
#: The guided decoding backend that takes structural tags (TensorRT-LLM's PyTorch backend).
GUIDED_DECODING_BACKEND = "xgrammar"


class TrtllmExecutor(Executor):
    """Serves generations from one ``tensorrt_llm.LLM``.

    ``llm_kwargs`` are the LLM constructor's keyword arguments (TorchLlmArgs
    names: ``model``, ``tensor_parallel_size``, ``kv_cache_config`` …), already
    merged from flags, bundle and YAML and checked. ``end_id`` is the token
    TensorRT-LLM treats as end of sequence (Harmony's ``<|return|>``). ``guided``
    (``serve --guided_decoding``): ``on`` builds the LLM with xgrammar guided decoding,
    ``off`` without it (constrained requests are then refused). ``kv_events`` (``serve --kv_events_endpoint``):
    the engine's KV cache events published for a KV-aware router (``trtllm_watch.py``). ``otlp_traces_endpoint``
    (``serve --otlp_traces_endpoint``): handed to the LLM as trtllm-serve hands its flag, where the release takes it
    (docs/tracing-and-dashboards.md#into-the-engine).
    """

    name = "trtllm"
    releases_kv = True

    def __init__(
        self,
        llm_kwargs: dict[str, Any],
        *,
        end_id: int,
        backend: str = "pytorch",
        frontends: int = 1,
        attached: bool = False,
        encoding: HarmonyEncoding | None = None,
        guided: str = "on",
        kv_events: KvEventsSettings | None = None,
        tool_pause_seconds: int = DEFAULT_TOOL_PAUSE_SECONDS,
        otlp_traces_endpoint: str | None = None,
    ) -> None:
        self._kv_events = kv_events
        self._otlp_traces_endpoint = otlp_traces_endpoint
        self._kwargs = with_kv_events(dict(llm_kwargs), kv_events)
        self._watch: EngineWatch | None = None
        self.kv_block_tokens = kv_block_tokens(self._kwargs.get("kv_cache_config"))
        #: ``serve --kv_tool_pause_seconds``: how long a turn that may end in a client tool call keeps its KV
        #: cache raised (docs/sessions-and-kv-cache.md#retention).
        self._tool_pause_seconds = tool_pause_seconds
        #: The engine places sessions itself (conversation affinity): known once started.
        self._affinity = False
        self._releases: set[asyncio.Task[None]] = set()
        #: The vocabulary constrained generations are read with (spelled control tokens, ``harmony/spelled.py``).
        self._encoding = encoding
        #: ``serve --num_serve_frontends``: K frontends on one engine; ``attached``: this one is not the launcher.
        self._frontends = frontends
        self._attached = attached
        if (
            frontends > 1
        ):  # the same arguments in every frontend, as trtllm-serve's children re-exec its command
            self._kwargs["num_serve_frontends"] = frontends
        self._backend = backend
        self._end_id = end_id
        self._llm: Any = None
        self._trtllm: Any = None
        self._running: dict[str, Any] = {}
        self._generate_parameters: frozenset[str] | None = None  # generate_async's keywords, read once
        self._guided = guided
        #: The operator's LLM arguments name the guided decoding backend themselves (not this executor's default).
        self._guided_explicit = self._kwargs.get("guided_decoding_backend") is not None
        if guided == "off":
            if self._kwargs.get("guided_decoding_backend") is not None:
                raise ValueError(
                    "--guided_decoding off, but the LLM arguments set guided_decoding_backend: drop one of them"
                )
            self.constraint_refusal = (
                "this server runs TensorRT-LLM without guided decoding (serve --guided_decoding off), so it cannot "
                "constrain what the model writes: structured outputs (text.format json_schema), required or named "
                "tool choices and custom-tool grammars are refused"
            )
        else:
            backend_choice = self._kwargs.setdefault("guided_decoding_backend", GUIDED_DECODING_BACKEND)
            if backend_choice != GUIDED_DECODING_BACKEND:
                raise ValueError(
                    f"guided_decoding_backend must be {GUIDED_DECODING_BACKEND!r}: structured outputs, required tool "
                    f"calls and custom-tool grammars are xgrammar structural tags (got {backend_choice!r})"
                )
        #: Attention data parallelism: each of tensor_parallel_size ranks has a KV cache of its own, so a
        #: session's turns are sent to one rank (``scheduling_params``) to reuse its prefix there.
        self._dp_ranks = (
            int(self._kwargs.get("tensor_parallel_size") or 1)
            if self._kwargs.get("enable_attention_dp")
            else 1
        )
        #: The TensorRT-LLM release running (``trtllm_releases.py``), known once started.
        self.trtllm_release: Release | None = None
        self.max_seq_len = int(self._kwargs.get("max_seq_len") or DEFAULT_MAX_SEQ_LEN)
        self.max_prompt_tokens = _prompt_limit(
            self._kwargs.get("enable_chunked_prefill"), self._kwargs.get("max_num_tokens"), backend
        )

    def _llm_class(self) -> Any:
        if self._backend == "tensorrt":
            return importlib.import_module("tensorrt_llm._tensorrt_engine").LLM
        return self._trtllm.LLM

    def _constructor_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self._kwargs)
        adp = kwargs.get("attention_dp_config")
        if (
            self._dp_ranks > 1
            and self.trtllm_release is not None
            and self.trtllm_release.conversation_affinity
            and (adp is None or isinstance(adp, Mapping))
            and AFFINITY_KEY not in (adp or {})
        ):
            # The engine's own placement of a conversation's turns (docs/sessions-and-kv-cache.md#placement); off
            # by default in TensorRT-LLM, on here unless the operator's YAML says otherwise.
            kwargs["attention_dp_config"] = {**(adp or {}), AFFINITY_KEY: True}
        release = self.trtllm_release
        if self._otlp_traces_endpoint and release is not None and release.otlp_traces_endpoint:
            # As trtllm-serve does with its flag (tensorrt_llm/commands/serve.py, get_llm_args: "otlp_traces_endpoint":
            # otlp_traces_endpoint in the LLM arguments; its YAML overrides the flag, so a YAML value wins here too).
            kwargs.setdefault("otlp_traces_endpoint", self._otlp_traces_endpoint)
        if kwargs.get("otlp_traces_endpoint"):
            # TensorRT-LLM writes its llm_request span only for a request with performance metrics, which
            # generate_async asks for under return_perf_metrics: asked for engine traces, the operator gets
            # them, unless the YAML says otherwise
            # (docs/tracing-and-dashboards.md#what-tensorrt-llm-adds-to-the-trace).
            kwargs.setdefault("return_perf_metrics", True)
        kv = kwargs.get("kv_cache_config")
        if isinstance(kv, dict):
            kwargs["kv_cache_config"] = importlib.import_module("tensorrt_llm.llmapi").KvCacheConfig(**kv)
        if self._backend == "tensorrt":
            kwargs.pop("backend", None)
        return kwargs

    async def start(self) -> None:
        """Import TensorRT-LLM and load the model (in a worker thread: it takes minutes), or, in an attached
        frontend, attach to the launcher's engine (TensorRT-LLM does it where TLLM_EXECUTOR_ATTACH_INFO is set)."""
        self._trtllm = import_tensorrt_llm()
        if self._frontends > 1 and not self._attached:
            # What trtllm-serve pre-generates before the executor is made (executor/utils.py,
            # get_multi_frontend_ipc_info): the group's ipc folder and HMAC key.
            if not os.environ.get("TLLM_MULTI_FRONTEND_IPC_DIR"):
                os.environ["TLLM_MULTI_FRONTEND_IPC_DIR"] = tempfile.mkdtemp(prefix="trtllm-frontends-ipc-")
                os.environ["TLLM_MULTI_FRONTEND_HMAC"] = secrets.token_hex(32)
        llm_class = self._llm_class()
        self.trtllm_release = Release(str(getattr(self._trtllm, "__version__", "")))
        self._settle_guided(self.trtllm_release)
        kwargs = self._constructor_kwargs()
        self.unapplied_sampling = self.trtllm_release.unapplied_sampling
        self.seed_note = self.trtllm_release.seed_note
        logger.info(
            "Starting TensorRT-LLM %s (%s backend)", self.trtllm_release.version or "?", self._backend
        )
        for reason in self.unapplied_sampling.values():
            logger.warning("%s", reason)
        self._log_guided()
        self._log_engine_tracing(kwargs)
        try:
            self._llm = await asyncio.to_thread(lambda: llm_class(**kwargs))
        except Exception as exc:
            raise ExecutorError(f"TensorRT-LLM could not start: {type(exc).__name__}: {exc}") from exc
        args = getattr(self._llm, "args", None)
        seq_len = getattr(args, "max_seq_len", None)
        if isinstance(seq_len, int) and seq_len > 0:
            self.max_seq_len = seq_len
        if args is not None:  # what the engine was built with is what it admits (BaseLLM._check_arguments)
            self.max_prompt_tokens = _prompt_limit(
                getattr(args, "enable_chunked_prefill", False),
                getattr(args, "max_num_tokens", None),
                self._backend,
            )
        self._affinity = self._dp_ranks > 1 and self.takes_sessions and affinity_on(args)
        logger.info(
            "Session keys %s",
            "go to TensorRT-LLM as conversation_params"
            if self.takes_sessions
            else "are not passed to TensorRT-LLM (its generate_async has no conversation_params)",
        )
        logger.info(
            "Trace context %s",
            "goes to TensorRT-LLM as trace_headers"
            if "trace_headers" in self._parameters()
            else "is not passed to TensorRT-LLM (its generate_async has no trace_headers: no engine spans)",
        )
        if self._dp_ranks > 1:
            logger.info(
                "Attention DP over %d ranks: %s",
                self._dp_ranks,
                "TensorRT-LLM places each session's turns (conversation affinity)"
                if self._affinity
                else "each session's turns are sent to its rank while the rank has room (scheduling_params, relaxed)",
            )
        self.prefix_isolation_refusal = self._prefix_isolation_refusal()
        if args is not None:  # the block size the engine was built with
            self.kv_block_tokens = kv_block_tokens(getattr(args, "kv_cache_config", None))
        self._watch = watch_for(self._llm, self._kv_events, self._attached)
        if self._watch is not None:
            await self._watch.start()
        logger.info(
            "TensorRT-LLM takes prompts of %s",
            "any length the context window holds (chunked prefill)"
            if self.max_prompt_tokens is None
            else f"at most {self.max_prompt_tokens} tokens (max_num_tokens; chunked prefill is off)",
        )

    def _prefix_isolation_refusal(self) -> str | None:
        """Why tenants' KV-cache prefixes would be shared on this engine: its ``generate_async`` takes no
        ``cache_salt`` (NVIDIA/TensorRT-LLM PR #7106 brought it) while it reuses blocks; None otherwise."""
        if "cache_salt" in self._parameters():
            return None
        kv = getattr(getattr(self._llm, "args", None), "kv_cache_config", None)
        if kv is not None and getattr(kv, "enable_block_reuse", True) is False:
            return None  # nothing is reused, so nothing crosses tenants
        version = self.trtllm_release.version if self.trtllm_release is not None else "?"
        return (
            f"TensorRT-LLM {version}'s generate_async takes no cache_salt (NVIDIA/TensorRT-LLM PR #7106): one "
            "tenant's prompt would reuse another's KV-cache blocks, and its time to first token would show it. "
            "Use a release that has it, or turn block reuse off (kv_cache_config.enable_block_reuse: false)."
        )

    def _log_engine_tracing(self, kwargs: Mapping[str, Any]) -> None:
        """Say at start whether TensorRT-LLM exports spans of its own (docs/tracing-and-dashboards.md#into-the-engine)."""
        endpoint = kwargs.get("otlp_traces_endpoint")
        if endpoint:
            logger.info("TensorRT-LLM exports its request spans (llm_request) to %s", endpoint)
        elif self._otlp_traces_endpoint:
            version = self.trtllm_release.version if self.trtllm_release is not None else "?"
            logger.warning(
                "TensorRT-LLM %s has no otlp_traces_endpoint (it came with 1.2.0, NVIDIA/TensorRT-LLM PR #5897): the "
                "engine's spans are absent from the traces; this server's own spans still go to %s",
                version,
                self._otlp_traces_endpoint,
            )

    def _settle_guided(self, release: Release) -> None:
        """Decide, before the engine is built, whether this release can build guided decoding with the speculative
        decoding asked for (``Release.guided_drafting_refusal``: one-model drafting before PR #6948, where TensorRT-LLM's
        executor creator raises). Where it cannot, the default flags still start: the engine is built without guided
        decoding and constrained requests are refused with a 400 saying what works; an operator whose LLM arguments
        name ``guided_decoding_backend`` themselves is refused here instead (ExecutorError), before anything loads."""
        if self._guided == "off":
            return
        refusal = release.guided_drafting_refusal(self._kwargs.get("speculative_config"))
        if refusal is None:
            return
        if self._guided_explicit:
            raise ExecutorError(f"{refusal} Drop guided_decoding_backend from the LLM arguments to start so.")
        self._kwargs.pop("guided_decoding_backend", None)
        self._guided = "off"
        self.constraint_refusal = refusal

    def _log_guided(self) -> None:
        """Say at start how constrained requests are served, and with what speculative decoding."""
        speculative = self._kwargs.get("speculative_config")
        kind = speculative.get("decoding_type") if isinstance(speculative, Mapping) else None
        one_model = one_model_drafting(speculative)
        if self._guided == "off":
            if self.constraint_refusal is not None and "PR #6948" in self.constraint_refusal:
                logger.warning("Guided decoding is off: %s", self.constraint_refusal)
            else:
                logger.info(
                    "Guided decoding is off (--guided_decoding off): constrained requests are refused with 400"
                )
        elif one_model is not None:
            logger.info(
                "Guided decoding (xgrammar) with %s speculative decoding: TensorRT-LLM constrains the drafted tokens "
                "inside the target model's step (CapturableGuidedDecoder, NVIDIA/TensorRT-LLM PR #6948)",
                one_model,
            )
        elif kind is not None:
            logger.info(
                "Guided decoding (xgrammar) with %s speculative decoding (two-model): TensorRT-LLM's GuidedDecoder "
                "constrains the drafter's tokens too (NVIDIA/TensorRT-LLM PR #6300)",
                kind,
            )
        else:
            logger.info(
                "Guided decoding (xgrammar) is on for constrained requests (--guided_decoding off turns it off)"
            )

    def engine_load(self) -> EngineLoad | None:
        """The engine's load as its iteration stats last said (LLM built with ``enable_iter_perf_stats``)."""
        return self._watch.load if self._watch is not None else None

    def healthy(self) -> bool:
        """TensorRT-LLM's own health check, as trtllm-serve's ``/health`` asks it (``BaseLLM._check_health``:
        the executor exists and is not shut down, e.g. after a worker died); False before start."""
        llm = self._llm
        if llm is None:
            return False
        check = getattr(llm, "_check_health", None)
        if check is not None:
            return bool(check())
        executor = getattr(llm, "_executor", None)
        return executor is not None and not executor.is_shutdown()

    def attach_env(self, frontend: int) -> dict[str, str]:
        """TensorRT-LLM's attach contract for frontend ``frontend`` (``serve/_frontend_processes.py``,
        ``_spawn_attached_frontends``): the launcher executor's attach information, the frontend's id, no MPI."""
        if self._frontends <= 1 or self._attached or self._llm is None:
            return {}
        executor = getattr(self._llm, "_executor", None)
        info = executor.multi_frontend_attach_info() if executor is not None else None
        if info is None:
            raise ExecutorError(
                "TensorRT-LLM made no multi-frontend executor (num_serve_frontends needs the default, classic "
                "IPC executor path: no orchestrator_type)"
            )
        return {
            "TLLM_EXECUTOR_ATTACH_INFO": json.dumps(info),
            "TLLM_EXECUTOR_FRONTEND_ID": str(frontend),
            "TLLM_DISABLE_MPI": "1",
        }

    def sampling_params(self, settings: SamplingSettings, constraint: Constraint | None = None) -> Any:
        """TensorRT-LLM SamplingParams for our settings: no detokenization, Harmony stop tokens.

        ``temperature`` and ``top_p`` always; ``top_k``, ``min_p``, ``seed`` and the penalties where set and
        this release's sampler applies them (:attr:`unapplied_sampling`: the service refuses or drops them before).

        A constraint becomes ``guided_decoding`` (a structural tag); asked-for logprobs ``logprobs=k``
        (at least 1: the sampled token's own logprob comes with its alternatives).
        """
        kwargs: dict[str, Any] = {
            "max_tokens": settings.max_tokens,
            "stop_token_ids": list(settings.stop_token_ids),
            "end_id": self._end_id,
            "detokenize": False,
            # Always stated: all unset is greedy decoding in TensorRT-LLM (params_imply_greedy_decoding).
            "temperature": settings.temperature,
            "top_p": settings.top_p,
        }
        for name in ("top_k", "min_p", "seed", "frequency_penalty", "presence_penalty"):
            value = getattr(settings, name)
            if value is not None and name not in self.unapplied_sampling:  # those never reach here set
                kwargs[name] = value
        if settings.logprobs is not None:
            kwargs["logprobs"] = max(settings.logprobs, 1)
        if constraint is not None:
            guided = importlib.import_module("tensorrt_llm.sampling_params").GuidedDecodingParams
            kwargs["guided_decoding"] = guided(structural_tag=structural_tag(constraint))
        return self._trtllm.SamplingParams(**kwargs)

    def _request_options(self, request: GenerationRequest) -> dict[str, Any]:
        """``generate_async`` keywords beyond sampling, for the ones this TensorRT-LLM has.

        ``priority`` (``service_tier``): TensorRT-LLM's ``LLM.generate_async(..., priority: float = 0.5)``,
        "the scheduling priority for the request, in the range [0, 1]" (``tensorrt_llm/llmapi/llm.py``);
        versions without it serve every request at the same priority.

        ``cache_salt`` (the tenant's ``Tenant.salt``): ``LLM.generate_async(..., cache_salt: Optional[str] =
        None, ...)``, "If specified, KV cache will be salted with the provided string to limit the kv cache reuse
        to the requests with the same string" (``tensorrt_llm/llmapi/llm.py``; NVIDIA/TensorRT-LLM PR #7106).
        A release without it is refused at start when tenants are configured (``prefix_isolation_refusal``).

        ``trace_headers`` (the generation span's ``traceparent``/``tracestate``): ``LLM.generate_async(...,
        trace_headers: Optional[Mapping[str, str]] = None, ...)``, "Trace headers" (``tensorrt_llm/llmapi/llm.py``,
        1.2.0 on; NVIDIA/TensorRT-LLM PR #5897), the parent of the engine's ``llm_request`` span
        (``GenerationResultBase.do_tracing``, ``executor/result.py``). A plain dict, as TensorRT-LLM's own server
        hands it (``tracing.extract_trace_headers``); releases without the argument get nothing.

        ``conversation_params`` and ``scheduling_params`` (the session key): where it is placed
        (:meth:`_placement`). ``kv_cache_retention_config``: how long its blocks are kept (``trtllm_kv.turn_config``:
        ``prompt_cache_options.ttl``, the session's state; docs/sessions-and-kv-cache.md#retention).
        """
        if (
            request.priority is None
            and request.cache_retention_seconds is None
            and request.session_key is None
            and request.cache_salt is None
            and request.trace_headers is None
        ):
            return {}
        parameters = self._parameters()
        options: dict[str, Any] = self._placement(request.session_key, parameters)
        if request.priority is not None and "priority" in parameters:
            options["priority"] = request.priority
        if "kv_cache_retention_config" in parameters:
            config = importlib.import_module("tensorrt_llm.llmapi").KvCacheRetentionConfig
            retention = turn_config(config, request, self._tool_pause_seconds)
            if retention is not None:
                options["kv_cache_retention_config"] = retention
        if request.cache_salt is not None and "cache_salt" in parameters:
            options["cache_salt"] = request.cache_salt
        if request.trace_headers is not None and "trace_headers" in parameters:
            options["trace_headers"] = dict(request.trace_headers)
        return options

    def _placement(self, session_key: str | None, parameters: frozenset[str]) -> dict[str, Any]:
        """Where a session's request runs (docs/sessions-and-kv-cache.md#placement; ``trtllm_kv.py`` cites the
        engine's code).

        ``conversation_params=ConversationParams(conversation_id=key)`` wherever ``generate_async`` takes it
        (``tensorrt_llm/conversation_params.py``; the 1.3.0 release candidates from rc21 on, 1.3.0rc29 and 1.4.0rc1 among them). With attention DP:
        where the engine runs conversation affinity, nothing more (it places the turns); elsewhere
        ``scheduling_params=SchedulingParams(attention_dp_rank=R, attention_dp_relax=True)``
        (``tensorrt_llm/scheduling_params.py``, PR #6246), R a hash of the key: on R while R has room, elsewhere
        when it is full.
        """
        if session_key is None:
            return {}
        options: dict[str, Any] = {}
        if "conversation_params" in parameters:
            options["conversation_params"] = _conversation_params(session_key)
        if self._dp_ranks > 1 and not self._affinity and "scheduling_params" in parameters:
            options["scheduling_params"] = _scheduling_params(attention_dp_rank(session_key, self._dp_ranks))
        return options

    def _parameters(self) -> frozenset[str]:
        """The keywords this TensorRT-LLM's ``generate_async`` takes, read once."""
        if self._generate_parameters is None:
            self._generate_parameters = frozenset(inspect.signature(self._llm.generate_async).parameters)
        return self._generate_parameters

    @property
    def takes_sessions(self) -> bool:
        """Whether this TensorRT-LLM's ``generate_async`` takes ``conversation_params`` (known once started)."""
        return self._llm is not None and "conversation_params" in self._parameters()

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        """Stream ``token_ids_diff`` of each step; the last delta carries the finish reason.

        Closing this generator before the last delta aborts the request in TensorRT-LLM.
        """
        if self._llm is None:
            raise ExecutorError("the TensorRT-LLM executor was not started")
        try:
            result = self._llm.generate_async(
                request.prompt_token_ids,
                sampling_params=self.sampling_params(request.sampling, request.constraint),
                streaming=True,
                **self._request_options(request),
            )
        except Exception as exc:
            raise _refused(exc, self.healthy()) from exc
        self._running[request.request_id] = result
        if self._watch is not None and not self._watch.submitted.is_set():
            self._watch.submitted.set()  # the engine has a request now: its events and stats can be read
        top = request.sampling.logprobs
        # Under guided decoding xgrammar lets a control token be spelled in ordinary tokens: read as the token.
        spelled = None if request.constraint is None else SpelledControlTokens(self._vocabulary())
        try:
            async for output in _engine_steps(result):
                completion = output.outputs[0]
                step = tuple(completion.token_ids_diff)
                cached = getattr(output, "cached_tokens", None)
                logprobs: Sequence[tuple[float, Sequence[tuple[int, float]]]] | None = (
                    None if top is None else _token_logprobs(step, completion.logprobs_diff, top)
                )
                tokens: Sequence[int] = step
                if spelled is not None:
                    tokens, logprobs = spelled.read(step, logprobs, last=output.finished)
                if not output.finished:
                    if tokens:
                        yield TokenDelta(tokens, cached_tokens=cached, logprobs=logprobs)
                    continue
                reason = completion.finish_reason
                finish = _FINISH.get(reason or "")
                if finish is None:
                    yield TokenDelta(
                        tokens, "error", f"TensorRT-LLM ended the generation: {reason}", cached, logprobs
                    )
                else:
                    yield TokenDelta(tokens, finish, None, cached, logprobs)  # type: ignore[arg-type]
                return
        finally:
            # Closed before TensorRT-LLM finished (client gone, cancelled task): stop the engine's work too.
            self._running.pop(request.request_id, None)
            if not result.finished:
                result.abort()

    def _vocabulary(self) -> HarmonyEncoding:
        if self._encoding is None:
            self._encoding = load_encoding()
        return self._encoding

    def release(
        self,
        session_key: str | None,
        token_ids: Sequence[int],  # the session's, as its last turn sent them
        cache_salt: str | None,
        *,
        keep: int = 0,
        why: KvRelease = "ended",
    ) -> None:
        """Re-stamp the cached blocks of ``token_ids[keep:]`` (docs/sessions-and-kv-cache.md#retention): a one-token
        generation over them, placed and salted as the session's turns are, whose ``kv_cache_retention_config``
        puts them at priority 0 (``ended``: evicted first, never offloaded) or back at the default 35
        (``answered``). TensorRT-LLM's LLM API has no call that frees or re-prioritizes cached blocks in the
        releases served (``trtllm_kv.py``), and a request that reuses blocks re-stamps them with its own
        retention. Runs as a task of this executor (at most ``MAX_PENDING_RELEASES`` waiting); failures are logged."""
        if self._llm is None or len(token_ids) - keep < 2:
            return
        if len(self._releases) >= MAX_PENDING_RELEASES:
            logger.warning("KV-cache release dropped: %d already wait for the engine", len(self._releases))
            return
        task = asyncio.get_running_loop().create_task(
            self._release(session_key, list(token_ids), cache_salt, keep, why == "ended")
        )
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _release(
        self, session_key: str | None, token_ids: list[int], cache_salt: str | None, keep: int, ended: bool
    ) -> None:
        parameters = self._parameters()
        if "kv_cache_retention_config" not in parameters:
            return
        options = self._placement(session_key, parameters)
        if cache_salt is not None and "cache_salt" in parameters:
            options["cache_salt"] = cache_salt
        config = importlib.import_module("tensorrt_llm.llmapi").KvCacheRetentionConfig
        options["kv_cache_retention_config"] = release_config(config, keep, ended)
        sampling = self._trtllm.SamplingParams(
            max_tokens=1, end_id=self._end_id, detokenize=False, temperature=1.0, top_p=1.0
        )
        try:
            result = self._llm.generate_async(token_ids, sampling_params=sampling, streaming=True, **options)
            async for _ in _engine_steps(result):
                pass
        except Exception as exc:  # a release is advice: the turn it follows is already done
            logger.warning("KV-cache release failed: %s: %s", type(exc).__name__, exc)

    def abort(self, request_id: str) -> None:
        """Abort a running generation in TensorRT-LLM."""
        result = self._running.get(request_id)
        if result is not None and not result.finished:
            result.abort()

    async def shutdown(self) -> None:
        """Abort what runs and shut TensorRT-LLM down."""
        for request_id in list(self._running):
            self.abort(request_id)
        for task in list(self._releases):
            task.cancel()
        if self._watch is not None:
            watch, self._watch = self._watch, None
            await watch.stop()
        if self._llm is not None:
            llm, self._llm = self._llm, None
            await asyncio.to_thread(llm.shutdown)


def _refused(exc: Exception, healthy: bool) -> ExecutorError:
    """What ``generate_async`` raising means to the client. On a dead engine TensorRT-LLM raises ``RuntimeError("LLM
    is shutting down")`` (``LLM.generate_async``'s first check, ``tensorrt_llm/llmapi/llm.py``, 1.1.0 on) while
    ``BaseLLM._check_health`` fails (``/health`` 503): said as the engine being gone, not as a refused request."""
    if not healthy:
        return ExecutorError(
            "TensorRT-LLM's engine is gone (a worker died or it was shut down; /health reports it): this server takes "
            f"no new generation until it is restarted ({type(exc).__name__}: {exc})"
        )
    return ExecutorError(f"TensorRT-LLM refused the request: {type(exc).__name__}: {exc}")


def _conversation_params(session_key: str) -> Any:
    """``ConversationParams(conversation_id=session_key)``, from ``tensorrt_llm.llmapi`` (which re-exports it)
    or its own module ``tensorrt_llm.conversation_params``."""
    llmapi = importlib.import_module("tensorrt_llm.llmapi")
    params = getattr(llmapi, "ConversationParams", None)
    if params is None:
        params = importlib.import_module("tensorrt_llm.conversation_params").ConversationParams
    return params(conversation_id=session_key)


def _scheduling_params(rank: int) -> Any:
    """``SchedulingParams(attention_dp_rank=rank, attention_dp_relax=True)`` (``tensorrt_llm/scheduling_params.py``):
    on ``rank`` while it has room, elsewhere when it is full (``trtllm_kv.py``)."""
    params = importlib.import_module("tensorrt_llm.scheduling_params").SchedulingParams
    return params(attention_dp_rank=rank, attention_dp_relax=True)


async def _engine_steps(result: Any) -> AsyncGenerator[Any, None]:
    """The result's steps; an error TensorRT-LLM raises while iterating (``RequestError`` from
    ``GenerationResultBase._handle_response``) becomes an ExecutorError naming it."""
    iterator = result.__aiter__()
    while True:
        try:
            output = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except Exception as exc:
            raise ExecutorError(f"TensorRT-LLM failed the request: {type(exc).__name__}: {exc}") from exc
        yield output


def _prompt_limit(chunked: Any, max_num_tokens: Any, backend: str) -> int | None:
    """The longest prompt TensorRT-LLM takes: ``max_num_tokens`` on the PyTorch backend without chunked
    prefill (``BaseLLM._check_arguments``, ``llmapi/llm.py``), else no limit short of the window."""
    if backend != "pytorch" or chunked:
        return None
    return int(max_num_tokens or DEFAULT_MAX_NUM_TOKENS)


def _token_logprobs(
    tokens: tuple[int, ...], diff: Any, top: int
) -> list[tuple[float, list[tuple[int, float]]]] | None:
    """Per token: its logprob and the best ``top`` alternatives, from TensorRT-LLM's ``{id: Logprob}`` dicts.

    As TensorRT-LLM returns them (``executor/result.py``): a step that ended at a stop token has one
    entry more than tokens (the stop token's, its token trimmed from the output): entries past the
    tokens are dropped. The dict holds the best ``k``; the sampled token need not be among them, and
    then its logprob is reported as the lowest of them (it is at most that).
    """
    if not diff or len(diff) < len(tokens):
        return None
    out = []
    for token, entries in zip(tokens, diff[: len(tokens)], strict=True):
        if not isinstance(entries, dict) or not entries:
            return None
        ranked = sorted(entries.items(), key=lambda kv: (kv[1].rank is None, kv[1].rank or 0, -kv[1].logprob))
        own = entries[token].logprob if token in entries else min(lp.logprob for lp in entries.values())
        out.append((float(own), [(t, float(lp.logprob)) for t, lp in ranked[:top]]))
    return out
