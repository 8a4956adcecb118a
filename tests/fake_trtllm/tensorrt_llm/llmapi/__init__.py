from ..conversation_params import ConversationParams
from ..sampling_params import GuidedDecodingParams, SamplingParams
from .llm import LLM
from .llm_args import BuildConfig, KvCacheConfig, TorchLlmArgs, TrtLlmArgs
from .retention import KvCacheRetentionConfig

__all__ = [
    "LLM",
    "BuildConfig",
    "ConversationParams",
    "GuidedDecodingParams",
    "KvCacheConfig",
    "KvCacheRetentionConfig",
    "SamplingParams",
    "TorchLlmArgs",
    "TrtLlmArgs",
]
