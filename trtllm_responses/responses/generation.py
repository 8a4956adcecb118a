"""The run's driver: generates one :class:`~.run.ResponseRun` through the executor (and the tool loop).

Each run holds a :class:`RunDriver` of its own and alone calls it (``ResponseRun.drive``): it hands each
engine step's events to a ``deliver`` callback, has the result kept (``keeping.py``: stored) before the
terminal event leaves, and returns the terminal response. Streaming and non-streaming responses both use
it: one code path, one loop per token (no generator layers between the engine and the socket). The live
state of the generation (its stream, the executor request it runs, its tool loop, its usage) is the
driver's, written here only and read through the run's properties (docs/architecture.md#layout).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from openai.types.responses import ResponseCompactionItem, ResponseStreamEvent, ResponseUsage

from ..adapter import HarmonyAdapter
from ..core import to_json
from ..executors import Executor, Generating, GenerationRequest, TokenDelta
from ..ops import ServerMetrics, tracing
from ..stream import ResponseStream, RunControl, TokenStreamProcessor, make_usage
from ..tools import ServerTools
from .delta_pump import MainDeltas
from .keeping import Keeper
from .kv_release import settle_turn
from .logprobs import LogprobStreamProcessor
from .prepared import Deliver, PreparedResponse
from .spans import ChatSpan, chat_span
from .summaries import Summarizer, end_summary_span
from .tool_loop import ToolLoop

__all__ = ["DrivenRun", "Generator", "RunDriver"]

logger = logging.getLogger(__name__)


class DrivenRun(RunControl, Protocol):
    """What a driver reads of the run it drives (``run.py``; not imported here: the run imports this)."""

    @property
    def prepared(self) -> PreparedResponse:
        """What prepare decided (immutable)."""
        ...

    @property
    def id(self) -> str:
        """The response's id."""
        ...

    @property
    def interrupted(self) -> bool:
        """Cancelled or aborted: no further generation or tool call may start."""
        ...

    def started(self, request_id: str) -> None:
        """The executor has ``request_id`` now (its first delta came)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Generator:
    """What every run of a service is generated with (one per service; each run's driver reads it)."""

    executor: Executor
    adapter: HarmonyAdapter
    metrics: ServerMetrics
    #: Stores a finished response and appends it to its conversation (``keeping.py``).
    keeper: Keeper
    redact_reasoning: bool = False
    #: Summarizes reasoning items when a response asks (None: ``--reasoning_summaries off``).
    summarizer: Summarizer | None = None


class RunDriver:
    """Drives one run (its own, which alone calls it); holds that run's generation state.

    ``stream`` (once driven), ``generating``/``summarizing`` (the executor requests it runs now: what an
    interrupt aborts), ``tool_loop``, ``usage``, ``first_token_at``, ``settled`` and ``store_failed`` are
    written here only; the run exposes them read-only.
    """

    def __init__(self, generator: Generator) -> None:
        self._g = generator
        self.stream: ResponseStream | None = None
        self.generating: str | None = None  # the executor request it runs now (the tool loop runs several)
        self.summarizing: str | None = None  # a reasoning summary's side generation
        self.tool_loop: ToolLoop | None = None
        #: Final usage and when the executor's first delta came (perf_counter), for the access log.
        self.usage: ResponseUsage | None = None
        self.first_token_at: float | None = None
        #: Its end is final: kept (stored), or its store write failed and it ended failed. Until then its
        #: stream's terminal response is not shown (a GET read ``completed`` that then became ``failed``).
        self.settled = False
        #: It could not be stored: it ended failed, saying so, and is nowhere else.
        self.store_failed = False
        #: The last generation it sent the executor (what its end tells the engine: ``kv_release.py``).
        self.last_generation: GenerationRequest | None = None

    def interrupt(self, abort: Callable[[str], None]) -> None:
        """Stop what runs now: the tool loop's call, and (through ``abort``) the executor requests."""
        if self.tool_loop is not None:
            self.tool_loop.cancel()
        # A generation the executor has not registered yet ignores this; the drive reports its first delta
        # (``run.started``), which aborts it then, so a cancel right after the create still lands.
        for request_id in (self.generating, self.summarizing):
            if request_id is not None:
                abort(request_id)

    async def drive(self, run: DrivenRun, deliver: Deliver | None = None) -> bytes:
        """Generate ``run`` to its end; return the terminal response as JSON.

        ``deliver`` receives each engine step's events as they happen (streaming);
        without it the events are only used to build the response (non-streaming:
        the same path). An executor failure ends the response with
        ``response.failed``. The response is stored before the terminal event is
        delivered. The executor's generation is aborted whenever this stops before
        the executor finished: client gone (the caller cancels), malformed output,
        a delivery error.
        """
        prepared = run.prepared
        if not prepared.generate:
            return await self._prefill(run, deliver)
        processor = self._processor(run)
        opening = self._opening(run, processor)
        loop = self._tool_loop(run, processor)
        opening += loop.opening()
        if deliver is not None:
            await deliver(opening)
        metrics = self._g.metrics
        metrics.record_handoff(time.perf_counter() - prepared.received_at)
        metrics.response_started()
        try:
            events = await loop.run(functools.partial(self._generate, run), deliver)
            final_json = await self._finish(run, processor, events)
            if deliver is not None:
                await deliver(events)
            settle_turn(
                self._g.executor, self.last_generation, prepared.prompt, processor.stream.final_response
            )
            return final_json
        finally:
            metrics.response_ended()
            if prepared.team is not None:  # however it ended (its client gone too): no sub-agent outlives it
                prepared.team.shutdown()
            # run → loop → processor → run is a cycle: cut it, so that refcounting frees the response's
            # prompt (a 100k-token list) when the last holder lets go, not the next full collection.
            self.tool_loop = None

    def _processor(self, run: DrivenRun) -> TokenStreamProcessor:
        """The run's stream state machine and the processor feeding it tokens (with logprobs if asked)."""
        prepared = run.prepared
        g = self._g
        stream = ResponseStream(
            prepared.response,
            prepared.seal_reasoning,
            g.redact_reasoning,
            tools=prepared.prompt.tools,
            seal_tool_read=prepared.seal_tool_read,
            summarize=g.summarizer is not None and prepared.summary_mode is not None,
        )
        prompt_tokens = len(prepared.prompt.token_ids)
        top_logprobs = prepared.generation.sampling.logprobs
        parallel = prepared.request.parallel_tool_calls
        processor = (
            TokenStreamProcessor(stream, g.adapter.encoding, prompt_tokens, run, parallel)
            if top_logprobs is None
            else LogprobStreamProcessor(
                stream, g.adapter.encoding, prompt_tokens, top_logprobs, run, parallel
            )
        )
        self.stream = processor.stream
        if prepared.team is not None:  # sub-agents still running at the end are reported before it
            processor.stream.close_with(prepared.team.close)
            prepared.team.count_usage = processor.count_extra
        return processor

    def _tool_loop(self, run: DrivenRun, processor: TokenStreamProcessor) -> ToolLoop:
        """The run's tool loop. Every response runs one: besides server-run tools, it answers calls to
        tools nobody runs (tools/unavailable.py). At message boundaries only: no cost per token."""
        prepared = run.prepared
        request = prepared.request
        declared = prepared.prompt.tools
        executor = self._g.executor
        loop = ToolLoop(
            tools=prepared.tools if prepared.tools is not None else ServerTools(),
            adapter=self._g.adapter,
            processor=processor,
            generation=prepared.generation,
            prompt=prepared.prompt,
            calls=prepared.prompt.history.calls,
            max_seq_len=executor.max_seq_len,
            prompt_refusal=executor.prompt_refusal,
            max_output_tokens=request.max_output_tokens,
            max_tool_calls=request.max_tool_calls,
            tool_timeout=prepared.tool_timeout,
            include=frozenset(request.include or ()),
            client_tools=tuple(t.recipient for t in declared.tools) if declared is not None else (),
        )
        self.tool_loop = loop
        if run.interrupted:  # cancelled before it started: its loop must not start a tool call
            loop.cancel()
        return loop

    def _opening(self, run: DrivenRun, processor: TokenStreamProcessor) -> list[ResponseStreamEvent]:
        """The events that open the response (created, in progress), and the compaction made for it."""
        opening = processor.start()
        done = run.prepared.compaction
        if done is not None:
            processor.count_extra(done.input_tokens, done.output_tokens, done.reasoning_tokens)
            opening += processor.stream.compacted(ResponseCompactionItem.model_validate(done.compaction_item))
        return opening

    async def _finish(
        self, run: DrivenRun, processor: TokenStreamProcessor, events: list[ResponseStreamEvent]
    ) -> bytes:
        """Keep (store) the ended response before its terminal event (``events[-1]``) leaves, and count
        it; its JSON. A store that fails turns the terminal event into ``response.failed``, saying so."""
        prepared = run.prepared
        stream = processor.stream
        try:
            final_json = await self._g.keeper.keep(prepared, stream)
        except Exception:  # the store or the serializer failed: the client still gets a terminal event
            logger.exception("Could not serialize or store %s", run.id)
            self.store_failed = True
            events[-1] = stream.fail_instead("The server could not store the response.")
            final_json = to_json(stream.final_response)  # type: ignore[arg-type]
        self.settled = True
        final = stream.final_response
        self._g.metrics.record_response(
            processor.output_tokens,
            status=final.status if final is not None and final.status else "failed",
            input_tokens=len(prepared.prompt.token_ids),
            cached_tokens=processor.cached_tokens,
            received_at=prepared.received_at,
            first_token_at=processor.first_token_at,
        )
        self._g.metrics.sessions.turn(
            prepared.owner.name,
            prepared.session_key,
            len(prepared.prompt.token_ids),
            processor.cached_tokens,
            self._g.executor.kv_block_tokens,
        )
        self.first_token_at = processor.first_token_at
        self.usage = processor.usage()
        return final_json

    async def _prefill(self, run: DrivenRun, deliver: Deliver | None) -> bytes:
        """A response prepared without output (``generate: false``): its prompt goes through the engine
        (a one-token generation whose token is dropped, so TensorRT-LLM's KV-cache block reuse keeps the
        prompt's blocks for the turn that continues it), then it completes with ``output: []``."""
        prepared = run.prepared
        stream = self.stream = ResponseStream(prepared.response)
        self.generating = run.id
        try:
            if deliver is not None:
                await deliver(stream.start())
            else:
                stream.start()
            cached, failed, events = await self._prefill_step(run, stream)
            usage = make_usage(len(prepared.prompt.token_ids), 0, 0, cached)
            if not stream.final_response:
                if not failed:
                    events = stream.complete(usage)
                elif run.cancelled:
                    events = stream.cancel(usage)
                else:
                    events = stream.fail("The generation was cancelled.", usage)
            final_json = await self._g.keeper.keep(prepared, stream)
            self.settled = True
            self.usage = usage
            if deliver is not None:
                await deliver(events)
            return final_json
        finally:
            self.generating = None

    async def _prefill_step(
        self, run: DrivenRun, stream: ResponseStream
    ) -> tuple[int, bool, list[ResponseStreamEvent]]:
        """The prefill's one engine step: the cached prompt tokens, whether it failed, and the failure's
        events (the executor raised: ``response.failed``, never a broken stream)."""
        sampling = dataclasses.replace(run.prepared.generation.sampling, max_tokens=1, logprobs=None)
        generation = dataclasses.replace(run.prepared.generation, sampling=sampling, constraint=None)
        cached = 0
        failed = True  # unless the engine finishes the step
        try:
            if not run.interrupted:
                async with Generating(self._g.executor, generation) as deltas:
                    async for delta in deltas:
                        cached = delta.cached_tokens or cached
                        run.started(run.id)  # one step: its first delta is its last
                        if delta.finish_reason is not None:
                            failed = delta.finish_reason in ("error", "cancelled")
                            break
        except Exception as exc:
            logger.exception("Executor failed preparing %s", run.id)
            return cached, True, stream.fail(f"The executor failed: {exc}")
        return cached, failed, []

    async def _generate(
        self,
        run: DrivenRun,
        generation: GenerationRequest,
        processor: TokenStreamProcessor,
        deliver: Deliver | None,
    ) -> list[ResponseStreamEvent]:
        """Run one generation through ``processor``, delivering each step's events but the last (returned).

        It ends when the processor is done: a terminal event, or a held server-run
        tool call (the tool loop goes on). The generation is aborted in the
        executor whenever this stops before the executor finished. A reasoning item
        parked for its summary pauses the processor: the summary's side generation
        streams (:meth:`_summarize`) while the main generation's deltas are queued.
        """
        if run.interrupted:  # cancelled or aborted before this generation started: never submitted
            return processor.interrupted("The generation was cancelled.")
        if not tracing.enabled():
            return await self._stream(run, generation, processor, deliver, None)
        # Its span is current while it generates (a summary's side generation is its child); the tool calls
        # between generations are the ``response`` span's children (docs/tracing-and-dashboards.md#spans).
        with chat_span(run.prepared, generation) as live:
            chat = ChatSpan(live, processor)
            try:
                return await self._stream(run, chat.traced(generation), processor, deliver, chat)
            finally:
                chat.close(processor, len(generation.prompt_token_ids))

    async def _stream(
        self,
        run: DrivenRun,
        generation: GenerationRequest,
        processor: TokenStreamProcessor,
        deliver: Deliver | None,
        chat: ChatSpan | None,
    ) -> list[ResponseStreamEvent]:
        """``_generate``'s loop: one delta of the executor at a time into ``processor``; ``chat``: its span
        (None: tracing is off), told of the first delta in the branch that notes it already."""
        cutoff = run.prepared.summary_cutoff
        main = MainDeltas(
            self._g.executor.generate(generation), self._g.adapter.encoding.message if cutoff else None
        )
        self.generating = generation.request_id
        self.last_generation = generation
        first = processor.first_token_at is None  # for the access log; a local flag costs nothing per token
        started = False  # the executor has this generation: an abort from now on reaches it
        stream = processor.stream
        # The engine's deltas straight from its generator; once a summary has started, from the pump.
        pull: Callable[[], Awaitable[TokenDelta]] = main.deltas.__anext__
        direct = pull
        try:
            while True:
                try:
                    delta = await pull()
                    if delta.finish_reason is not None:
                        main.finished = True
                    elif pull is not direct and main.direct:  # a summary's queued steps are all read
                        pull = direct
                    if not started:
                        started = True
                        if first:
                            processor.first_token_at = time.perf_counter()
                        if chat is not None:
                            chat.first_delta()
                        if not main.finished:
                            run.started(generation.request_id)
                except StopAsyncIteration:
                    return processor.fail("The executor ended the stream without a finish reason.")
                except Exception as exc:  # the executor failed: response.failed, never a broken stream
                    logger.exception("Executor failed on %s", generation.request_id)
                    return processor.fail(f"The executor failed: {exc}")
                try:
                    events = processor.process(delta)
                except Exception:
                    logger.exception("Internal error while streaming %s", generation.request_id)
                    return processor.fail("The server had an error while processing the model's output.")
                if stream.summary_due is not None:  # rare: an analysis message just ended
                    pull = main.next
                    events, failed = await self._pause_for_summaries(run, processor, deliver, main, events)
                    if failed:
                        return events
                if processor.done:
                    return events
                if events and deliver is not None:
                    await deliver(events)
        finally:
            if self.generating == generation.request_id:
                self.generating = None
            if not main.finished:
                self._g.executor.abort(generation.request_id)
                self._g.metrics.record_abort()
            await main.close()

    async def _pause_for_summaries(
        self,
        run: DrivenRun,
        processor: TokenStreamProcessor,
        deliver: Deliver | None,
        main: MainDeltas,
        events: list[ResponseStreamEvent],
    ) -> tuple[list[ResponseStreamEvent], bool]:
        """Stream the summaries due (the main generation's deltas queued meanwhile), then resume; the events
        to go on with, and whether the stream failed resuming (its terminal events, then)."""
        stream = processor.stream
        cutoff = main if run.prepared.summary_cutoff else None
        while stream.summary_due is not None:
            if deliver is not None and events:
                await deliver(events)
            main.pump()
            span = tracing.start_span("reasoning_summary")  # current around its side generation: summaries.py
            try:
                with tracing.use_span(span):
                    events = await self._summarize(run, processor, deliver, span, cutoff)
            finally:
                main.stop_pumping()
            try:
                events += processor.resume()
            except Exception:
                logger.exception("Internal error while streaming %s", run.id)
                return processor.fail("The server had an error while processing the model's output."), True
            if processor.requeued:
                main.push_front(processor.requeued)
                processor.requeued = []
        return events, False

    async def _summarize(
        self,
        run: DrivenRun,
        processor: TokenStreamProcessor,
        deliver: Deliver | None,
        span: tracing.SpanLike,
        cutoff: MainDeltas | None = None,
    ) -> list[ResponseStreamEvent]:
        """Stream the summary of the parked reasoning item; return the events that close it (undelivered),
        and end its ``span``.

        A side generation on the same executor (``summaries.py``); its failure leaves the
        item with what the summary had (nothing: ``summary: []``), never fails the response.
        With ``cutoff`` (a ``*_cutoff`` delivery) it stops, ``incomplete``, once the main generation's
        next item is ready.
        """
        stream = processor.stream
        parked = stream.summary_due
        assert parked is not None and self._g.summarizer is not None
        mode = run.prepared.summary_mode
        assert mode is not None  # summaries run only for responses that asked for them
        side_id = f"{run.id}.summary{parked.output_index}"
        request = self._g.summarizer.request(
            side_id, parked.text, mode, self._g.executor.max_seq_len, run.prepared.generation.cache_salt
        )
        reader = self._g.summarizer.reader()
        self.summarizing = side_id
        cut = False
        delivering = False
        try:
            async with Generating(self._g.executor, request) as deltas:
                async for delta in deltas:
                    text = reader.feed(delta.token_ids)
                    if delta.finish_reason is not None:
                        text += reader.flush()
                        cut = delta.finish_reason == "length" and not reader.ended
                    if text:
                        events = stream.summary_delta(text)
                        if deliver is not None:
                            delivering = True
                            await deliver(events)
                            delivering = False
                    if deltas.finished or reader.ended or run.interrupted:
                        break
                    if cutoff is not None and cutoff.next_ready:  # the answer is ready: it waits no longer
                        cut = True
                        break
        except Exception as exc:  # the summary is optional: the response goes on without (the rest of) it
            if delivering:  # the client is gone: not the summary's failure
                raise
            logger.exception("The summary of %s failed", parked.item_id)
            tracing.fail(span, "the summary failed", error_type=type(exc).__qualname__)
            cut = True
        finally:
            self.summarizing = None
            end_summary_span(span, mode, len(request.prompt_token_ids), reader.tokens, cut)
            processor.count_summary(reader.tokens)
            self._g.metrics.record_summary(len(request.prompt_token_ids), reader.tokens)
        return stream.summary_ended(cut)
