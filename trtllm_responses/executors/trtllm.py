"""The TensorRT-LLM executor: gpt-oss on TensorRT-LLM's LLM API. The only place ``tensorrt_llm`` is imported.

One ``tensorrt_llm.LLM`` per process (:meth:`TrtllmExecutor.start`); each response is one streaming
``generate_async``, each step's ``token_ids_diff`` one :class:`TokenDelta` (the server parses
tokens: TensorRT-LLM does not detokenize). Sampling is always stated, constraints become a
structural tag (``constraints/guided.py``), and ``abort`` is carried out by TensorRT-LLM
asynchronously. The call, finish reasons, versions and what is refused before generating: README,
"Serving gpt-oss on TensorRT-LLM".
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
import inspect
import json
import logging
import os
import secrets
import tempfile
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..constraints import Constraint, structural_tag
from ..harmony import HarmonyEncoding, SpelledControlTokens, load_encoding
from .base import Executor, ExecutorError, GenerationRequest, SamplingSettings, TokenDelta

__all__ = [
    "MULTI_FRONTEND_SINCE",
    "check_frontends",
    "MIN_TRTLLM_VERSION",
    "TrtllmExecutor",
    "TrtllmUnavailableError",
    "check_llm_arguments",
    "check_trtllm_version",
    "build_tensorrt_engine",
    "import_tensorrt_llm",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LEN = 131072  # gpt-oss's context window
#: TensorRT-LLM's default ``max_num_tokens`` (``BuildConfig.max_num_tokens``, ``llmapi/llm_args.py``).
DEFAULT_MAX_NUM_TOKENS = 8192
#: The oldest TensorRT-LLM release served (see check_trtllm_version).
MIN_TRTLLM_VERSION = (1, 1)
_FINISH = {"stop": "stop", "length": "length", "cancelled": "cancelled"}
#: KV-cache retention priorities (0-100; TensorRT-LLM's default is 35, ``KvCacheRetentionConfig::kDefaultRetentionPriority``):
#: a prompt asked to be cached for a ttl is kept above the default for that long.
DEFAULT_RETENTION_PRIORITY = 35
RETAINED_PROMPT_PRIORITY = 80
#: The guided decoding backend that takes structural tags (TensorRT-LLM's PyTorch backend).
GUIDED_DECODING_BACKEND = "xgrammar"


class TrtllmUnavailableError(RuntimeError):
    """``tensorrt_llm`` cannot be imported here."""


def import_tensorrt_llm() -> Any:
    """Import ``tensorrt_llm`` or raise TrtllmUnavailableError saying what to do instead.

    A release older than :data:`MIN_TRTLLM_VERSION` is refused here, before any model loads.
    """
    try:
        module = importlib.import_module("tensorrt_llm")
    except Exception as exc:  # ImportError, or a CUDA/driver error raised while importing
        raise TrtllmUnavailableError(
            f"--engine trtllm needs TensorRT-LLM, which cannot be imported here ({type(exc).__name__}: {exc}). "
            "Install it on a GPU machine (`pip install trtllm-responses[trtllm]` or NVIDIA's container), "
            "or use `--engine echo`, which runs without it."
        ) from exc
    check_trtllm_version(str(getattr(module, "__version__", "")))
    return module


def build_tensorrt_engine(model: Path, sizes: Mapping[str, Any], out: Path) -> None:
    """Build the TensorRT engine of the checkpoint at ``model`` and save it into ``out`` (``build --backend tensorrt``).

    Through the LLM API as ``trtllm-build``'s successor does it: ``tensorrt_llm._tensorrt_engine.LLM``
    with a ``BuildConfig`` of ``sizes`` (``max_batch_size``, ``max_num_tokens``, ``max_seq_len``) and the
    parallel sizes, then ``LLM.save``. TrtllmUnavailableError when TensorRT-LLM cannot be imported.
    """
    try:
        trtllm_engine = importlib.import_module("tensorrt_llm._tensorrt_engine")
        llmapi = importlib.import_module("tensorrt_llm.llmapi")
    except Exception as exc:
        raise TrtllmUnavailableError(
            f"building a TensorRT engine needs TensorRT-LLM and a GPU; it cannot be imported here ({exc})"
        ) from exc
    build_config = llmapi.BuildConfig(
        max_batch_size=sizes["max_batch_size"],
        max_num_tokens=sizes["max_num_tokens"],
        max_seq_len=sizes["max_seq_len"],
    )
    llm = trtllm_engine.LLM(
        model=str(model),
        build_config=build_config,
        tensor_parallel_size=sizes["tensor_parallel_size"],
        pipeline_parallel_size=sizes["pipeline_parallel_size"],
    )
    try:
        llm.save(str(out))
    finally:
        llm.shutdown()


def _release(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a TensorRT-LLM version string (``1.2.0rc5``, ``1.1.0+abc``), or None."""
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "x")
    except (IndexError, ValueError):
        return None


def check_trtllm_version(version: str) -> None:
    """Refuse a TensorRT-LLM release this server cannot drive, with a sentence saying what to install.

    From 1.1 on, TensorRT-LLM hands ``GuidedDecodingParams(structural_tag=...)`` to xgrammar's
    ``{"type": "structural_tag", "format": ...}`` reader (xgrammar 0.1.25, NVIDIA/TensorRT-LLM PR
    #7893); 1.0 (xgrammar 0.1.21) reads only the legacy ``structures``/``triggers`` form, which cannot
    express what the constraints need (sequences, alternatives, grammars between tags), so every
    constrained request would fail there.
    """
    release = _release(version)
    if release is None or release < MIN_TRTLLM_VERSION:
        wanted = ".".join(map(str, MIN_TRTLLM_VERSION))
        raise TrtllmUnavailableError(
            f"TensorRT-LLM {version or '(unknown version)'} is installed; trtllm-responses needs TensorRT-LLM "
            f"{wanted} or newer (structured outputs, required tool calls and custom-tool grammars are xgrammar "
            f"structural tags, read from {wanted} on). Install it with `pip install 'tensorrt_llm>={wanted}'` "
            f"(NVIDIA's index), or run in NVIDIA's release container nvcr.io/nvidia/tensorrt-llm/release:{wanted}.0 "
            "or newer (README, 'TensorRT-LLM versions')."
        )


def check_llm_arguments(llm_kwargs: dict[str, Any], backend: str) -> None:
    """Refuse argument names TensorRT-LLM does not know (ValueError), without loading anything.

    The names are read from TensorRT-LLM's own argument models (``TorchLlmArgs``
    for the PyTorch backend, ``TrtLlmArgs`` for TensorRT engines).
    """
    llm_args = importlib.import_module("tensorrt_llm.llmapi.llm_args")
    args_class = llm_args.TrtLlmArgs if backend == "tensorrt" else llm_args.TorchLlmArgs
    known = set(args_class.model_fields)
    unknown = sorted(set(llm_kwargs) - known - {"backend"})
    if unknown:
        raise ValueError(
            f"TensorRT-LLM ({args_class.__name__}) has no argument(s) {', '.join(unknown)}; check the flags, the bundle's "
            "llm_api_options.yaml and --extra_llm_api_options"
        )


#: Where TensorRT-LLM's multi-frontend serving comes from (the LLM argument ``num_serve_frontends``).
MULTI_FRONTEND_SINCE = (
    "TensorRT-LLM's multi-frontend serving (LLM(num_serve_frontends=K), NVIDIA/TensorRT-LLM PR #16523, merged "
    "2026-07-17 on main after 1.2.1; not in the 1.1 to 1.2.1 releases)"
)


def check_frontends(frontends: int, backend: str) -> None:
    """Refuse ``--num_serve_frontends`` > 1 where the installed TensorRT-LLM cannot attach frontends to one
    engine (ValueError naming what is needed), before any model is loaded."""
    if frontends <= 1:
        return
    if backend == "tensorrt":
        raise ValueError(
            f"--num_serve_frontends {frontends} needs the PyTorch backend: {MULTI_FRONTEND_SINCE}"
        )
    llm_args = importlib.import_module("tensorrt_llm.llmapi.llm_args")
    if "num_serve_frontends" not in llm_args.TorchLlmArgs.model_fields:
        version = getattr(importlib.import_module("tensorrt_llm"), "__version__", "?")
        raise ValueError(
            f"--num_serve_frontends {frontends} needs {MULTI_FRONTEND_SINCE}; the installed TensorRT-LLM is "
            f"{version}. Run one frontend an engine, replicas behind a router (README, 'Many frontends')."
        )


class TrtllmExecutor(Executor):
    """Serves generations from one ``tensorrt_llm.LLM``.

    ``llm_kwargs`` are the LLM constructor's keyword arguments (TorchLlmArgs
    names: ``model``, ``tensor_parallel_size``, ``kv_cache_config`` …), already
    merged from flags, bundle and YAML and checked. ``end_id`` is the token
    TensorRT-LLM treats as end of sequence (Harmony's ``<|return|>``).
    """

    name = "trtllm"

    def __init__(
        self,
        llm_kwargs: dict[str, Any],
        *,
        end_id: int,
        backend: str = "pytorch",
        frontends: int = 1,
        attached: bool = False,
        encoding: HarmonyEncoding | None = None,
    ) -> None:
        self._kwargs = dict(llm_kwargs)
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
        backend_choice = self._kwargs.setdefault("guided_decoding_backend", GUIDED_DECODING_BACKEND)
        if backend_choice != GUIDED_DECODING_BACKEND:
            raise ValueError(
                f"guided_decoding_backend must be {GUIDED_DECODING_BACKEND!r}: structured outputs, required tool calls "
                f"and custom-tool grammars are xgrammar structural tags (got {backend_choice!r})"
            )
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
        kwargs = self._constructor_kwargs()
        logger.info(
            "Starting TensorRT-LLM %s (%s backend)", getattr(self._trtllm, "__version__", "?"), self._backend
        )
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
        logger.info(
            "Session keys %s",
            "go to TensorRT-LLM as conversation_params"
            if self.takes_sessions
            else "are not passed to TensorRT-LLM (its generate_async has no conversation_params)",
        )
        logger.info(
            "TensorRT-LLM takes prompts of %s",
            "any length the context window holds (chunked prefill)"
            if self.max_prompt_tokens is None
            else f"at most {self.max_prompt_tokens} tokens (max_num_tokens; chunked prefill is off)",
        )

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

        ``temperature`` and ``top_p`` always; ``top_k``, ``min_p``, ``seed`` and the penalties where set.

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
            if value is not None:
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

        ``conversation_params`` (the session key): ``LLM.generate_async(...,
        conversation_params: Optional[ConversationParams] = None, ...)``, "Conversation parameters",
        ``ConversationParams(conversation_id=...)`` (``tensorrt_llm/conversation_params.py``), which
        attention-DP conversation affinity (``attention_dp_config.kv_cache_routing_conversation_affinity``)
        reads to keep a conversation's turns on one rank. The releases on PyPI (1.1, 1.2.x) have no such
        argument: nothing is passed there, and placement is the proxy's alone (README, "Session affinity").
        """
        if (
            request.priority is None
            and request.cache_retention_seconds is None
            and request.session_key is None
        ):
            return {}
        parameters = self._parameters()
        options: dict[str, Any] = {}
        if request.priority is not None and "priority" in parameters:
            options["priority"] = request.priority
        if request.cache_retention_seconds is not None and "kv_cache_retention_config" in parameters:
            options["kv_cache_retention_config"] = self._retention(request)
        if request.session_key is not None and "conversation_params" in parameters:
            options["conversation_params"] = _conversation_params(request.session_key)
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

    def _retention(self, request: GenerationRequest) -> Any:
        """``prompt_cache_options.ttl``: the prompt's KV-cache blocks kept at a raised retention priority for the ttl.

        ``KvCacheRetentionConfig([TokenRangeRetentionConfig(0, len(prompt), priority, duration)])`` as TensorRT-LLM
        binds it (``cpp/tensorrt_llm/nanobind/executor/request.cpp``): blocks of a higher priority are evicted
        after those of the default (35); once the duration ends they fall back to it. Reuse still needs
        ``kv_cache_config.enable_block_reuse`` (on by default here).
        """
        config = importlib.import_module("tensorrt_llm.llmapi").KvCacheRetentionConfig
        duration = datetime.timedelta(seconds=request.cache_retention_seconds or 0)
        prompt = config.TokenRangeRetentionConfig(
            0, len(request.prompt_token_ids), RETAINED_PROMPT_PRIORITY, duration
        )
        return config([prompt], DEFAULT_RETENTION_PRIORITY)

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
            raise ExecutorError(f"TensorRT-LLM refused the request: {type(exc).__name__}: {exc}") from exc
        self._running[request.request_id] = result
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

    def abort(self, request_id: str) -> None:
        """Abort a running generation in TensorRT-LLM."""
        result = self._running.get(request_id)
        if result is not None and not result.finished:
            result.abort()

    async def shutdown(self) -> None:
        """Abort what runs and shut TensorRT-LLM down."""
        for request_id in list(self._running):
            self.abort(request_id)
        if self._llm is not None:
            llm, self._llm = self._llm, None
            await asyncio.to_thread(llm.shutdown)


def _conversation_params(session_key: str) -> Any:
    """``ConversationParams(conversation_id=session_key)``, from ``tensorrt_llm.llmapi`` (which re-exports it)
    or its own module ``tensorrt_llm.conversation_params``."""
    llmapi = importlib.import_module("tensorrt_llm.llmapi")
    params = getattr(llmapi, "ConversationParams", None)
    if params is None:
        params = importlib.import_module("tensorrt_llm.conversation_params").ConversationParams
    return params(conversation_id=session_key)


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
