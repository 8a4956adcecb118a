"""tensorrt_llm/executor/result.py, faked: CompletionOutput, GenerationResult (RequestOutput), Logprob.

As there:

- ``generate_async(..., streaming=True)`` returns a result that is async-iterable, yields itself
  and is updated in place: ``outputs[0].token_ids`` grows, ``token_ids_diff`` and ``logprobs_diff``
  are what the last step added, ``finished`` and ``finish_reason`` ('stop', 'length', 'timeout',
  'cancelled') end it.
- A step delivers what the engine produced since the last response: the first token at once, then
  every ``stream_interval`` iterations (``PyExecutor``'s streaming responses); an iteration produces
  one token, or with ``speculative_config`` between one and ``max_draft_len + 1`` accepted tokens.
  So the tokens per step vary.
- A stop token from ``stop_token_ids`` (or ``end_id``) ends generation with 'stop'; it is removed
  from ``token_ids`` unless ``include_stop_str_in_output`` (``GenerationResultBase._handle_sequence``),
  but its logprob entry stays in ``logprobs`` (one more entry than tokens on that step).
- ``logprobs=k``: per token a dict of the k best ``{token_id: Logprob(logprob, rank)}``; the token
  actually sampled need not be among them (when it was not the most likely, it can be missing).
- ``abort()`` asks the executor to cancel (``executor.abort_request``): asynchronous, so the steps
  already under way may still deliver tokens before the result ends with 'cancelled'.
- An error response from the executor raises ``RequestError`` while iterating
  (``_handle_response``).
- ``cached_tokens``: the prompt tokens the KV cache reused, reported with the first response
  (not at submit), from blocks earlier requests stored when they finished (``_kv_pool.py``: the pool, its
  retention priorities and host tier). The fake's own addition: ``kv_reuse``, the same split into tokens
  reused from the device and from the host tier (onboarded).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .utils import RequestError

if TYPE_CHECKING:
    from ..llmapi.llm import LLM
    from ..sampling_params import SamplingParams

__all__ = ["CompletionOutput", "GenerationResult", "Logprob", "RequestOutput"]


@dataclass(slots=True)
class Logprob:
    """A token's logprob and its rank (1 = best): a dataclass in TensorRT-LLM (``executor/result.py``), not a
    tuple, so it is read by attribute."""

    logprob: float
    rank: Optional[int] = None


@dataclass(slots=True)
class CompletionOutput:
    index: int
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: Optional[str] = None
    stop_reason: Optional[int] = None
    logprobs: list[dict[int, Logprob]] = field(default_factory=list)
    #: A context-only request's ``DisaggregatedParams``, on its output as on its result (``_handle_response``
    #: there sets ``self._outputs[0].disaggregated_params``; the OpenEngine adapter reads the output's).
    disaggregated_params: Any = None
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


class GenerationResult:
    """The result of ``generate_async``: one request's output, updated in place each step."""

    def __init__(
        self,
        llm: "LLM",
        request_id: int,
        prompt_token_ids: list[int],
        tokens: Iterator[int],
        params: "SamplingParams",
        *,
        error: Optional[str] = None,
    ) -> None:
        self._llm = llm
        #: The KV-cache blocks of the attention-DP rank the request runs on (``generate_async`` sets it).
        self.kv = llm._kv
        #: The request's ``cache_salt`` (``generate_async`` sets it): its blocks are reused only by its salt's.
        self.cache_salt: Optional[str] = None
        #: Its ``kv_cache_retention_config`` (``generate_async`` sets it): its blocks' priorities and durations.
        self.retention: Any = None
        #: The attention-DP rank it runs on (``generate_async`` sets it), and what its prompt reused.
        self.rank = 0
        self.kv_reuse: Any = None
        self._released = False
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.outputs = [CompletionOutput(0)]
        self.sampling_params = params
        self._tokens = tokens
        self._params = params
        self._done = False
        self._abort_requested = False
        self._error = error
        self._abort_iterations = 0  # iterations since an abort was asked for
        self._responses = 0
        self._rng = random.Random(request_id)
        self.cached_tokens = 0
        self._all_tokens: list[int] = []
        #: A context-only request (``generate_async`` sets it): it ends after its first token, and then
        #: ``disaggregated_params`` holds what the generation leg needs (``_handle_response`` there).
        self._context_only = False
        self.disaggregated_params: Any = None
        #: Its first step waits until it is aborted (the ``#hold`` test hook: a long prefill).
        self.hold = False

    @property
    def finished(self) -> bool:
        return self._done

    def abort(self) -> None:
        self._abort_requested = True
        # "at": wall clock, which a test compares with its client's (tests/executors/test_trtllm_grpc_fleet.py)
        self._llm._log({"event": "abort", "request_id": self.request_id, "at": time.time()})
        if not self._done and self._responses:  # the engine lets it go: its computed blocks are stored
            self._release()

    def aborted(self) -> bool:
        return self._abort_requested

    def __aiter__(self) -> "GenerationResult":
        return self

    async def __anext__(self) -> "GenerationResult":
        if self._done:
            raise StopAsyncIteration
        await asyncio.sleep(self._llm._step_delay)
        if self.hold and self._responses == 0:
            held_until = time.monotonic() + 60
            while not self._abort_requested and time.monotonic() < held_until:
                await asyncio.sleep(0.01)
        out = self.outputs[0]
        out._last_token_ids_len = len(out.token_ids)
        out._last_logprobs_len = len(out.logprobs)
        if self._error is not None:
            self._done = True
            raise RequestError(self._error)
        if self._responses == 0:
            self.kv_reuse = self.kv.reuse(
                self.prompt_token_ids, self.cache_salt, self.retention, self._params.max_tokens
            )
            self.cached_tokens = self.kv_reuse.device + self.kv_reuse.host
        interval = 1 if self._responses == 0 else self._llm.args.stream_interval
        self._responses += 1
        for _ in range(interval):
            if self._abort_requested and self._abort_seen():
                self._finish("cancelled")
                break
            if self._iterate():
                break
        return self

    def _abort_seen(self) -> bool:
        # The executor notices an abort an iteration after it was asked for: tokens may still arrive.
        self._abort_iterations += 1
        return self._abort_iterations > 1

    def _accepted_per_iteration(self) -> int:
        spec = self._llm.args.speculative_config
        return 1 if spec is None else self._rng.randint(1, spec.draft_len() + 1)

    def _iterate(self) -> bool:
        """One engine iteration; True when the request finished."""
        out = self.outputs[0]
        params = self._params
        stops = set(params.stop_token_ids or [])
        if params.end_id is not None and not params.ignore_eos:
            stops.add(params.end_id)
        for _ in range(self._accepted_per_iteration()):
            token = next(self._tokens, None)
            if token is None:
                self._finish("length")
                return True
            if token == -1:
                self._finish("error")
                raise RequestError("fake engine failure (#fail)")
            if token == -2:
                self._finish("timeout")
                return True
            out.token_ids.append(token)
            self._all_tokens.append(token)
            if params.logprobs:
                out.logprobs.append(self._logprobs(token, params.logprobs))
            if token in stops:
                out.stop_reason = token
                if not params.include_stop_str_in_output:
                    out.token_ids.pop()  # its logprob entry stays
                self._finish("stop")
                return True
            if len(out.token_ids) >= params.max_tokens:
                self._finish("length")
                return True
        return False

    def _logprobs(self, token: int, k: int) -> dict[int, Logprob]:
        """The k best alternatives: the model's choice at -0.25 (rank 1), then choice+j at -0.25 - j.

        A token the sampler drew instead of the model's choice is not among them.
        """
        best = token
        if getattr(self._tokens, "last_was_inserted", False):
            best = (token + 7) % 199998
        return {best + j: Logprob(-0.25 - j, j + 1) for j in range(k)}

    def _finish(self, reason: str) -> None:
        self._done = True
        self.outputs[0].finish_reason = reason
        # Only a context phase that finished (and so is transmitted) carries the hand-off: one cancelled has no
        # ctx_request_id, and the OpenEngine adapter then sends its real finish (TensorRT-LLM's
        # tensorrt_llm/grpc/openengine/streaming.py, _format_result: "only a context phase that actually
        # transmitted fills in ctx_request_id").
        if self._context_only and self._all_tokens and reason != "cancelled":
            from ..disaggregated_params import DisaggregatedParams

            self.disaggregated_params = DisaggregatedParams(
                request_type="context_only",
                first_gen_tokens=self._all_tokens[:1],
                ctx_request_id=self.request_id,
                opaque_state=f"fake-context:{id(self._llm)}:{self.request_id}".encode(),
            )
            self.outputs[0].disaggregated_params = self.disaggregated_params
        if self._responses:
            self._release()

    def _release(self) -> None:
        """The request ends (any reason): its blocks are released into the pool (``releaseBlocks``, storing what
        it computed), and its rank has one request fewer. Once."""
        if self._released:
            return
        self._released = True
        self._llm._ended(self)
        self.kv.store(
            self.prompt_token_ids + self._all_tokens,
            self.cache_salt,
            self.retention,
            len(self.prompt_token_ids),
        )


RequestOutput = GenerationResult
