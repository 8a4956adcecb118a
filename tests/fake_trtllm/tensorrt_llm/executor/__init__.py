from .result import CompletionOutput, GenerationResult, Logprob
from .utils import RequestError

__all__ = ["CompletionOutput", "GenerationResult", "Logprob", "RequestError"]
