"""Runs: the one registry of this process's runs (docs/architecture.md#the-runs-life).

It holds the runs being driven, by id (a run enters when its drive starts and leaves when it ends:
``ResponseRun.drive``), and the background ones (``background.py``) while they run and for their
grace period after, within the budgets of :class:`~.background.BackgroundLimits`. With a Redis store
(``--store redis://…``) it mirrors its background runs to every other process through the relay
(``relay.py``), and reads theirs. ``GET``, ``DELETE`` and ``cancel`` of a response (the service's
``retrieve``, ``replay``, ``delete`` and ``cancel``) are answered here, one method each, from the run
here, the relay or the store, in that order; nothing else keeps a run by id.

Runs are kept by key, their tenant's scope and their id (``ResponseRun.key``), and the relay's keys are
those keys: each method here answers as the tenant it is given, so another tenant's id reads as unknown,
here, in the relay and in the store alike (docs/tenants.md#isolation).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import Any

import orjson

from ..core import InvalidRequestError, NotFoundError, TooManyRequestsError, to_json
from ..ops import ServerMetrics, trim_heap
from ..store import RedisStore, ResponseStore, scoped
from ..tenants import OPEN, Tenant
from .background import BackgroundLimits, BackgroundRun, Framing
from .relay import RedisRelay, running
from .run import ResponseRun
from .unstored import Unstored

__all__ = ["Runs"]

logger = logging.getLogger(__name__)

#: How long a cancel waits for the run it cancelled to end (its generation aborted, its result stored).
CANCEL_WAIT_SECONDS = 30.0


class Runs:
    """This process's runs: the live ones by id, and the background ones kept for their grace period.

    ``framing`` (the transport's, injected) is how background runs record their events; without it a
    background run cannot start (a service made without a transport, as in tests of the service).
    """

    def __init__(
        self,
        store: ResponseStore,
        metrics: ServerMetrics,
        *,
        limits: BackgroundLimits,
        framing: Framing | None,
    ) -> None:
        self.store, self.metrics, self.framing = store, metrics, framing
        self.limits = limits
        #: With a shared Redis store: other processes' background responses, and ours for them.
        self.relay = (
            RedisRelay(store, framing, limits.max_events, limits.grace)
            if isinstance(store, RedisStore) and framing is not None
            else None
        )
        self._live: dict[str, ResponseRun] = {}
        #: Background runs whose events are kept, by id (running, or ended within their grace period).
        self.kept: dict[str, BackgroundRun] = {}
        #: The runs of ``kept`` that ended, oldest-ended first (the order they are forgotten in).
        self._finished: dict[str, BackgroundRun] = {}
        #: Other runs' failed responses whose store write failed, answered to GET for their grace period.
        self.unstored = Unstored(limits)
        self._tasks: set[asyncio.Task[bytes]] = set()
        self._publishers: set[asyncio.Task[None]] = set()
        self.recorded_bytes = 0  # frames of every kept run
        self._trim_due = False  # runs were forgotten or sealed: their memory can go back to the system

    # -- live runs ---------------------------------------------------------------------------------

    def enter(self, run: ResponseRun) -> None:
        """``run``'s drive started (called by the run alone)."""
        self._live[run.key] = run

    def leave(self, run: ResponseRun) -> None:
        """``run``'s drive ended (called by the run alone). If its store write failed, its failed response is
        kept for GET (a background run's is kept with its events); with a relay, until Redis holds it for
        every process (one copy, which a DELETE anywhere forgets)."""
        if self._live.get(run.key) is run:
            del self._live[run.key]
        final = run.final_json
        if run.store_failed and final is not None and run.key not in self.kept:
            self.unstored.keep(run.key, final)
            if self.relay is not None:
                self._spawn(self._copy_final(self.relay, run.key, final))

    async def _copy_final(self, relay: RedisRelay, key: str, final: bytes) -> None:
        if await relay.publish_final(key, final):
            self.unstored.forget(key)

    def _spawn(self, copy: Coroutine[Any, Any, None]) -> None:
        """Run a copy to Redis in a task of its own, held until it ends."""
        publisher = asyncio.ensure_future(copy)
        self._publishers.add(publisher)
        publisher.add_done_callback(self._publishers.discard)

    @property
    def live(self) -> Mapping[str, ResponseRun]:
        """The runs being driven in this process, by key (foreground and background)."""
        return self._live

    def find(self, response_id: str, tenant: Tenant = OPEN) -> ResponseRun | None:
        """``tenant``'s run of ``response_id`` if it is being driven in this process."""
        return self._live.get(tenant.scope + response_id)

    def abort_all(self) -> int:
        """Abort every run being driven and every background run not ended yet (each ends ``failed`` with a
        terminal event); how many were being driven."""
        live = list(self._live.values())
        for run in live:
            run.abort()  # counted in trtllm_executor_aborts_total by the run, for each generation it aborts
        for kept in self.kept.values():
            if not kept.done:
                kept.run.abort()
        return len(live)

    # -- background runs ---------------------------------------------------------------------------

    def get(self, response_id: str, tenant: Tenant = OPEN) -> BackgroundRun | None:
        """``tenant``'s background run of ``response_id`` while its events are kept."""
        return self.kept.get(tenant.scope + response_id)

    @property
    def active(self) -> int:
        """Background responses still generating."""
        return sum(1 for run in self.kept.values() if not run.done)

    async def start(self, run: ResponseRun) -> BackgroundRun:
        """Drive ``run`` in a task of its own, recording its events; return at once, its events kept.

        With a shared store every process can see it once this returns. TooManyRequestsError (429) if
        ``max_running`` background responses are generating already.
        """
        if self.framing is None:
            raise RuntimeError("background runs need the transport's framing (Runs(framing=…))")
        if self.active >= self.limits.max_running:
            raise TooManyRequestsError(
                f"This server is generating {self.limits.max_running} background responses, its limit; retry "
                "when some have finished.",
                param="background",
                code="too_many_background_responses",
            )
        if self.relay is not None:
            await self.relay.announce(run.prepared)  # 503 if Redis is down: nothing has started yet
        self._reap()
        recorded = BackgroundRun(run, self.limits, self.framing, account=self._account)
        self.kept[recorded.key] = recorded
        self.metrics.active_background.inc()
        run.subscribe(recorded.record)
        task = recorded.task = asyncio.ensure_future(run.drive(run.publish))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda task: self._ended(recorded, task))
        if self.relay is not None:
            self._spawn(self.relay.publish(recorded))
        return recorded

    def _ended(self, recorded: BackgroundRun, task: asyncio.Task[bytes]) -> None:
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or error is not None:
            logger.error(
                "Background response %s stopped without a terminal event", recorded.id, exc_info=error
            )
        recorded.finish()
        self._trim_due = True  # its last chunk shrank
        self.metrics.active_background.dec()
        if self.kept.get(recorded.key) is recorded:
            self._finished[recorded.key] = recorded

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
                self.forget(old)
        while self.recorded_bytes > budget and len(run.frames) > 1:
            self.recorded_bytes -= run.drop_oldest()

    def forget(self, run: BackgroundRun) -> None:
        """Drop a background run's kept events (its grace is over, its budget needed, or it was deleted)."""
        self._trim_due = True
        if self.kept.get(run.key) is run:
            del self.kept[run.key]
            self.recorded_bytes -= run.nbytes
        if self._finished.get(run.key) is run:
            del self._finished[run.key]

    def _reap(self) -> None:
        """Forget runs whose grace period is over."""
        now = time.monotonic()
        for run in list(self._finished.values()):  # oldest-ended first: stop at the first still in grace
            if run.ended_at is not None and now - run.ended_at <= self.limits.grace:
                break
            self.forget(run)
        for run in list(self._finished.values())[: max(0, len(self._finished) - self.limits.max_finished)]:
            self.forget(run)

    async def tend(self, interval: float = 5.0) -> None:
        """Run until cancelled: drop expired runs even when no new background response starts, and give
        the memory of forgotten runs back to the system (``ops/heap.py``), at most once an interval; with a
        relay, cancel the local runs any process asked to cancel."""
        cancels = (
            asyncio.ensure_future(self.relay.listen_for_cancels(self._cancel_here)) if self.relay else None
        )
        try:
            await self._reap_forever(interval)
        finally:
            if cancels is not None:
                cancels.cancel()

    async def _reap_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self._reap()
            if self._trim_due:
                self._trim_due = False
                await asyncio.to_thread(trim_heap)

    async def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the running background responses to end."""
        tasks = [run.task for run in self.kept.values() if run.task is not None and not run.done]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    # -- by id: what GET, DELETE and cancel answer -------------------------------------------------

    async def retrieve(self, response_id: str, tenant: Tenant = OPEN) -> bytes:
        """A response's JSON: ``queued`` until its generation starts, then its live snapshot while it is
        generated here, else the stored one (or, with a relay, another process's snapshot of it)."""
        key = tenant.scope + response_id
        kept = self.kept.get(key)
        if kept is not None and kept.run.stream is None and not kept.done:
            return kept.snapshot()  # queued
        if kept is not None and kept.final is not None and kept.run.store_failed:
            return kept.final  # failed, saying it could not be stored: never a silent 404
        unstored = self.unstored.get(key)
        if unstored is not None:
            return unstored  # likewise
        live = self._live.get(key)
        shown = live.snapshot() if live is not None else None
        if shown is not None:
            return to_json(shown)
        entry = await scoped(self.store, tenant.scope).get(response_id)
        if entry is not None:
            return entry.response_json
        if kept is None and self.relay is not None:  # running in another process, not stored yet
            snapshot = await self.relay.snapshot(key)
            if snapshot is not None:
                return snapshot
        raise NotFoundError(f"Response with id '{response_id}' not found.")

    async def replay(
        self, response_id: str, starting_after: int | None, tenant: Tenant = OPEN
    ) -> AsyncIterator[bytes]:
        """A background response's frames after ``starting_after``, live until its end; 400/404 (checked
        here, before any byte is sent) when there are none to give."""
        key = tenant.scope + response_id
        kept = self.kept.get(key)
        if kept is not None:
            return kept.follow(starting_after)
        if self.relay is not None and (
            await self.relay.has_events(key) or _is_background(await self.relay.snapshot(key))
        ):
            first = await self.relay.first_sequence(key)
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
            return self.relay.follow(key, starting_after)
        live = self._live.get(key)
        if live is not None and not live.prepared.request.background:
            raise InvalidRequestError(_NOT_BACKGROUND.format(response_id), param="stream")
        if not _is_background(await self.retrieve(response_id, tenant)):  # NotFoundError if unknown
            raise InvalidRequestError(_NOT_BACKGROUND.format(response_id), param="stream")
        raise EventsNotKeptError(
            f"The events of background response '{response_id}' are no longer kept; retrieve it without "
            "stream=true.",
            param="stream",
        )

    async def cancel(self, response_id: str, tenant: Tenant = OPEN) -> bytes:
        """Cancel a background response, here or in the process running it; return it (status
        ``cancelled``, or as it ended). 400 for a response that is not a background one."""
        key = tenant.scope + response_id
        kept = self.kept.get(key)
        if kept is None and self.relay is not None:
            body = await self.relay.request_cancel(key)
            if body is not None:
                return body
        if kept is not None and not kept.done:
            assert kept.task is not None
            kept.run.cancel()  # an event the run reacts to at once, queued or generating
            await asyncio.wait({kept.task}, timeout=CANCEL_WAIT_SECONDS)
        body = await self.retrieve(response_id, tenant)
        if kept is None and not _is_background(body):
            raise InvalidRequestError(
                f"Response '{response_id}' is not a background response; only background responses can be "
                "cancelled.",
                param="response_id",
            )
        return body

    async def _cancel_here(self, key: str) -> None:
        """Cancel the run of ``key`` if this process runs it (another process asked, through the relay)."""
        kept = self.kept.get(key)
        if kept is not None:
            await self.cancel(kept.id, kept.run.prepared.owner)

    async def delete(self, response_id: str, tenant: Tenant = OPEN) -> bytes:
        """``DELETE``: forget a response. A running background response is cancelled first (its
        generation aborted, here or in the process running it) and then forgotten everywhere: its
        events, its snapshot and the response it stored as it ended. Any other response: the store's."""
        key, store = tenant.scope + response_id, scoped(self.store, tenant.scope)
        kept = self.kept.get(key)
        snapshot = await self.relay.snapshot(key) if kept is None and self.relay is not None else None
        running_elsewhere = running(snapshot)
        if kept is None and not running_elsewhere:
            stored = await store.delete(response_id)
            if not (self.unstored.forget(key) or snapshot is not None or stored):
                raise NotFoundError(f"Response with id '{response_id}' not found.")
        else:
            await self.cancel(
                response_id, tenant
            )  # returns once it ended and was stored (or its write failed)
            if kept is not None:
                self.forget(kept)
        if self.relay is not None:
            await self.relay.forget(key)  # a background response's replayable events
        if kept is not None or running_elsewhere:
            await store.delete(response_id)
        return orjson.dumps({"id": response_id, "object": "response.deleted", "deleted": True})


class EventsNotKeptError(InvalidRequestError):
    """A background response's events are not kept in this process (400): their grace is over, or another
    process ran it; in a group of frontends the one that ran it may keep them (``not_held_here``)."""

    not_held_here = True


def _is_background(body: bytes | None) -> bool:
    return body is not None and bool(orjson.loads(body).get("background"))


_NOT_BACKGROUND = (
    "Response '{}' was not created with background=true: only background responses can be streamed from "
    "GET; its events went to the request that created it."
)
