"""Prefill and decode on different engines over OpenEngine (``serve --grpc_protocol openengine
--prefill_engine_url … --decode_engine_url …``): the two legs' messages and how the context leg is read
(docs/a-fleet-of-engines.md#prefill-and-decode-on-different-engines). The executor (``executor.py``) sequences a
turn as ``trtllm-serve disaggregated``'s proxy does (``tensorrt_llm/serve/openai_disagg_service.py``,
``_send_disagg_request_ctx_first``):

1. the context request is the turn's request marked ``context_only`` (``_get_ctx_request``; over OpenEngine
   ``extra["request_type"]``, as TensorRT-LLM's adapter reads it: ``tensorrt_llm/grpc/openengine/disagg.py``),
   on the prefill engine the session key chooses;
2. its answer must be a hand-off (``_verify_ctx_response``): over OpenEngine the stream ends with a
   ``PrefillReady`` whose ``KvSessionRef`` has a ``session_id`` (Dynamo's sidecar checks the same). A context
   that ends otherwise (cancelled before the hand-off, failed) is the whole turn (``_need_gen``);
3. the generation request is the turn's request with that ``KvSessionRef`` sent back unchanged in
   ``kv.session`` (``_get_gen_request``; the adapter makes it ``generation_only``), on the decode engine the
   session key chooses; its stream, which starts with the context's first token, is the turn's.

What OpenEngine changes in step 2: a context whose first token is a stop token still ends with
``PrefillReady`` (the adapter suppresses its ``finished``), so the first token (the ``token`` event, or the
session's ``first_gen_tokens`` where the stop was trimmed from the output) is checked against the stop ids here,
where the proxy's ``_need_gen`` would have seen ``finish_reason`` 'stop'. And a context handed off whose
generation leg never runs cannot be freed: ``Abort(request_id)`` answers ``ALREADY_FINISHED`` once the context's
stream ended, ``Abort(kv_session)`` is ``UNIMPLEMENTED`` and ``GetServerInfo`` says
``kv_connector.supports_abort_cleanup = false``; its blocks stay held until the prefill engine's
``cache_transceiver_config.kv_transfer_timeout_ms`` (PyExecutor's ``_check_kv_transfer_timeout``) or its exit.
:class:`Split` logs and counts each (:data:`HELD`).

:class:`Split` runs the two legs through the executor's own attempt and retry (each leg is one engine's
``Generate`` as a whole turn is, on its side's pool), so abort, cancel, a client that leaves and the retry before
the first answer are the executor's, unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from ..base import ExecutorError, FinishReason, GenerationRequest, TokenDelta
from .engine import Engine, Reader
from .messages import Step, TokenLogprobs
from .openengine_messages import OpenEngineReader
from .pool import EnginePool

__all__ = ["HELD", "ContextReader", "Handoff", "Split", "context_message", "generation_message"]

#: The executor's one attempt on an engine: ``run_on(engine, request, retry=, pool=, message=, reader=)``.
RunOn = Callable[..., AsyncGenerator[TokenDelta, None]]
#: The executor's attempt and one retry on a pool: ``with_retry(pool, request, run(engine, retry))``.
WithRetry = Callable[
    [EnginePool, GenerationRequest, Callable[[Engine, bool], AsyncGenerator[TokenDelta, None]]],
    AsyncGenerator[TokenDelta, None],
]

logger = logging.getLogger(__name__)

#: The log line of a context handed off whose generation leg never ran (``%s``: request, engine, why).
HELD = (
    "The context of %s stays held on the prefill engine %s until its kv_transfer_timeout_ms: %s (OpenEngine "
    "cannot free a handed-off context: Abort answers ALREADY_FINISHED, supports_abort_cleanup is false)"
)


def context_message(message: Any) -> Any:
    """The context leg of a turn's ``GenerateRequest``: a copy marked ``extra["request_type"] = "context_only"``."""
    context = type(message)()
    context.CopyFrom(message)
    context.extra.update({"request_type": "context_only"})
    return context


def generation_message(message: Any, session: Any) -> Any:
    """The generation leg: a copy of the turn's ``GenerateRequest`` carrying the context's ``KvSessionRef``,
    unchanged, in ``kv.session`` (``extra`` keeps ``conversation_id``; ``"generation_only"`` cannot be named there)."""
    generation = type(message)()
    generation.CopyFrom(message)
    generation.kv.session.CopyFrom(session)
    return generation


class Handoff:
    """What a context leg handed over: the ``KvSessionRef`` (sent back unchanged), the first tokens, their
    logprobs (None: not asked, or not sent), and the prompt tokens the prefill engine reused."""

    __slots__ = ("cached_tokens", "first_logprobs", "first_tokens", "session")

    def __init__(
        self,
        session: Any,
        first_tokens: Sequence[int],
        first_logprobs: TokenLogprobs | None,
        cached: int | None,
    ) -> None:
        self.session = session
        self.first_tokens = list(first_tokens)
        self.first_logprobs = first_logprobs
        self.cached_tokens = cached


class ContextReader:
    """Reads a context leg's events (the executor's reader of this leg): its ``token`` events are kept, not
    yielded (the generation leg's stream starts with the same token); a ``PrefillReady`` is the hand-off
    (:attr:`handoff`, and :attr:`ended`: the stream ends there without a finish); a ``finished`` (cancelled
    before the hand-off) ends the turn with whatever tokens came; an ``error`` raises as in a whole turn."""

    def __init__(self, url: str, top: int | None) -> None:
        self._url = url
        self._events = OpenEngineReader(url, top)
        self._tokens: list[int] = []
        self._logprobs: list[Any] | None = [] if top is not None else None
        #: The hand-off, once read.
        self.handoff: Handoff | None = None

    @property
    def ended(self) -> bool:
        """The stream's end was read without a finish: the hand-off."""
        return self.handoff is not None

    def read(self, response: Any) -> Step | None:
        kind = response.WhichOneof("event")
        if kind == "prefill_ready":
            session = response.prefill_ready.kv_session
            if not session.session_id or not session.HasField("attributes_struct"):
                raise ExecutorError(
                    f"the prefill engine at {self._url} handed off a context without a session id or its "
                    "attributes: a decode engine could not find it"
                )
            listed = session.attributes_struct.fields.get("first_gen_tokens")
            first = self._tokens or (
                [int(v.number_value) for v in listed.list_value.values] if listed is not None else []
            )
            cached = self._events.cached(response)
            self.handoff = Handoff(session, first, self._logprobs or None, cached)
            return None
        step = self._events.read(response)
        if step is None:
            return None
        if step.finish is None:
            self._tokens += step.tokens
            if self._logprobs is not None and step.logprobs is not None:
                self._logprobs += step.logprobs
            return None
        return Step(self._tokens, self._logprobs, step.cached_tokens, step.finish)


class Split:
    """The two legs of each turn (module docstring) over the ``prefill`` and ``decode`` pools; :attr:`held`
    counts the contexts handed off whose generation leg never ran."""

    def __init__(self, prefill: EnginePool, decode: EnginePool) -> None:
        self.prefill = prefill
        self.decode = decode
        self.held = 0
        #: Turns running (request id: cancelled), so a cancel between the legs is seen.
        self._turns: dict[str, bool] = {}

    def cancelled(self, request_id: str) -> None:
        """The turn ``request_id`` was cancelled: no generation leg starts after this."""
        if request_id in self._turns:
            self._turns[request_id] = True

    async def generate(
        self,
        request: GenerationRequest,
        unapplied: Mapping[str, str],
        with_retry: WithRetry,
        run_on: RunOn,
    ) -> AsyncGenerator[TokenDelta, None]:
        """A turn as a context leg on a prefill engine, then a generation leg on a decode engine; each leg
        retried once elsewhere when its engine fails before answering (``with_retry``)."""
        top = request.sampling.logprobs
        legs: dict[str, Any] = {}

        def context(engine: Engine, retry: bool) -> AsyncGenerator[TokenDelta, None]:
            reader = legs["context"] = ContextReader(engine.url, top)
            legs["prefill"] = engine
            message = context_message(engine.request(request, unapplied))
            return run_on(engine, request, retry=retry, pool=self.prefill, message=message, reader=reader)

        self._turns[request.request_id] = False
        try:
            async for delta in with_retry(self.prefill, request, context):
                yield delta  # the turn ended in its context leg (cancelled before the hand-off)
            handoff: Handoff | None = legs["context"].handoff
            if handoff is None:
                return
            prefill: Engine = legs["prefill"]
            ended = self.ended_at_handoff(request, handoff)
            if ended is not None:
                reason, why = ended
                self._hold(request, prefill, why)
                yield TokenDelta([], reason, None, handoff.cached_tokens, None if top is None else [])
                return

            def generation(engine: Engine, retry: bool) -> AsyncGenerator[TokenDelta, None]:
                message = generation_message(engine.request(request, unapplied), handoff.session)
                reader: Reader = OpenEngineReader(
                    engine.url, top, cached=handoff.cached_tokens, first=handoff.first_logprobs
                )
                return run_on(engine, request, retry=retry, pool=self.decode, message=message, reader=reader)

            answered = False
            try:
                async for delta in with_retry(self.decode, request, generation):
                    answered = True
                    yield delta
            except ExecutorError as exc:
                if not answered:
                    self._hold(request, prefill, f"its generation leg failed: {exc}")
                raise
        finally:
            del self._turns[request.request_id]

    def ended_at_handoff(
        self, request: GenerationRequest, handoff: Handoff
    ) -> tuple[FinishReason, str] | None:
        """Why a turn handed off ends without its generation leg (its finish reason and why), or None."""
        if self._turns.get(request.request_id):
            return "cancelled", "the turn was cancelled before its generation leg"
        stops = set(request.sampling.stop_token_ids)
        if handoff.first_tokens and handoff.first_tokens[0] in stops:
            return "stop", "its first token is a stop token (PrefillReady hides the stop)"
        return None

    def _hold(self, request: GenerationRequest, prefill: Engine, why: str) -> None:
        """A context handed off whose generation leg will not run: logged and counted."""
        self.held += 1
        logger.warning(HELD, request.request_id, prefill.url, why)
