"""tensorrt_llm/llmapi/llm.py, faked: ``LLM`` (the PyTorch backend's), its argument check and ``generate_async``.

As there:

- ``LLM(model, **kwargs)`` validates the arguments into ``TorchLlmArgs`` (unknown keys refused)
  and keeps them as ``llm.args``.
- ``generate_async`` checks the inputs (a list of ints), then ``_check_arguments``: on the PyTorch
  backend without ``enable_chunked_prefill``, ``prompt_len / cp_size + query_len`` over
  ``max_num_tokens`` raises ``RequestError("The sum of prompt length (…), query length (…) should
  not exceed max_num_tokens (…)")`` (``BaseLLM._check_arguments``), before anything is queued.
- Guided decoding needs the LLM's ``guided_decoding_backend``; the structural tag is compiled with
  xgrammar exactly as ``XGrammarMatcherFactory`` does (``_torch/pyexecutor/grammar_matcher.py``); a
  tag xgrammar cannot compile fails the request (``RequestError`` while iterating, as the executor's
  error response does there).
- KV-cache block reuse (``kv_cache_config.enable_block_reuse``): the pool of ``_kv_pool.py`` (chained block
  keys, retention priorities and durations from ``kv_cache_retention_config``, eviction lowest priority first,
  the host tier of ``host_cache_size``), one per attention-DP rank; ``llm.kv`` is rank 0's, ``llm.kv_pools``
  all; an aborted request's blocks are stored when the engine lets it go. Where a request runs:
  ``_adp_router.py`` (explicit rank, conversation affinity, balance).
- ``generate_async(..., cache_salt: Optional[str] = None, ...)``: "If specified, KV cache will be salted
  with the provided string to limit the kv cache reuse to the requests with the same string"
  (``LLM.generate_async``'s docstring; NVIDIA/TensorRT-LLM PR #7106, "Support KV cache salting for secure
  KV cache reuse", August 2025: the salt's id is mixed into the first block's hash only, and every later
  block's hash chains from it, ``cpp/tensorrt_llm/batch_manager/blockKey.cpp``, as PR #13793 describes).
  So blocks are found by (salt, whole prefix) here (``_kv_pool.py``); no salt is a namespace of its own. Played on every
  release (PR #7106 merged before 1.1.0: the fake's reading of the dates); each call's salt is kept in
  ``llm.cache_salts``.
- ``generate_async(..., conversation_params: Optional[ConversationParams] = None, ...)`` on the releases that
  have it (``_release.has_conversation_params``: 1.3.0rc21 on; 1.1 and 1.2.x, before the 1.3.0 release candidates that brought it, have no such
  argument, and the fake's signature says so there) (``LLM.generate_async``, "conversation_params
  (tensorrt_llm.conversation_params.ConversationParams, optional): Conversation parameters"), handed on
  with the request (attention DP's conversation-affinity router reads its ``conversation_id``,
  ``attention_dp_config.kv_cache_routing_conversation_affinity`` in ``llmapi/llm_args.py``). The fake
  keeps each call's id in ``llm.conversation_ids`` and, a guard of its own (none copied), refuses with a
  TypeError anything that is not a ``ConversationParams``. A test that needs a release without the
  argument (1.1, 1.2.x) replaces ``generate_async`` with one of that signature.
- ``generate_async(..., trace_headers: Optional[Mapping[str, str]] = None, ...)`` ("trace_headers (Mapping[str, str],
  optional): Trace headers", ``LLM.generate_async`` in 1.2.0's ``llm.py`` and main's; NVIDIA/TensorRT-LLM PR #5897)
  on the releases that have it (``_release.has_tracing``: 1.2.0 on; 1.1.0's signature has no such argument, and the
  fake's says so there, a TypeError as Python raises for an unknown keyword). TensorRT-LLM keeps them with the
  request and parents its ``llm_request`` span on them (``GenerationResultBase.do_tracing``, ``executor/result.py``:
  ``tracing.extract_trace_context(self.trace_headers)``); the fake exports no span. Each call's value is kept in
  ``llm.trace_headers`` (None without) and written to ``FAKE_TRTLLM_LOG``'s ``generate`` record; a guard of its own
  (none copied) refuses with a TypeError anything but a mapping of strings to strings.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import random
from collections.abc import Mapping
from typing import Any, Optional

from .._adp_router import AdpRouter
from .._fake_model import FAIL, TIMEOUT, GuidedSampler, choose_plan, noise_rate, tag_completions
from .._kv_pool import DEFAULT_CACHE_TOKENS, KvPool
from .._release import has_conversation_params, has_tracing, sampler_applies, seeds_every_row
from .._torch.pyexecutor.py_executor_creator import create_guided_decoder
from ..conversation_params import ConversationParams
from ..disaggregated_params import DisaggregatedParams
from ..executor.proxy import ATTACH_ENV, GenerationExecutorProxy, RemoteKvBlocks
from ..executor.result import GenerationResult
from ..executor.utils import RequestError
from ..sampling_params import SamplingParams, describe
from ..scheduling_params import SchedulingParams
from .kv_events import KvEventsApi
from .llm_args import TorchLlmArgs

__all__ = ["LLM"]

#: ``FAKE_TRTLLM_KEEP_PROMPTS=0``: ``llm.prompts`` stays empty (a benchmark of 100k-token sessions would keep them all).
_KEEP_PROMPTS = os.environ.get("FAKE_TRTLLM_KEEP_PROMPTS", "1") != "0"
#: Test hook: a last user message of exactly this kills the engine (see generate_async).
CRASH = "#crash"
#: Test hook: a last user message of exactly this makes the request's first step (its prefill) last until it
#: is aborted (60 s at most): a long prefill a test can cancel mid-way.
HOLD = "#hold"
#: tensorrt_llm/llmapi/llm.py: ``priority: float = DEFAULT_REQUEST_PRIORITY`` (0.5).
DEFAULT_REQUEST_PRIORITY = 0.5


class LLM(KvEventsApi):
    """TensorRT-LLM's LLM entry point (PyTorch backend), faked (KV events and stats: ``kv_events.py``)."""

    def __init__(self, model: str, tokenizer: Optional[str] = None, **kwargs: Any) -> None:
        self.args = TorchLlmArgs(model=model, tokenizer=tokenizer, **kwargs)  # refuses unknown keys
        create_guided_decoder(self.args)  # create_py_executor's guided-decoder stage, as the engine is built
        self._log(
            {
                "event": "init",
                "args": self.args.model_dump(mode="json", exclude_unset=True),
                "env": _launch_env(),
            }
        )
        self._next_id = 0
        self._step_delay = float(os.environ.get("FAKE_TRTLLM_STEP_DELAY", "0"))
        from trtllm_responses.executors.echo import EchoExecutor
        from trtllm_responses.harmony import load_encoding

        self._encoding = load_encoding()
        self._planner = EchoExecutor(self._encoding)
        # GenerationExecutor.create: where TLLM_EXECUTOR_ATTACH_INFO is set this LLM attaches to the launcher's
        # engine (and the variable, which carries keys, is deleted); else it owns one (executor/proxy.py).
        attach = os.environ.pop(ATTACH_ENV, None)
        self._executor: Optional[GenerationExecutorProxy] = None
        if attach is not None:
            frontend_id = int(os.environ.get("TLLM_EXECUTOR_FRONTEND_ID", "0"))
            self._kv: Any = RemoteKvBlocks(json.loads(attach), frontend_id)
            self._log({"event": "attach", "frontend_id": frontend_id})
        else:
            self._kv = KvPool.from_config(self.args.kv_cache_config)
            self._executor = GenerationExecutorProxy(self._kv, self.args.num_serve_frontends)
        # Attention data parallelism: every attention-DP rank (one per tensor-parallel rank) has a KV cache of its
        # own (the KV-cache manager is per rank there), so a prefix is reused only on the rank that stored it.
        self._ranks = self.args.tensor_parallel_size if self.args.enable_attention_dp else 1
        kv = self.args.kv_cache_config
        self._kv_ranks: list[Any] = [self._kv] + [KvPool.from_config(kv) for _ in range(self._ranks - 1)]
        adp = self.args.attention_dp_config
        self.router = AdpRouter(
            self._ranks,
            self.args.max_batch_size or 2048,
            adp is not None and adp.conversation_affinity,
            adp.max_sessions if adp is not None else 65536,
        )
        # Arguments generate_async has not got on the release played: conversation_params before 1.3.0rc21 (the
        # 1.1 to 1.2.1), trace_headers before 1.2.0 (1.1.x).
        missing = [
            name
            for name, present in (
                ("conversation_params", has_conversation_params()),
                ("trace_headers", has_tracing()),
            )
            if not present
        ]
        if missing:
            self.generate_async = _without_arguments(self.generate_async, missing)  # type: ignore[method-assign]
        self._live: list[GenerationResult] = []  # submitted requests, for iteration stats
        self._submitted = False
        self._attach_kv_events()
        self._grammars: Any = None
        self.received: list[SamplingParams] = []  # every request's SamplingParams (tests read them)
        self.prompts: list[list[int]] = []  # and its prompt
        self.priorities: list[float] = []  # each generate_async call's priority
        self.retention_configs: list[Any] = []  # and its kv_cache_retention_config
        self.conversation_ids: list[Optional[str]] = []  # and its conversation_params.conversation_id
        self.scheduling: list[Optional[SchedulingParams]] = []  # and its scheduling_params
        self.cache_salts: list[Optional[str]] = []  # and its cache_salt
        self.trace_headers: list[Optional[Mapping[str, str]]] = []  # and its trace_headers, as received
        self.ranks: list[int] = []  # and the attention-DP rank it ran on
        self.shutdown_called = False

    @staticmethod
    def _log(record: dict[str, Any]) -> None:
        path = os.environ.get("FAKE_TRTLLM_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, default=str) + "\n")

    def _check_arguments(
        self, prompt_len: int, query_len: int, sampling_params: SamplingParams, is_gen_only: bool = False
    ) -> None:
        if self.args.backend in ["pytorch", "_autodeploy"]:
            if self.args.backend == "pytorch" and not self.args.enable_chunked_prefill and not is_gen_only:
                max_num_tokens = self.args.max_num_tokens
                if (
                    max_num_tokens
                    and prompt_len / self.args.parallel_config.cp_size + query_len > max_num_tokens
                ):
                    raise RequestError(
                        f"The sum of prompt length ({prompt_len / self.args.parallel_config.cp_size}), query length ({query_len}) should not exceed "
                        f"max_num_tokens ({max_num_tokens})"
                    )
            return

    def _last_text(self, prompt: list[int]) -> str:
        return self._encoding.decode(list(self._planner._last_message(prompt)[1]))

    def _plan(self, prompt: list[int]) -> list[int]:
        header_body = self._last_text(prompt)
        if header_body == "#fail":
            return self._encoding.encode("<|channel|>final<|message|>a") + [FAIL]
        if header_body == "#timeout":
            return self._encoding.encode("<|channel|>final<|message|>a") + [TIMEOUT]
        return self._planner.plan(prompt)

    def _guided(self, prompt: list[int], params: SamplingParams, request_id: int) -> GuidedSampler:
        from .._torch.pyexecutor.grammar_matcher import GPT_OSS_VOCAB_SIZE, XGrammarMatcherFactory

        if self._grammars is None:
            self._grammars = XGrammarMatcherFactory()
        tag = params.guided_decoding.structural_tag  # type: ignore[union-attr]
        if not tag:
            raise NotImplementedError("the fake runs structural tags only (what trtllm-responses sends)")
        matcher = self._grammars.create(tag, max_rollback_tokens=-1)
        enc = self._encoding
        stops = list(params.stop_token_ids or []) + ([params.end_id] if params.end_id is not None else [])
        candidates = [self._plan(prompt)] + [enc.encode(text) for text in tag_completions(json.loads(tag))]
        rng = (
            None
            if params._greedy_decoding
            # The PyTorch sampler seeds a request's sampling with its seed only from 1.3.0rc29 (PR #17172); before,
            # a seed is accepted and ignored (_release.py), so each request samples differently.
            else self._request_rng(params, request_id)
        )
        end_id = params.end_id if params.end_id is not None else enc.return_
        noise = noise_rate()
        plan = choose_plan(matcher, candidates, stops, end_id, rng, noise)
        if plan is None:
            raise ValueError("the fake's model found no completion its grammar accepts")
        self._log({"event": "plan", "request_id": request_id, "text": enc.decode(plan)})
        return GuidedSampler(
            matcher,
            plan,
            candidates=candidates,
            encoding=enc,
            stop_token_ids=stops,
            end_id=end_id,
            rng=rng,
            noise=noise,
            vocab_size=GPT_OSS_VOCAB_SIZE,
            on_end=lambda record: self._log({"event": "sampled", "request_id": request_id, **record}),
        )

    def _request_rng(self, params: SamplingParams, request_id: int) -> random.Random:
        """The request's sampling stream. TorchSampler applies ``seed`` from 1.3.0rc29 (PR #17172; before, a seed is
        accepted and ignored, so each request samples differently); on the FlashInfer those releases pin a sampling
        call reads the first row's seed only (``_release.seeds_every_row``), so a seeded request draws from its own
        seed only when sampled alone, else from the first running request's seed and its row (the fake's reading of
        TensorRT-LLM's warning, per request rather than per step; unseeded rows use TorchSampler's global seed, 0)."""
        if params.seed is None or not sampler_applies("seed"):
            return random.Random(request_id)
        running = [r for r in self._live if not r.finished]
        if not running or seeds_every_row():
            return random.Random(params.seed)
        first = running[0].sampling_params.seed
        return random.Random(f"{0 if first is None else first}/{len(running)}")

    def generate_async(
        self,
        inputs: Any,
        sampling_params: Optional[SamplingParams] = None,
        streaming: bool = False,
        kv_cache_retention_config: Any = None,
        conversation_params: Optional[ConversationParams] = None,
        priority: float = DEFAULT_REQUEST_PRIORITY,
        scheduling_params: Optional[SchedulingParams] = None,
        cache_salt: Optional[str] = None,
        trace_headers: Optional[Mapping[str, str]] = None,
        lora_request: Any = None,
        prompt_adapter_request: Any = None,
        disaggregated_params: Optional[DisaggregatedParams] = None,
        **kwargs: Any,
    ) -> GenerationResult:
        # ``priority`` as in tensorrt_llm/llmapi/llm.py's LLM.generate_async: "The scheduling priority for the
        # request, in the range [0, 1]. Higher values indicate higher priority. Defaults to 0.5."
        if self._executor is not None and self._executor.is_shutdown():
            # LLM.generate_async's first check (tensorrt_llm/llmapi/llm.py, 1.1.0 on): "Check if the worker is
            # shutting down", ``if self._executor is None or self._executor.is_shutdown(): raise RuntimeError("LLM is
            # shutting down")``; BaseLLM._check_health reports the same executor as dead.
            raise RuntimeError("LLM is shutting down")
        inputs = _token_ids(inputs)
        if lora_request is not None or prompt_adapter_request is not None:
            raise NotImplementedError("the fake serves no LoRA adapters or prompt adapters")
        if not (isinstance(inputs, list) and all(isinstance(t, int) for t in inputs)):
            raise TypeError(f"The inputs must be type str or list of int, but got {type(inputs)}")
        if not streaming:
            raise AssertionError("trtllm-responses always streams")
        params = sampling_params or SamplingParams()
        if params.guided_decoding is not None and self.args.guided_decoding_backend is None:
            # The fake's own guard, not a copied TensorRT-LLM check (none was found to cite): without a
            # backend TensorRT-LLM builds no grammar matcher, so guided decoding must never be sent then.
            raise ValueError("guided decoding needs the LLM's guided_decoding_backend")
        # The range generate_async's docstring states (above); out of it, the fake refuses loudly.
        if not 0.0 <= priority <= 1.0:
            raise ValueError(f"priority must be in [0, 1], got {priority}")
        if conversation_params is not None and not isinstance(conversation_params, ConversationParams):
            raise TypeError(
                f"conversation_params must be a ConversationParams, got {type(conversation_params)}"
            )
        if scheduling_params is not None and not isinstance(scheduling_params, SchedulingParams):
            raise TypeError(f"scheduling_params must be a SchedulingParams, got {type(scheduling_params)}")
        if trace_headers is not None and not (
            isinstance(trace_headers, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in trace_headers.items())
        ):
            raise TypeError(f"trace_headers must be a Mapping[str, str], got {trace_headers!r}")
        request_type = disaggregated_params.request_type if disaggregated_params is not None else None
        self._check_arguments(len(inputs), 0, params, is_gen_only=request_type == "generation_only")
        self._next_id += 1
        conversation_id = conversation_params.conversation_id if conversation_params is not None else None
        rank = self.router.place(scheduling_params, conversation_id)
        self.received.append(params)
        if _KEEP_PROMPTS:
            self.prompts.append(list(inputs))
        self.priorities.append(priority)
        self.retention_configs.append(kv_cache_retention_config)
        self.conversation_ids.append(conversation_id)
        self.scheduling.append(scheduling_params)
        self.cache_salts.append(cache_salt)
        self.trace_headers.append(trace_headers)
        self.ranks.append(rank)
        self._log(
            {
                "event": "generate",
                "request_id": self._next_id,
                "sampling": describe(params),
                "priority": priority,
                "conversation_id": conversation_id,
                "attention_dp_rank": rank,
                "cache_salt": cache_salt,
                "trace_headers": None if trace_headers is None else dict(trace_headers),
                # the leg of a disaggregated request (None: whole), and the context it continues
                "request_type": request_type,
                "ctx_request_id": None
                if disaggregated_params is None
                else disaggregated_params.ctx_request_id,
            }
        )
        error = None
        tokens: Any
        if params.guided_decoding is not None:
            try:
                tokens = self._guided(inputs, params, self._next_id)
            except Exception as exc:  # the executor's error response for this request
                error, tokens = f"{type(exc).__name__}: {exc}", iter(())
        elif self._last_text(inputs) == CRASH:
            # Test hook: the engine dies (a worker lost): this request fails, the executor is shut down, and
            # BaseLLM._check_health reports it from now on.
            if self._executor is not None:
                self._executor._fatal_error = RequestError("the executor's worker died")
                self._executor.shutdown()
            error, tokens = "RequestError: the executor's worker died", iter(())
        else:
            tokens = iter(self._plan(inputs))
        if request_type in ("context_only", "generation_only") and error is None:
            tokens = _disaggregated(tokens, request_type, disaggregated_params)
        result = GenerationResult(self, self._next_id, inputs, tokens, params, error=error)
        result._context_only = request_type == "context_only"
        result.hold = error is None and self._last_text(inputs) == HOLD
        result.kv = self._kv_ranks[rank]
        result.cache_salt = cache_salt
        result.retention = kv_cache_retention_config
        result.rank = rank
        self._live[:] = [r for r in self._live if not r.finished]
        self._live.append(result)
        self._submitted = True
        return result

    def _capacity_blocks(self) -> int:
        """Blocks of one rank's primary pool (kv_events.py's stats and capacity)."""
        kv = self.args.kv_cache_config
        return max(1, (kv.max_tokens or DEFAULT_CACHE_TOKENS) // kv.tokens_per_block)

    @property
    def kv(self) -> KvPool:
        """The KV-cache block pool of rank 0 (the only one without attention DP): tests and the benchmark read it."""
        return self._kv_ranks[0]

    @property
    def kv_pools(self) -> list[KvPool]:
        """Every attention-DP rank's pool."""
        return self._kv_ranks

    def _ended(self, result: GenerationResult) -> None:
        """A request's blocks were released: its rank has one request fewer (the router's load)."""
        self.router.ended(result.rank)

    def _check_health(self) -> bool:
        """BaseLLM._check_health (tensorrt_llm/llmapi/llm.py), what trtllm-serve's /health asks: True while the
        executor exists and is not shut down."""
        if self._executor is not None:
            return not self._executor.is_shutdown()
        return not self.shutdown_called  # an attached frontend: the launcher's engine, faked as alive

    def shutdown(self) -> None:
        self.shutdown_called = True
        if self._executor is not None:
            self._executor.shutdown()
        self._log({"event": "shutdown"})


def _token_ids(inputs: Any) -> Any:
    """A ``TokensPrompt`` (``{"prompt_token_ids": [...]}``, what the gRPC server's request manager submits:
    tensorrt_llm/inputs/data.py, ``prompt_inputs``) as its token ids; anything else as it is."""
    if isinstance(inputs, dict) and "prompt_token_ids" in inputs:
        if inputs.get("multi_modal_data"):
            raise NotImplementedError("the fake serves text prompts only")
        return list(inputs["prompt_token_ids"])
    return inputs


def _disaggregated(tokens: Any, request_type: str, params: DisaggregatedParams) -> Any:
    """The tokens of one leg of a disaggregated request (the fake's model of the phases).

    ``context_only``: the prefill and the first generated token, then the request ends ('length'; its result
    carries the ``DisaggregatedParams`` of the context phase, ``executor/result.py``). ``generation_only``: the
    context phase's ``first_gen_tokens`` first (the generation engine starts from them), then the model's
    continuation; under a grammar the matcher is advanced over them first, so the rest obeys the grammar from
    where the context phase left it.
    """
    if request_type == "context_only":
        return itertools.islice(tokens, 1)
    first = list(params.first_gen_tokens or [])
    if isinstance(tokens, GuidedSampler):
        tokens.force(first)
        return itertools.chain(first, tokens)
    return itertools.chain(first, itertools.islice(tokens, len(first), None))


def _launch_env() -> dict[str, str]:
    """The launcher's environment this process started with (multi-GPU tests read it from the log)."""
    names = ("TLLM_SPAWN_PROXY_PROCESS", "tllm_mpi_size", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
    return {name: os.environ[name] for name in names if name in os.environ}


def _without_arguments(generate_async: Any, names: list[str]) -> Any:
    """``generate_async`` as a release without the arguments ``names`` has it (``conversation_params`` before
    1.3.0rc21, ``trace_headers`` before 1.2.0): its signature says so, and passing one is a TypeError as it would be
    there."""

    @functools.wraps(generate_async)
    def call(*args: Any, **kwargs: Any) -> Any:
        for name in names:
            if name in kwargs:
                raise TypeError(f"generate_async() got an unexpected keyword argument '{name}'")
        return generate_async(*args, **kwargs)

    signature = inspect.signature(generate_async)
    call.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for name, p in signature.parameters.items() if name not in (*names, "kwargs")]
    )
    return call
