"""TorchLlmArgs and KvCacheConfig, faked: the field names of TensorRT-LLM's llm_args.py (a subset), extra forbidden."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KvCacheConfig(_Strict):
    enable_block_reuse: bool = True
    free_gpu_memory_fraction: Optional[float] = Field(default=0.9, gt=0, le=1)
    max_tokens: Optional[int] = None
    dtype: str = "auto"
    tokens_per_block: int = 32


class CudaGraphConfig(_Strict):
    batch_sizes: Optional[list[int]] = None
    max_batch_size: int = 0
    enable_padding: bool = False


class MoeConfig(_Strict):
    backend: Literal["CUTLASS", "CUTEDSL", "WIDEEP", "TRTLLM", "DEEPGEMM", "VANILLA", "TRITON"] = "CUTLASS"
    max_num_tokens: Optional[int] = None


class TorchLlmArgs(_Strict):
    model: str
    tokenizer: Optional[str] = None
    backend: Optional[str] = "pytorch"
    trust_remote_code: bool = False
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    moe_expert_parallel_size: Optional[int] = None
    max_batch_size: Optional[int] = None
    max_num_tokens: Optional[int] = None
    max_seq_len: Optional[int] = None
    kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
    cuda_graph_config: Optional[CudaGraphConfig] = None
    moe_config: MoeConfig = Field(default_factory=MoeConfig)
    enable_attention_dp: bool = False
    stream_interval: int = 1
    guided_decoding_backend: Optional[Literal["xgrammar", "llguidance"]] = None
    enable_chunked_prefill: bool = False
    disable_overlap_scheduler: bool = False


class BuildConfig(_Strict):
    max_batch_size: int = 2048
    max_num_tokens: int = 8192
    max_seq_len: Optional[int] = None


class TrtLlmArgs(_Strict):
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
