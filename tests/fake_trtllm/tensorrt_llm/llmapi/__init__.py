from .llm_args import BuildConfig, KvCacheConfig, TorchLlmArgs, TrtLlmArgs

__all__ = ["BuildConfig", "KvCacheConfig", "TorchLlmArgs", "TrtLlmArgs"]
