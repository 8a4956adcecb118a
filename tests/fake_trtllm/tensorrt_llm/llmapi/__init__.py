from ..sampling_params import GuidedDecodingParams, SamplingParams
from .llm import LLM
from .llm_args import BuildConfig, KvCacheConfig, TorchLlmArgs, TrtLlmArgs

__all__ = ["LLM", "BuildConfig", "GuidedDecodingParams", "KvCacheConfig", "SamplingParams", "TorchLlmArgs", "TrtLlmArgs"]
