"""Fake tensorrt_llm for tests: the LLM API surface trtllm-responses uses (see ../README.md)."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from .llmapi.llm_args import KvCacheConfig, TorchLlmArgs
from .sampling_params import GuidedDecodingParams, Logprob, SamplingParams, describe

__version__ = "0.0.0-fake"
__all__ = ["LLM", "SamplingParams", "GuidedDecodingParams", "RequestOutput", "CompletionOutput", "KvCacheConfig"]

TOKENS_PER_BLOCK = 32
#: tensorrt_llm/llmapi/llm.py: ``priority: float = DEFAULT_REQUEST_PRIORITY`` (0.5).
DEFAULT_REQUEST_PRIORITY = 0.5


def _log(record: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_TRTLLM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")


@dataclass(slots=True)
class CompletionOutput:
    index: int
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: Optional[str] = None
    stop_reason: Optional[int] = None
    logprobs: list[dict[int, Logprob]] = field(default_factory=list)
    _last_token_ids_len: int = 0
    _last_logprobs_len: int = 0

    @property
    def length(self) -> int:
        return len(self.token_ids)

    @property
    def token_ids_diff(self) -> list[int]:
        return self.token_ids[self._last_token_ids_len :]

    @property
    def logprobs_diff(self) -> list[dict[int, Logprob]]:
        return self.logprobs[self._last_logprobs_len :]


class RequestOutput:
    """Async-iterable result of generate_async, updated in place each step."""

    def __init__(
        self,
        llm: "LLM",
        request_id: int,
        prompt_token_ids: list[int],
        plan: list[int],
        params: SamplingParams,
    ) -> None:
        self._llm = llm
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.outputs = [CompletionOutput(0)]
        self._plan = plan
        self._params = params
        self._position = 0
        self._done = False
        self._aborted = False
        self.cached_tokens = llm._reuse(prompt_token_ids)

    @property
    def finished(self) -> bool:
        return self._done

    def abort(self) -> None:
        self._aborted = True
        _log({"event": "abort", "request_id": self.request_id})

    def aborted(self) -> bool:
        return self._aborted

    def __aiter__(self) -> "RequestOutput":
        return self

    async def __anext__(self) -> "RequestOutput":
        if self._done:
            raise StopAsyncIteration
        await asyncio.sleep(self._llm._step_delay)
        out = self.outputs[0]
        out._last_token_ids_len = len(out.token_ids)
        out._last_logprobs_len = len(out.logprobs)
        if self._aborted:
            out.finish_reason = "cancelled"
            self._done = True
            return self
        stops = set(self._params.stop_token_ids or [])
        interval = self._llm.args.stream_interval
        for _ in range(interval):
            if self._position >= len(self._plan):
                self._done, out.finish_reason = True, "length"
                break
            token = self._plan[self._position]
            self._position += 1
            if token == -1:
                raise RuntimeError("fake engine failure (#fail)")
            if token == -2:
                self._done, out.finish_reason = True, "timeout"
                break
            out.token_ids.append(token)
            if self._params.logprobs:
                # The sampled token at -0.25 (rank 1), then token+j at -0.25 - j (rank j + 1).
                out.logprobs.append(
                    {token + j: Logprob(-0.25 - j, j + 1) for j in range(self._params.logprobs)}
                )
            if token in stops:
                self._done, out.finish_reason, out.stop_reason = True, "stop", token
                if not self._params.include_stop_str_in_output:
                    out.token_ids.pop()
                    if self._params.logprobs:
                        out.logprobs.pop()
                break
            if len(out.token_ids) >= self._params.max_tokens:
                self._done, out.finish_reason = True, "length"
                break
        return self


class LLM:
    """TensorRT-LLM's LLM entry point (PyTorch backend), faked."""

    def __init__(self, model: str, tokenizer: Optional[str] = None, **kwargs: Any) -> None:
        self.args = TorchLlmArgs(
            model=model, tokenizer=tokenizer, **kwargs
        )  # refuses unknown keys, like TorchLlmArgs
        _log({"event": "init", "args": self.args.model_dump(mode="json", exclude_unset=True)})
        self._next_id = 0
        self._seen_prompts: list[list[int]] = []
        self.priorities: list[float] = []  # each generate_async call's priority
        self.retention_configs: list[Any] = []  # and its kv_cache_retention_config
        self._step_delay = float(os.environ.get("FAKE_TRTLLM_STEP_DELAY", "0"))
        from trtllm_responses.executors.echo import EchoExecutor
        from trtllm_responses.harmony import load_encoding

        self._encoding = load_encoding()
        self._planner = EchoExecutor(self._encoding)
        self.shutdown_called = False

    def _reuse(self, prompt: list[int]) -> int:
        best = 0
        if self.args.kv_cache_config.enable_block_reuse:
            for seen in self._seen_prompts:
                n = 0
                for a, b in zip(seen, prompt):
                    if a != b:
                        break
                    n += 1
                best = max(best, n)
        self._seen_prompts.append(list(prompt))
        return (best // TOKENS_PER_BLOCK) * TOKENS_PER_BLOCK

    def _plan(self, prompt: list[int]) -> list[int]:
        header_body = self._encoding.decode(list(self._planner._last_message(prompt)[1]))
        if header_body == "#fail":
            return self._encoding.encode("<|channel|>final<|message|>a") + [-1]
        if header_body == "#timeout":
            return self._encoding.encode("<|channel|>final<|message|>a") + [-2]
        return self._planner.plan(prompt)

    def generate_async(
        self,
        inputs: Any,
        sampling_params: Optional[SamplingParams] = None,
        streaming: bool = False,
        kv_cache_retention_config: Any = None,
        priority: float = DEFAULT_REQUEST_PRIORITY,
        **kwargs: Any,
    ) -> RequestOutput:
        # ``priority`` as in tensorrt_llm/llmapi/llm.py's LLM.generate_async: "The scheduling priority for the
        # request, in the range [0, 1]. Higher values indicate higher priority. Defaults to 0.5."
        if not (isinstance(inputs, list) and all(isinstance(t, int) for t in inputs)):
            raise TypeError(f"The inputs must be type str or list of int, but got {type(inputs)}")
        if not streaming:
            raise AssertionError("trtllm-responses always streams")
        params = sampling_params or SamplingParams()
        if params.guided_decoding is not None and self.args.guided_decoding_backend is None:
            raise ValueError("guided decoding needs the LLM's guided_decoding_backend")
        if not 0.0 <= priority <= 1.0:
            raise ValueError(f"priority must be in [0, 1], got {priority}")
        self._next_id += 1
        self.priorities.append(priority)
        self.retention_configs.append(kv_cache_retention_config)
        _log({"event": "generate", "request_id": self._next_id, "sampling": describe(params), "priority": priority})
        return RequestOutput(self, self._next_id, inputs, self._plan(inputs), params)

    def shutdown(self) -> None:
        self.shutdown_called = True
        _log({"event": "shutdown"})
