from ..sampling_params import GuidedDecodingParams, SamplingParams
from .llm_args import BuildConfig, KvCacheConfig, TorchLlmArgs, TrtLlmArgs

__all__ = ["BuildConfig", "GuidedDecodingParams", "KvCacheConfig", "SamplingParams", "TorchLlmArgs", "TrtLlmArgs"]
