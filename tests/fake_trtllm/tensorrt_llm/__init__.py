"""Fake tensorrt_llm for tests: the LLM API surface trtllm-responses uses (see ../README.md).

It plays the TensorRT-LLM release ``FAKE_TRTLLM_VERSION`` names (default 1.2.0; ``__version__``), with
that release's differences (``_release.py``); each module names the TensorRT-LLM file it copies.
"""

from __future__ import annotations

import os

from .executor.result import CompletionOutput, GenerationResult, Logprob, RequestOutput
from .executor.utils import RequestError
from .llmapi.llm import DEFAULT_REQUEST_PRIORITY, LLM
from .llmapi.llm_args import KvCacheConfig
from .sampling_params import GuidedDecodingParams, SamplingParams

__version__ = os.environ.get("FAKE_TRTLLM_VERSION", "1.2.0")
__all__ = [
    "DEFAULT_REQUEST_PRIORITY",
    "LLM",
    "CompletionOutput",
    "GenerationResult",
    "GuidedDecodingParams",
    "KvCacheConfig",
    "Logprob",
    "RequestError",
    "RequestOutput",
    "SamplingParams",
]
