"""ResponseRun: the one handle on a response in progress (docs/architecture.md#the-runs-life).

The service creates it (``ResponsesService.run``) from an immutable
:class:`~.prepared.PreparedResponse` and owns it while it runs; transports hold the handle and
nothing else. A run is driven once (``drive``, in the caller's task: the per-token path has no
task hop), or in a task of the service's (``ResponsesService.start_background``), whose events go
to the run's subscribers. It is found by id (``ResponsesService.find``) while it runs, and it can be

- cancelled (``cancel``: a client asked; it ends ``cancelled``) or aborted (``abort``: the server
  ends it; it ends ``failed``): an event the run reacts to at once, never a loop that polls;
- stopped at the next Harmony message boundary (``stop_at_boundary(reason)``: WebSocket steering);
- awaited (``wait``: its terminal response's JSON) and observed (``subscribe``, ``stream``,
  ``usage``, ``first_token_at``).

Its live state is private and read through properties: its life (``state``, ``final_json``) is written
by the run itself, its generation's (the stream, the executor request it generates now, the tool loop,
usage) by its own driver (``generation.RunDriver``), which it alone holds and calls. While it is driven
it is in its service's registry (``runs.py``), entered and left by the run itself.
"""

from __future__ import annotations

import asyncio
import enum
import operator
from collections.abc import Callable
from typing import Any, Generic, NoReturn, Protocol, TypeVar, overload

from openai.types.responses import Response, ResponseStreamEvent, ResponseUsage

from ..core import InvalidRequestError, exact_bytes
from ..ops import trace_attrs, tracing
from ..stream import ResponseStream
from .gate import Admission
from .generation import Generator, RunDriver
from .prepared import Deliver, PreparedResponse
from .spans import response_attributes, usage_attributes

__all__ = ["Registry", "ResponseRun", "RunState"]

T = TypeVar("T")


class Registry(Protocol):
    """Where a run is found while it is driven (``runs.Runs``): the run enters and leaves it itself."""

    def enter(self, run: ResponseRun) -> None:
        """``run``'s drive started."""
        ...

    def leave(self, run: ResponseRun) -> None:
        """``run``'s drive ended."""
        ...


class _ReadOnly(Generic[T]):
    """A read-only view of a run's private field (``path``, dotted: ``_driver.stream``): reading it is an
    attribute lookup; assigning it raises AttributeError (and is a type error)."""

    __slots__ = ("_get", "_name")

    def __init__(self, path: str) -> None:
        self._get = operator.attrgetter(path)
        self._name = path

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, run: None, owner: type[Any]) -> _ReadOnly[T]: ...
    @overload
    def __get__(self, run: object, owner: type[Any]) -> T: ...
    def __get__(self, run: object, owner: type[Any]) -> T | _ReadOnly[T]:
        return self if run is None else self._get(run)  # type: ignore[no-any-return]

    def __set__(self, run: object, value: NoReturn) -> None:
        raise AttributeError(f"a run's {self._name} is read-only: the run and its driver write it")


class RunState(enum.Enum):
    """Where a run is in its life: created, being driven, or ended (its terminal response made)."""

    QUEUED = "queued"
    RUNNING = "running"
    ENDED = "ended"


class ResponseRun:
    """One response in progress: its prepared request (immutable) and its live state."""

    def __init__(
        self,
        prepared: PreparedResponse,
        generator: Generator,
        registry: Registry | None = None,
        on_abort: Callable[[], None] | None = None,
        admission: Admission | None = None,
    ) -> None:
        """``generator``: what its driver generates with (the service's); ``registry``: where it is found
        while driven. ``on_abort`` is called each time the run aborts a request in the executor (a cancel,
        a stop string, the server's abort: ``trtllm_executor_aborts_total``). ``admission``: its turn's place
        (``gate.py``): a background run waits for its slot when its drive starts; it is given back at the end."""
        self._prepared = prepared
        self._id = prepared.generation.request_id
        self._key = prepared.owner.scope + self._id
        self._state = RunState.QUEUED
        self._final_json: bytes | None = None
        self._driver = RunDriver(generator)  # its generation's state; called by this run alone
        self._registry = registry
        self._executor = generator.executor
        self._on_abort = on_abort
        self._aborted: set[str] = set()
        self._cancelled = False  # a client cancelled it: it ends "cancelled"
        self._interrupted = False  # cancelled or aborted: no further generation or tool call starts
        self._stop_reason: str | None = None
        self._ended = asyncio.Event()
        self._subscribers: list[Deliver] = []
        self._admission = admission
        if admission is not None:
            admission.hold()

    # -- what it is: read-only views of its private state ----------------------------------------

    #: Its prepared request (immutable), and the response's id (also its first executor request's).
    prepared = _ReadOnly[PreparedResponse]("_prepared")
    id = _ReadOnly[str]("_id")
    #: What the registry and the relay know it by: its tenant's scope and its id (docs/tenants.md#isolation).
    key = _ReadOnly[str]("_key")
    #: Queued, running or ended.
    state = _ReadOnly[RunState]("_state")
    #: The terminal response's JSON, once ended: an allocation of its own length (``exact_bytes``), as
    #: it is kept as long as the run is (a background response's, for its grace period), and orjson's
    #: output holds up to 8 times its length (a 100k-token answer's 0.6 MB held 7.9 MB).
    final_json = _ReadOnly[bytes | None]("_final_json")
    #: Its stream state machine once driven (GET of an in-progress response reads its snapshot).
    stream = _ReadOnly[ResponseStream | None]("_driver.stream")
    #: Its final usage, and when the executor's first delta came (perf_counter), once ended (access log).
    usage = _ReadOnly[ResponseUsage | None]("_driver.usage")
    first_token_at = _ReadOnly[float | None]("_driver.first_token_at")
    #: It could not be stored: it ended failed, saying so, and is nowhere else.
    store_failed = _ReadOnly[bool]("_driver.store_failed")
    #: Its end is final (stored, or its store write failed): until then GET shows it in progress.
    settled = _ReadOnly[bool]("_driver.settled")

    def snapshot(self) -> Response | None:
        """What GET shows of it while it runs (None before its generation starts): its stream's snapshot,
        ``in_progress`` until its end is settled (a store write under way may still turn it ``failed``)."""
        stream = self._driver.stream
        return stream.snapshot(settled=self._driver.settled) if stream is not None else None

    # -- driving ----------------------------------------------------------------------------------

    async def drive(self, deliver: Deliver | None = None) -> bytes:
        """Generate the response to its end in this task; the terminal response's JSON.

        ``deliver`` receives each engine step's events (streaming); without it the events only
        build the response (non-streaming: the same path). Cancelling the calling task (the client
        went away) aborts the generation. A run is driven once.
        """
        if self._state is not RunState.QUEUED:
            raise RuntimeError(f"response {self.id} is already {self._state.value}")
        if not tracing.enabled():
            return await self._drive(deliver)
        # One span for the run (a background one's continues the trace of the request that started it: its
        # task inherited that context), parent of its generations and of its tool calls.
        prepared = self._prepared
        with tracing.span(
            "response", response_attributes(prepared, bool(prepared.request.background))
        ) as live:
            final = await self._drive(deliver)
            usage = self.usage
            if usage is not None and live.is_recording():
                live.set_attributes(usage_attributes(usage))
            stream = self.stream
            if stream is not None and stream.final_response is not None:
                live.set_attribute(trace_attrs.RESPONSE_STATUS, stream.final_response.status or "")
            return final

    async def _drive(self, deliver: Deliver | None) -> bytes:
        admission = self._admission
        if admission is not None:
            try:
                await admission.turn()  # a background run waits here, queued, for a slot of the engine
            except BaseException:  # the server ends it while it waits: it ends without a response
                admission.release(None)
                self._state = RunState.ENDED
                self._ended.set()
                raise
        self._state = RunState.RUNNING
        registry = self._registry
        if registry is not None:
            registry.enter(self)
        try:
            self._final_json = exact_bytes(await self._driver.drive(self, deliver))
            return self._final_json
        finally:
            if admission is not None:
                admission.release(self.usage)
            if registry is not None:
                registry.leave(self)
            self._state = RunState.ENDED
            # No event comes after the end. A subscriber (a background recorder) holds this run, so
            # keeping it here made a cycle: a forgotten run's memory waited for a full collection.
            self._subscribers.clear()
            self._ended.set()

    def abandon(self) -> None:
        """It will never be driven (its background start was refused): its turn is given back."""
        if self._state is RunState.QUEUED and self._admission is not None:
            self._admission.release(None)
            self._admission = None

    def subscribe(self, deliver: Deliver) -> None:
        """Receive this run's events when the service drives it in the background (``publish``)."""
        self._subscribers.append(deliver)

    async def publish(self, events: list[ResponseStreamEvent]) -> None:
        """The ``deliver`` of a background drive: every subscriber gets each step's events."""
        for deliver in self._subscribers:
            await deliver(events)

    # -- control ----------------------------------------------------------------------------------

    def inject(self, items: Any) -> None:
        """Commit client tool outputs to the sub-agents of this response waiting on them (WebSocket
        ``response.inject``), all or none. Raises InvalidRequestError naming what cannot be committed."""
        team = self.prepared.team
        if team is None:
            raise InvalidRequestError(
                "This response has no sub-agents (it was not created with multi_agent enabled and the "
                "openai-beta: responses_multi_agent=v1 header).",
                param="response_id",
            )
        team.inject(items)

    def cancel(self) -> None:
        """A client cancelled it: stop its generation or tool call now; it ends ``cancelled``."""
        self._cancelled = True
        self._interrupt()

    def abort(self) -> None:
        """The server ends it (shutdown, a sibling choice failed): it ends ``failed``."""
        self._interrupt()

    def stop_at_boundary(self, reason: str) -> None:
        """End the response at the next Harmony message boundary, ``incomplete`` with ``reason``."""
        self._stop_reason = reason

    def stop_reason(self) -> str | None:
        """Asked by the stream at each message boundary (never per token)."""
        return self._stop_reason

    @property
    def cancelled(self) -> bool:
        """A client cancelled it (its end is ``cancelled``, not ``failed``)."""
        return self._cancelled

    @property
    def interrupted(self) -> bool:
        """Cancelled or aborted: no further generation or tool call may start."""
        return self._interrupted

    def started(self, request_id: str) -> None:
        """The executor has ``request_id`` now (its first delta came). An interrupt that came before it
        registered the request reached nothing: abort it now, once (an event the run raised, not a poll)."""
        if self._interrupted:
            self._abort_in_executor(request_id)

    def _interrupt(self) -> None:
        if self._state is RunState.ENDED:
            return
        self._interrupted = True
        if self._admission is not None:
            self._admission.withdraw()  # still queued: its drive goes on now and ends at once
        self._driver.interrupt(self._abort_in_executor)

    def _abort_in_executor(self, request_id: str) -> None:
        self._executor.abort(request_id)
        if self._on_abort is not None and request_id not in self._aborted:  # counted once per request
            self._aborted.add(request_id)
            self._on_abort()

    # -- observing --------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """It ended (its terminal response made, or its drive stopped without one)."""
        return self._state is RunState.ENDED

    async def wait(self) -> bytes | None:
        """Wait for the end; the terminal response's JSON (None if the drive stopped without one)."""
        await self._ended.wait()
        return self._final_json
