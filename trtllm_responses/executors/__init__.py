"""Executors: the model runtimes behind the server (echo, TensorRT-LLM)."""

from __future__ import annotations

from .base import Executor, ExecutorError, Generating, GenerationRequest, SamplingSettings, TokenDelta
from .echo import EchoExecutor

__all__ = [
    "EchoExecutor",
    "Executor",
    "ExecutorError",
    "Generating",
    "GenerationRequest",
    "SamplingSettings",
    "TokenDelta",
]
