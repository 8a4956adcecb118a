"""tensorrt_llm/llmapi/llm_args.py, faked: the argument models with TensorRT-LLM's names, extra forbidden.

TensorRT-LLM's argument models are pydantic models that forbid unknown fields (``StrictBaseModel``),
so a misspelt option fails when the LLM is built. The fields here are the ones its gpt-oss
deployment guide and curated configs (``examples/configs/curated/gpt-oss-120b-*.yaml``) use, with
the types and defaults of TensorRT-LLM 1.1/1.2 (``TorchLlmArgs``, ``KvCacheConfig``, ``MoeConfig``,
``CudaGraphConfig``, ``AttentionDpConfig``, ``SchedulerConfig``; ``orchestrator_type``).
Nested configs given as dicts are validated into their models, as pydantic does there.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._release import has_conversation_params, has_tracing, moe_auto, version


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Tracing(_Strict):
    """``otlp_traces_endpoint`` ("Target URL to which OpenTelemetry traces will be sent", trtllm-serve's help), an
    LLM argument from 1.2.0 (PR #5897; ``BaseLLM.__init__`` hands it to ``tracing.init_tracer("trt.llm", ...)``).
    On 1.1 the name is an unknown field, refused as pydantic refuses one (``_release.has_tracing``)."""

    otlp_traces_endpoint: Optional[str] = None

    @model_validator(mode="after")
    def _tracing_exists(self) -> "_Tracing":
        if "otlp_traces_endpoint" in self.model_fields_set and not has_tracing():
            raise ValueError(
                f"{type(self).__name__} has no otlp_traces_endpoint in TensorRT-LLM {version()} "
                "(extra inputs are not permitted)"
            )
        return self


class KvCacheConfig(_Strict):
    enable_block_reuse: bool = True
    free_gpu_memory_fraction: Optional[float] = Field(default=0.9, gt=0, le=1)
    max_tokens: Optional[int] = None
    dtype: str = "auto"
    tokens_per_block: int = 32
    # "Size of the host cache in bytes" / "Controls if blocks are onboarded" / "Only blocks with priority > mSecondaryOfflineMinPriority
    # can be offloaded to secondary memory" (llm_args.py KvCacheConfig; the pool in _kv_pool.py plays them).
    host_cache_size: Optional[int] = None
    onboard_blocks: bool = True
    secondary_offload_min_priority: Optional[int] = None
    # "Whether blocks that are only partially matched can be reused." / "Whether partially matched blocks that
    # are in use can be reused after copying them." (llm_args.py KvCacheConfig; the fake reuses whole blocks only)
    enable_partial_reuse: bool = True
    copy_on_partial_reuse: bool = True
    event_buffer_max_size: int = 0


class CudaGraphConfig(_Strict):
    batch_sizes: Optional[list[int]] = None
    max_batch_size: int = 0
    enable_padding: bool = False


_MOE_BACKENDS = ("CUTLASS", "CUTEDSL", "WIDEEP", "TRTLLM", "DEEPGEMM", "VANILLA", "TRITON")


class MoeConfig(_Strict):
    # llm_args.py MoeConfig.backend: the 1.1-era source has Literal["CUTLASS", …, "TRITON"] = 'CUTLASS' (no AUTO);
    # later ones add "AUTO" ("selects default backend based on model") as the default (_release.moe_auto).
    backend: str = Field(default_factory=lambda: "AUTO" if moe_auto() else "CUTLASS")
    max_num_tokens: Optional[int] = None

    @field_validator("backend")
    @classmethod
    def _known(cls, value: str) -> str:
        allowed = (("AUTO",) if moe_auto() else ()) + _MOE_BACKENDS
        if value not in allowed:
            raise ValueError(
                f"moe_config.backend must be one of {allowed} in TensorRT-LLM {version()}, got {value!r}"
            )
        return value


class AttentionDpConfig(_Strict):
    enable_balance: bool = False
    timeout_iters: int = 50
    batching_wait_iters: int = 10
    # Conversation-affinity routing (llm_args.py AttentionDpConfig, ConversationAwareADPRouter in
    # _torch/pyexecutor/scheduler/adp_router.py): "the first request of each conversation is round-robined across
    # ranks and every subsequent request carrying the same conversation_params.conversation_id is pinned to that
    # conversation's first-turn rank"; an LRU of kv_cache_routing_max_sessions conversations. Only on releases
    # with ConversationParams (_release.has_conversation_params); earlier ones refuse the names (extra forbidden).
    kv_cache_routing_conversation_affinity: Optional[bool] = None
    kv_cache_routing_max_sessions: Optional[int] = None

    @model_validator(mode="after")
    def _affinity_exists(self) -> "AttentionDpConfig":
        given = [
            n
            for n in ("kv_cache_routing_conversation_affinity", "kv_cache_routing_max_sessions")
            if getattr(self, n) is not None
        ]
        if given and not has_conversation_params():
            raise ValueError(
                f"AttentionDpConfig has no {given[0]} in TensorRT-LLM {version()} (extra inputs are not permitted)"
            )
        return self

    @property
    def conversation_affinity(self) -> bool:
        return bool(self.kv_cache_routing_conversation_affinity)

    @property
    def max_sessions(self) -> int:
        return self.kv_cache_routing_max_sessions or 65536


class DynamicBatchConfig(_Strict):
    enable_batch_size_tuning: bool = True
    enable_max_num_tokens_tuning: bool = False
    dynamic_batch_moving_average_window: int = 128


class SchedulerConfig(_Strict):
    capacity_scheduler_policy: Literal["MAX_UTILIZATION", "GUARANTEED_NO_EVICT", "STATIC_BATCH"] = (
        "GUARANTEED_NO_EVICT"
    )
    context_chunking_policy: Optional[Literal["FIRST_COME_FIRST_SERVED", "EQUAL_PROGRESS"]] = None
    dynamic_batch_config: Optional[DynamicBatchConfig] = None


class SpeculativeConfig(_Strict):
    """DecodingBaseConfig.from_dict: the decoding type and how many draft tokens a step may accept."""

    decoding_type: Literal["MTP", "Eagle", "Eagle3", "NGram", "Draft_Target", "Lookahead"]
    max_draft_len: Optional[int] = None
    num_nextn_predict_layers: Optional[int] = None
    speculative_model_dir: Optional[str] = None
    speculative_model: Optional[str] = None
    # EagleDecodingConfig.eagle3_one_model: "Whether to use the faster one-model implementation (draft as submodule)
    # or the two-model implementation", default True; MTPDecodingConfig.mtp_eagle_one_model, default True.
    eagle3_one_model: Optional[bool] = True
    mtp_eagle_one_model: Optional[bool] = True

    def one_model(self) -> bool:
        """Drafted inside the target model (``SpeculativeDecodingMode.use_one_engine``): Eagle3 one-model, MTP."""
        if self.decoding_type in ("Eagle", "Eagle3"):
            return self.eagle3_one_model is not False
        return self.decoding_type == "MTP" and self.mtp_eagle_one_model is not False

    def draft_len(self) -> int:
        return self.max_draft_len or self.num_nextn_predict_layers or 1


class CacheTransceiverConfig(_Strict):
    """``cache_transceiver_config`` (llm_args.py there): the KV transfer between a context and a generation engine.
    The fake transfers nothing; its presence is what the OpenEngine adapter reports as ``kv_connector``."""

    backend: Optional[Literal["DEFAULT", "UCX", "NIXL", "MPI", "MOONCAKE"]] = None
    max_tokens_in_buffer: Optional[int] = None
    kv_transfer_timeout_ms: Optional[int] = None


class TorchLlmArgs(_Tracing):
    model: str
    tokenizer: Optional[str] = None
    backend: Optional[str] = "pytorch"
    trust_remote_code: bool = False
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    context_parallel_size: int = 1
    moe_expert_parallel_size: Optional[int] = None
    moe_cluster_parallel_size: Optional[int] = None
    gpus_per_node: Optional[int] = None
    max_batch_size: Optional[int] = 2048
    # BuildConfig.max_num_tokens: what _check_arguments compares prompts with.
    max_num_tokens: Optional[int] = 8192
    max_seq_len: Optional[int] = None
    max_beam_width: int = 1
    kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
    cuda_graph_config: Optional[CudaGraphConfig] = None
    moe_config: MoeConfig = Field(default_factory=MoeConfig)
    enable_attention_dp: bool = False
    attention_dp_config: Optional[AttentionDpConfig] = None
    scheduler_config: SchedulerConfig = Field(default_factory=SchedulerConfig)
    speculative_config: Optional[SpeculativeConfig] = None
    cache_transceiver_config: Optional[CacheTransceiverConfig] = None
    stream_interval: int = Field(default=1, gt=0)
    num_postprocess_workers: int = 0
    postprocess_tokenizer_dir: Optional[str] = None
    guided_decoding_backend: Optional[Literal["xgrammar", "llguidance"]] = None
    enable_chunked_prefill: bool = False
    disable_overlap_scheduler: bool = False
    print_iter_log: bool = False
    enable_iter_perf_stats: bool = False
    return_perf_metrics: bool = False
    orchestrator_type: Optional[Literal["rpc", "ray"]] = None
    # Multi-frontend serving (main after 1.2.1, PR #16523): "num_serve_frontends: K (llm-args knob /
    # --num_serve_frontends, default 1 = off, max 64)" (executor/proxy.py here).
    num_serve_frontends: int = Field(default=1, ge=1, le=64)
    # NVIDIA's config database (examples/configs/database/openai/gpt-oss-120b/*.yaml) gives integers
    # (TRTLLM_ENABLE_PDL: 1), which TensorRT-LLM loads: values are kept as the environment's strings.
    env_overrides: Optional[dict[str, str]] = None

    @field_validator("env_overrides", mode="before")
    @classmethod
    def _as_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: str(item) for key, item in value.items()}
        return value

    @property
    def parallel_config(self) -> Any:
        """llm_args.py's ``_ParallelConfig``: what _check_arguments divides the prompt by (``cp_size``)."""
        from types import SimpleNamespace

        return SimpleNamespace(
            tp_size=self.tensor_parallel_size,
            pp_size=self.pipeline_parallel_size,
            cp_size=self.context_parallel_size,
            world_size=self.tensor_parallel_size * self.pipeline_parallel_size * self.context_parallel_size,
        )


class BuildConfig(_Strict):
    max_batch_size: int = 2048
    max_num_tokens: int = 8192
    max_seq_len: Optional[int] = None


class TrtLlmArgs(_Tracing):
    model: str
    tokenizer: Optional[str] = None
    trust_remote_code: bool = False
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_batch_size: Optional[int] = None
    max_num_tokens: Optional[int] = None
    max_seq_len: Optional[int] = None
    build_config: Optional[BuildConfig] = None
    kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
    guided_decoding_backend: Optional[Literal["xgrammar", "llguidance"]] = None
    enable_chunked_prefill: bool = False
