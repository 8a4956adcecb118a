"""A background response's recorded events: a run kept and replayable after it ends.

``ResponsesService.start_background`` drives the run in a task of the service's and subscribes a
:class:`BackgroundRun`, which keeps each event's frame (the transport's framing, injected as a
:class:`Framing`: nothing here writes a wire format), so a background response is generated
exactly like any other (one drive), and any number of clients can read it, from any sequence
number, while it runs and for a grace period after it ended (the registry, ``runs.py``):

- ``GET /v1/responses/{id}`` polls (the run's live snapshot, then the stored response);
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
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from openai.types.responses import ResponseStreamEvent

from ..core import InvalidRequestError, to_json
from .frame_log import FrameLog
from .run import ResponseRun

__all__ = ["BackgroundLimits", "BackgroundRun", "Framing"]


class Framing(Protocol):
    """How a kept run's events become the bytes a transport replays (SSE: ``server/sse.py``), and what
    the relay (``relay.py``) must know of those bytes. Injected, so that this layer writes no wire format."""

    def obfuscated(self, stream_options: dict[str, Any] | None) -> bool:
        """Whether a run asking ``stream_options`` gets its delta frames obfuscated."""
        ...

    def frame(self, event: ResponseStreamEvent, obfuscated: bool) -> bytes:
        """The frame of one event."""
        ...

    def is_terminal(self, frame: bytes) -> bool:
        """Whether ``frame`` (one or several frames joined) starts with a terminal event's."""
        ...

    def failed(self, response: dict[str, Any], sequence_number: int) -> bytes:
        """A ``response.failed`` frame carrying ``response`` (a follower that lost the relay's stream)."""
        ...


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
    #: The failed final responses of other runs whose store write failed, kept for ``grace`` seconds to answer
    #: GET (``unstored.py``; at most ``max_finished`` of them): their JSON together, the oldest going first.
    max_unstored_bytes: int = 64 << 20


@dataclass(eq=False)
class BackgroundRun:
    """One background response's recorded frames (a subscriber of its run), and whether it has ended."""

    run: ResponseRun
    limits: BackgroundLimits
    framing: Framing
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
        self.obfuscated = self.framing.obfuscated(self.run.prepared.request.stream_options)

    @property
    def id(self) -> str:
        """The response's id."""
        return self.run.id

    @property
    def key(self) -> str:
        """What the registry and the relay know it by: its tenant's scope and its id (``ResponseRun.key``)."""
        return self.run.key

    @property
    def final(self) -> bytes | None:
        """The final response's JSON once it ended (retrieved from here while the store cannot give it)."""
        return self.run.final_json

    def snapshot(self) -> bytes:
        """The response as it is now: ``queued`` until its generation starts, then its stream's snapshot."""
        snapshot = self.run.snapshot()
        if snapshot is None:
            return to_json(self.run.prepared.response.model_copy(update={"status": "queued"}))
        return to_json(snapshot)

    @property
    def next_sequence(self) -> int:
        """The sequence number the next recorded frame gets."""
        return self.first_sequence + len(self.frames)

    async def record(self, events: list[ResponseStreamEvent]) -> None:
        """The ``deliver`` of a background drive: keep each event's frame, wake the followers."""
        before = self.nbytes
        frames = self.frames
        frame, obfuscated = self.framing.frame, self.obfuscated
        for event in events:
            frames.append(frame(event, obfuscated))
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
        """The run ended: its frames are sealed and counted with its final response; followers wake."""
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
