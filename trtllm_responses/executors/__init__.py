"""Executors: the model runtimes behind the server (echo, TensorRT-LLM)."""

from .base import Executor, ExecutorError, GenerationRequest, SamplingSettings, TokenDelta
from .echo import EchoExecutor

__all__ = ["EchoExecutor", "Executor", "ExecutorError", "GenerationRequest", "SamplingSettings", "TokenDelta"]
