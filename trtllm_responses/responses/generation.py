"""ResponseGenerator: drives a run through the executor (and the tool loop) to its end.

``drive`` generates one :class:`~.run.ResponseRun`, handing each engine step's events to a
``deliver`` callback, has the result kept (stored) before the terminal event leaves, and returns
the terminal response. Streaming and non-streaming responses both use it: one code path, one loop
per token (no generator layers between the engine and the socket). It writes the run's live state
(its stream, the executor request it runs, its tool loop) and nothing else does (docs/architecture.md#layout).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable

from openai.types.responses import ResponseCompactionItem, ResponseStreamEvent

from ..adapter import HarmonyAdapter
from ..core import to_json
from ..executors import Executor, Generating, GenerationRequest, TokenDelta
from ..ops import ServerMetrics
from ..stream import ResponseStream, TokenStreamProcessor, make_usage
from ..tools import ServerTools
from .delta_pump import MainDeltas
from .logprobs import LogprobStreamProcessor
from .prepared import Deliver
from .run import ResponseRun
from .summaries import Summarizer
from .tool_loop import ToolLoop

__all__ = ["ResponseGenerator"]

logger = logging.getLogger(__name__)


class ResponseGenerator:
    """Generates runs: the executor requests each runs, its tool loop and reasoning summaries.

    ``keep`` serializes and stores a finished response (the service's); it returns the
    terminal response's JSON. ``runs`` holds the runs being driven in this process, by id.
    """

    def __init__(
        self,
        *,
        executor: Executor,
        adapter: HarmonyAdapter,
        metrics: ServerMetrics,
        keep: Callable[[ResponseRun], Awaitable[bytes]],
        redact_reasoning: bool = False,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.executor = executor
        #: Summarizes reasoning items when a response asks (None: ``--reasoning_summaries off``).
        self.summarizer = summarizer
        self.adapter = adapter
        self.metrics = metrics
        self.redact_reasoning = redact_reasoning
        self._keep = keep
        #: Runs being driven in this process, by id (foreground and background).
        self.runs: dict[str, ResponseRun] = {}

    async def drive(self, run: ResponseRun, deliver: Deliver | None = None) -> bytes:
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
        stream = ResponseStream(
            prepared.response,
            prepared.seal_reasoning,
            self.redact_reasoning,
            tools=prepared.prompt.tools,
            seal_tool_read=prepared.seal_tool_read,
            summarize=self.summarizer is not None and prepared.summary_mode is not None,
        )
        prompt_tokens = len(prepared.prompt.token_ids)
        top_logprobs = prepared.generation.sampling.logprobs
        processor = (
            TokenStreamProcessor(stream, self.adapter.encoding, prompt_tokens, run)
            if top_logprobs is None
            else LogprobStreamProcessor(stream, self.adapter.encoding, prompt_tokens, top_logprobs, run)
        )
        run.stream = processor.stream
        if prepared.team is not None:  # sub-agents still running at the end are reported before it
            processor.stream.close_with(prepared.team.close)
            prepared.team.count_usage = processor.count_extra
        self.runs[run.id] = run
        try:
            opening = processor.start()
            if prepared.compaction is not None:
                done = prepared.compaction
                processor.count_extra(done.input_tokens, done.output_tokens, done.reasoning_tokens)
                opening += processor.stream.compacted(
                    ResponseCompactionItem.model_validate(done.compaction_item)
                )
            # Every response runs the tool loop: besides server-run tools, it answers calls to tools
            # nobody runs (tools/unavailable.py). At message boundaries only: no cost per token.
            request = prepared.request
            declared = prepared.prompt.tools
            loop = ToolLoop(
                tools=prepared.tools if prepared.tools is not None else ServerTools(),
                adapter=self.adapter,
                processor=processor,
                generation=prepared.generation,
                prompt=prepared.prompt,
                calls=prepared.prompt.history.calls,
                max_seq_len=self.executor.max_seq_len,
                prompt_refusal=self.executor.prompt_refusal,
                max_output_tokens=request.max_output_tokens,
                max_tool_calls=request.max_tool_calls,
                tool_timeout=prepared.tool_timeout,
                include=frozenset(request.include or ()),
                client_tools=tuple(t.recipient for t in declared.tools) if declared is not None else (),
            )
            opening += loop.opening()
            run.tool_loop = loop
            if run.interrupted:  # cancelled before it started: its loop must not start a tool call
                loop.cancel()
            if deliver is not None:
                await deliver(opening)
        except BaseException:
            self.runs.pop(run.id, None)
            raise
        self.metrics.record_handoff(time.perf_counter() - prepared.received_at)
        self.metrics.response_started()
        try:
            events = await loop.run(functools.partial(self._generate, run), deliver)
            try:
                final_json = await self._keep(run)
            except Exception:  # the store or the serializer failed: the client still gets a terminal event
                logger.exception("Could not serialize or store %s", run.id)
                run.store_failed = True
                events[-1] = processor.stream.fail_instead("The server could not store the response.")
                final_json = to_json(processor.stream.final_response)  # type: ignore[arg-type]
            final = processor.stream.final_response
            self.metrics.record_response(
                processor.output_tokens,
                status=final.status if final is not None and final.status else "failed",
                input_tokens=len(prepared.prompt.token_ids),
                cached_tokens=processor.cached_tokens,
                received_at=prepared.received_at,
                first_token_at=processor.first_token_at,
            )
            run.first_token_at = processor.first_token_at
            run.usage = processor.usage()
            if deliver is not None:
                await deliver(events)
            return final_json
        finally:
            self.runs.pop(run.id, None)
            self.metrics.response_ended()
            if prepared.team is not None:  # however it ended (its client gone too): no sub-agent outlives it
                prepared.team.shutdown()
            # run → loop → processor → run is a cycle: cut it, so that refcounting frees the response's
            # prompt (a 100k-token list) when the last holder lets go, not the next full collection.
            run.tool_loop = None

    async def _prefill(self, run: ResponseRun, deliver: Deliver | None) -> bytes:
        """A response prepared without output (``generate: false``): its prompt goes through the engine
        (a one-token generation whose token is dropped, so TensorRT-LLM's KV-cache block reuse keeps the
        prompt's blocks for the turn that continues it), then it completes with ``output: []``."""
        prepared = run.prepared
        stream = ResponseStream(prepared.response)
        run.stream = stream
        sampling = dataclasses.replace(prepared.generation.sampling, max_tokens=1, logprobs=None)
        generation = dataclasses.replace(prepared.generation, sampling=sampling, constraint=None)
        self.runs[run.id] = run
        run.generating = run.id
        try:
            if deliver is not None:
                await deliver(stream.start())
            else:
                stream.start()
            cached = 0
            failed = True  # unless the engine finishes the step
            try:
                if not run.interrupted:
                    async with Generating(self.executor, generation) as deltas:
                        async for delta in deltas:
                            cached = delta.cached_tokens or cached
                            run.started(run.id)  # one step: its first delta is its last
                            if delta.finish_reason is not None:
                                failed = delta.finish_reason in ("error", "cancelled")
                                break
            except Exception as exc:  # the executor failed: response.failed, never a broken stream
                logger.exception("Executor failed preparing %s", run.id)
                failed = True
                events = stream.fail(f"The executor failed: {exc}")
            usage = make_usage(len(prepared.prompt.token_ids), 0, 0, cached)
            if not stream.final_response:
                if not failed:
                    events = stream.complete(usage)
                elif run.cancelled:
                    events = stream.cancel(usage)
                else:
                    events = stream.fail("The generation was cancelled.", usage)
            final_json = await self._keep(run)
            run.usage = usage
            if deliver is not None:
                await deliver(events)
            return final_json
        finally:
            self.runs.pop(run.id, None)
            run.generating = None

    async def _generate(
        self,
        run: ResponseRun,
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
        cutoff = run.prepared.summary_cutoff
        main = MainDeltas(
            self.executor.generate(generation), self.adapter.encoding.message if cutoff else None
        )
        run.generating = generation.request_id
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
                while stream.summary_due is not None:  # rare: an analysis message just ended
                    if deliver is not None and events:
                        await deliver(events)
                    main.pump()
                    pull = main.next
                    try:
                        events = await self._summarize(run, processor, deliver, main if cutoff else None)
                    finally:
                        main.stop_pumping()
                    try:
                        events += processor.resume()
                    except Exception:
                        logger.exception("Internal error while streaming %s", generation.request_id)
                        return processor.fail("The server had an error while processing the model's output.")
                    if processor.requeued:
                        main.push_front(processor.requeued)
                        processor.requeued = []
                if processor.done:
                    return events
                if events and deliver is not None:
                    await deliver(events)
        finally:
            if run.generating == generation.request_id:
                run.generating = None
            if not main.finished:
                self.executor.abort(generation.request_id)
                self.metrics.record_abort()
            await main.close()

    async def _summarize(
        self,
        run: ResponseRun,
        processor: TokenStreamProcessor,
        deliver: Deliver | None,
        cutoff: MainDeltas | None = None,
    ) -> list[ResponseStreamEvent]:
        """Stream the summary of the parked reasoning item; return the events that close it (undelivered).

        A side generation on the same executor (``summaries.py``); its failure leaves the
        item with what the summary had (nothing: ``summary: []``), never fails the response.
        With ``cutoff`` (a ``*_cutoff`` delivery) it stops, ``incomplete``, once the main generation's
        next item is ready.
        """
        stream = processor.stream
        parked = stream.summary_due
        assert parked is not None and self.summarizer is not None
        mode = run.prepared.summary_mode
        assert mode is not None  # summaries run only for responses that asked for them
        side_id = f"{run.id}.summary{parked.output_index}"
        request = self.summarizer.request(side_id, parked.text, mode, self.executor.max_seq_len)
        reader = self.summarizer.reader()
        run.summarizing = side_id
        cut = False
        delivering = False
        try:
            async with Generating(self.executor, request) as deltas:
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
        except Exception:  # the summary is optional: the response goes on without (the rest of) it
            if delivering:  # the client is gone: not the summary's failure
                raise
            logger.exception("The summary of %s failed", parked.item_id)
            cut = True
        finally:
            run.summarizing = None
            processor.count_summary(reader.tokens)
            self.metrics.record_summary(len(request.prompt_token_ids), reader.tokens)
        return stream.summary_ended(cut)
