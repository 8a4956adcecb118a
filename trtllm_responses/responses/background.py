"""Background responses: generation owned by the server, not by a client connection.

``BackgroundResponses.start`` has the service drive the run in a task of the
service's (``ResponsesService.start_background``) and subscribes a recorder that
keeps each event's SSE frame, so a background response is generated exactly like
any other (one drive), and any number of clients can read it, from any sequence
number, while it runs and for a grace period after it ended:

- ``GET /v1/responses/{id}`` polls (the service's live snapshot, then the stored response);
- ``GET /v1/responses/{id}?stream=true&starting_after=N`` replays the frames after
  sequence number N and follows live until the terminal event;
- ``POST /v1/responses/{id}/cancel`` cancels the run (``ResponseRun.cancel``) and awaits its
  end: it ends ``cancelled`` (idempotent: a finished response stays as it is).

Recorded frames are bounded per response (count and bytes; the oldest go
first), in total over every run of the process (``max_total_bytes``: the frames of
finished runs go first, oldest-ended first, then the recording run's oldest), and
are dropped ``grace`` seconds after the response ended. At most ``max_running``
background responses generate at once; one more is a 429.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import orjson
from openai.types.responses import ResponseStreamEvent

from ..core import InvalidRequestError, TooManyRequestsError, to_json
from ..ops import trim_heap
from ..responses import ResponseRun, ResponsesService
from .frame_log import FrameLog
from .relay import RedisRelay
from .sse import encode_event, obfuscate, obfuscation_wanted

__all__ = ["BackgroundLimits", "BackgroundResponses", "BackgroundRun"]

logger = logging.getLogger(__name__)


#: A finished run keeps its final response twice over: the JSON it is answered with, and the stream
#: state it was made from (its items' text); counted as this many times the JSON's length.
FINAL_HELD_FACTOR = 2


@dataclass(frozen=True, slots=True)
class BackgroundLimits:
    """How much of each background response's event stream is kept, and for how long after it ends."""

    max_events: int = 100_000
    max_bytes: int = 64 << 20
    grace: float = 300.0
    #: Finished runs kept for replay at once, in this process (the oldest-ended go first past it).
    max_finished: int = 1_000
    #: Recorded frames of every run of this process together (finished runs' go first, oldest-ended first).
    max_total_bytes: int = 512 << 20
    #: Background responses generating at once in this process; one more is 429 before it starts.
    max_running: int = 128


#: How long a cancel waits for the run it cancelled to end (its generation aborted, its result stored).
CANCEL_WAIT_SECONDS = 30.0


@dataclass(eq=False)
class BackgroundRun:
    """One background response's recorded frames (a subscriber of its run), and whether it has ended."""

    run: ResponseRun
    limits: BackgroundLimits
    #: Its frames, in large buffers (``frame_log.py``): what the budgets count is what is allocated.
    frames: FrameLog = field(default_factory=FrameLog)
    first_sequence: int = 0  # sequence number of frames[0]
    nbytes: int = 0
    done: bool = False
    ended_at: float | None = None
    task: asyncio.Task[bytes] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    #: Told how many bytes the run's frames grew (or shrank) by: the process-wide budget.
    account: Callable[[BackgroundRun, int], None] | None = None
    #: Its frames are obfuscated (``stream_options.include_obfuscation``): decided once, not per step.
    obfuscated: bool = field(init=False)

    def __post_init__(self) -> None:
        self.obfuscated = obfuscation_wanted(self.run.prepared.request.stream_options)

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def final(self) -> bytes | None:
        """The final response's JSON once it ended (retrieved from here while the store cannot give it)."""
        return self.run.final_json

    def snapshot(self) -> bytes:
        """The response as it is now: ``queued`` until its generation starts, then its stream's snapshot."""
        stream = self.run.stream
        if stream is None:
            return to_json(self.run.prepared.response.model_copy(update={"status": "queued"}))
        return to_json(stream.snapshot())

    @property
    def next_sequence(self) -> int:
        return self.first_sequence + len(self.frames)

    async def record(self, events: list[ResponseStreamEvent]) -> None:
        """The ``deliver`` of a background drive: keep each event's frame, wake the followers."""
        before = self.nbytes
        frames = self.frames
        for event in events:
            frames.append(obfuscate(event, encode_event(event)) if self.obfuscated else encode_event(event))
        self.nbytes += frames.nbytes - before
        while len(frames) > self.limits.max_events or self.nbytes > self.limits.max_bytes:
            self.drop_oldest()
        if self.account is not None:
            self.account(self, self.nbytes - before)
        self._wake()

    def drop_oldest(self) -> int:
        """Forget the oldest kept frame; the bytes this gave back (its chunk's, once its last frame goes)."""
        freed = self.frames.drop_oldest()
        self.first_sequence += 1
        self.nbytes -= freed
        return freed

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self) -> None:
        """Wait until a frame is recorded or the run ends."""
        if not self.done:
            await self._changed.wait()

    def finish(self) -> None:
        self.done = True
        self.ended_at = time.monotonic()
        # Its frames no longer grow (their last chunk shrinks to fit), and what it holds besides them, its
        # final response, is counted like them.
        self.frames.seal()
        final = self.final
        held = self.frames.nbytes + (FINAL_HELD_FACTOR * len(final) if final is not None else 0)
        grown, self.nbytes = held - self.nbytes, held
        if self.account is not None:
            self.account(self, grown)
        self._wake()

    def follow(self, starting_after: int | None) -> AsyncIterator[bytes]:
        """Frames after sequence number ``starting_after`` (all without it), live until the end.

        Checked here, before any byte is sent: InvalidRequestError if those events are gone.
        """
        position = 0 if starting_after is None else starting_after + 1
        if position < self.first_sequence:
            raise InvalidRequestError(
                f"Events before sequence number {self.first_sequence} of this response are no longer kept.",
                param="starting_after",
            )
        return self._frames(position)

    async def _frames(self, position: int) -> AsyncIterator[bytes]:
        while True:
            if position < self.first_sequence:
                raise RuntimeError("a follower fell behind the kept events")
            end = self.next_sequence
            if position < end:
                yield self.frames.join(position - self.first_sequence, end - self.first_sequence)
                position = end
                continue
            if self.done:
                return
            await self._changed.wait()


class BackgroundResponses:
    """The background responses of one server process."""

    def __init__(
        self,
        service: ResponsesService,
        limits: BackgroundLimits | None = None,
        relay: RedisRelay | None = None,
    ) -> None:
        self.service = service
        self.limits = limits or BackgroundLimits()
        self.runs: dict[str, BackgroundRun] = {}
        #: The runs of ``runs`` that ended, oldest-ended first (the order they are forgotten in).
        self._finished: dict[str, BackgroundRun] = {}
        #: With a shared Redis store: other processes' background responses, and ours for them.
        self.relay = relay
        self._publishers: set[asyncio.Task[None]] = set()
        self.recorded_bytes = 0  # frames of every kept run
        self._trim_due = False  # runs were forgotten or sealed: their memory can go back to the system

    def _account(self, run: BackgroundRun, grown: int) -> None:
        """Keep every run's frames within ``max_total_bytes``: finished runs go first (oldest-ended
        first: retrieving them still works, from the store), then ``run``'s own oldest frames."""
        self.recorded_bytes += grown
        budget = self.limits.max_total_bytes
        if self.recorded_bytes <= budget:
            return
        for old in list(self._finished.values()):
            if self.recorded_bytes <= budget:
                return
            if old is not run:
                self._forget(old)
        while self.recorded_bytes > budget and len(run.frames) > 1:
            self.recorded_bytes -= run.drop_oldest()

    def _forget(self, run: BackgroundRun) -> None:
        self._trim_due = True
        if self.runs.get(run.id) is run:
            del self.runs[run.id]
            self.recorded_bytes -= run.nbytes
        if self._finished.get(run.id) is run:
            del self._finished[run.id]

    async def begin(self, run: ResponseRun) -> BackgroundRun:
        """Start ``run``; with a shared store, every process can see it once this returns.

        TooManyRequestsError (429) if ``max_running`` background responses are generating already.
        """
        if self.active >= self.limits.max_running:
            raise TooManyRequestsError(
                f"This server is generating {self.limits.max_running} background responses, its limit; retry "
                "when some have finished.",
                param="background",
                code="too_many_background_responses",
            )
        if self.relay is not None:
            await self.relay.announce(run.prepared)  # 503 if Redis is down: nothing has started yet
        return self.start(run)

    def start(self, run: ResponseRun) -> BackgroundRun:
        """Have the service drive ``run`` in a task of its own, recording its events; return at once."""
        self._reap()
        recorded = BackgroundRun(run, self.limits, account=self._account)
        self.runs[recorded.id] = recorded
        self.service.metrics.active_background.inc()
        run.subscribe(recorded.record)
        recorded.task = self.service.start_background(run)
        recorded.task.add_done_callback(lambda task: self._ended(recorded, task))
        if self.relay is not None:
            publisher = asyncio.ensure_future(self.relay.publish(recorded))
            self._publishers.add(publisher)
            publisher.add_done_callback(self._publishers.discard)
        return recorded

    def _ended(self, recorded: BackgroundRun, task: asyncio.Task[bytes]) -> None:
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or error is not None:
            logger.error(
                "Background response %s stopped without a terminal event", recorded.id, exc_info=error
            )
        recorded.finish()
        self._trim_due = True  # its last chunk shrank
        self.service.metrics.active_background.dec()
        if self.runs.get(recorded.id) is recorded:
            self._finished[recorded.id] = recorded

    def get(self, response_id: str) -> BackgroundRun | None:
        """The run of ``response_id`` while its events are kept."""
        return self.runs.get(response_id)

    @property
    def active(self) -> int:
        """Background responses still generating."""
        return sum(1 for run in self.runs.values() if not run.done)

    async def cancel(self, response_id: str) -> bytes:
        """Cancel a background response; return it (status ``cancelled``, or as it ended)."""
        run = self.runs.get(response_id)
        if run is None and self.relay is not None:
            body = await self.relay.request_cancel(response_id)
            if body is not None:
                return body
        if run is not None and not run.done:
            assert run.task is not None
            run.run.cancel()  # an event the run reacts to at once, queued or generating
            await asyncio.wait({run.task}, timeout=CANCEL_WAIT_SECONDS)
        body = await self.retrieve(response_id)
        if run is None and not _is_background(body):
            raise InvalidRequestError(
                f"Response '{response_id}' is not a background response; only background responses can be "
                "cancelled.",
                param="response_id",
            )
        return body

    async def delete(self, response_id: str) -> bytes:
        """``DELETE``: forget a response. A running background response is cancelled first (its
        generation aborted, here or in the process running it) and then forgotten everywhere: its
        events, its snapshot and the response it stored as it ended. Any other response: the store's."""
        run = self.runs.get(response_id)
        running_elsewhere = (
            run is None and self.relay is not None and await self.relay.snapshot(response_id) is not None
        )
        if run is None and not running_elsewhere:
            body = await self.service.delete(response_id)  # 404 if unknown
            if self.relay is not None:
                await self.relay.forget(response_id)  # a finished background response's replayable events
            return body
        await self.cancel(response_id)  # returns once it ended and was stored (or its store write failed)
        if run is not None:
            self._forget(run)
        if self.relay is not None:
            await self.relay.forget(response_id)
        await self.service.store.delete(response_id)
        return orjson.dumps({"id": response_id, "object": "response.deleted", "deleted": True})

    async def cancel_local(self, response_id: str) -> None:
        """Cancel ``response_id`` if this process runs it (another process asked, through the relay)."""
        if response_id in self.runs:
            await self.cancel(response_id)

    async def stream(self, response_id: str, starting_after: int | None) -> AsyncIterator[bytes]:
        """SSE frames of a background response after ``starting_after``; 400/404 when there are none to give."""
        run = self.runs.get(response_id)
        if (
            run is None
            and self.relay is not None
            and (
                await self.relay.has_events(response_id) or await self.relay.snapshot(response_id) is not None
            )
        ):
            first = await self.relay.first_sequence(response_id)
            if (
                starting_after is not None
                and starting_after + 1 < first
                or starting_after is None
                and first > 0
            ):
                raise InvalidRequestError(
                    f"Events before sequence number {first} of this response are no longer kept.",
                    param="starting_after",
                )
            return self.relay.follow(response_id, starting_after)
        if run is None:
            live = self.service.find(response_id)
            if live is not None and not live.prepared.request.background:
                raise InvalidRequestError(_NOT_BACKGROUND.format(response_id), param="stream")
            body = await self.service.retrieve(response_id)  # NotFoundError if unknown
            if not _is_background(body):
                raise InvalidRequestError(_NOT_BACKGROUND.format(response_id), param="stream")
            raise InvalidRequestError(
                f"The events of background response '{response_id}' are no longer kept; retrieve it without "
                "stream=true.",
                param="stream",
            )
        return run.follow(starting_after)

    async def retrieve(self, response_id: str) -> bytes:
        """A response's JSON: ``queued`` until its generation starts, then as the service has it."""
        run = self.runs.get(response_id)
        if run is not None and run.run.stream is None and not run.done:
            return run.snapshot()  # queued
        if run is not None and run.final is not None and run.run.store_failed:
            return run.final  # failed, saying it could not be stored: never a silent 404
        if run is None and self.relay is not None and self.service.find(response_id) is None:
            if await self.service.store.get(response_id) is None:
                snapshot = await self.relay.snapshot(response_id)
                if snapshot is not None:
                    return snapshot
        return await self.service.retrieve(response_id)

    def _reap(self) -> None:
        """Forget runs whose grace period is over."""
        now = time.monotonic()
        for run in list(self._finished.values()):  # oldest-ended first: stop at the first still in grace
            if run.ended_at is not None and now - run.ended_at <= self.limits.grace:
                break
            self._forget(run)
        for run in list(self._finished.values())[: max(0, len(self._finished) - self.limits.max_finished)]:
            self._forget(run)

    async def reap_forever(self, interval: float = 5.0) -> None:
        """Run until cancelled: drop expired runs even when no new background response starts, and give
        the memory of forgotten runs back to the system (``ops/heap.py``), at most once an interval."""
        while True:
            await asyncio.sleep(interval)
            self._reap()
            if self._trim_due:
                self._trim_due = False
                await asyncio.to_thread(trim_heap)

    def abort_all(self, reason: str = "The server is shutting down.") -> None:
        """Abort every running background generation in the executor (each ends with a terminal event)."""
        for run in self.runs.values():
            if not run.done:
                run.run.abort()

    async def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the running background responses to end."""
        tasks = [run.task for run in self.runs.values() if run.task is not None and not run.done]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)


def _is_background(body: bytes) -> bool:
    return bool(orjson.loads(body).get("background"))


_NOT_BACKGROUND = (
    "Response '{}' was not created with background=true: only background responses can be streamed from "
    "GET; its events went to the request that created it."
)
