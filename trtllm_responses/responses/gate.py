"""The gate every turn passes before it runs: its tenant's limits, then its place in a full engine.

One place for the four transports (``POST /v1/responses``, chat completions, messages, the WebSocket):
after ``prepare`` (its prompt's tokens known) and before anything of its answer is written,
``ResponsesService.admit`` counts the turn against its tenant's limits (``tenants/limits.py``: a 429
counting nothing) and takes a slot of the engine (``tenants/admission.py``), waiting for one when all are
taken: a foreground turn waits there (a streamed one has sent nothing yet: a refusal is a plain 429), a
background one answers ``queued`` at once and waits in its run (``ResponseRun.drive``). The run gives its
slot, its lease and its output tokens back when it ends (:meth:`Admission.release`). A turn that stores, of
a tenant with ``max_stored_bytes``, is first refused (:class:`StorageQuotaExceeded`) while the tenant's stored
bytes are at or over it (one small store read; none for any other tenant or turn).
docs/tenants.md#limits, docs/tenants.md#fair-share.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from openai.types.responses import ResponseUsage

from ..core import APIError, TooManyRequestsError
from ..ops import ServerMetrics, trace_attrs, tracing
from ..request import ResponsesRequest, service_tier
from ..store import ResponseStore
from ..tenants import (
    WINDOW_SECONDS,
    EngineFull,
    FairShare,
    Quota,
    RateLimiter,
    RateLimitError,
    Tenant,
    Ticket,
    limited,
)

__all__ = ["Admission", "AdmissionLimits", "Gate", "StorageQuotaExceeded", "capped_tier"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """How full a frontend's engine gets and how long a turn waits (docs/tenants.md#fair-share)."""

    #: Turns this frontend runs at once (``--max_running_responses``); 0: no bound, no queue.
    max_running: int = 0
    #: Turns that may wait for a slot (``--max_waiting_responses``); one more is a 429.
    max_waiting: int = 256
    #: Seconds a foreground turn waits for a slot (``--max_wait_seconds``), then a 429.
    max_wait: float = 30.0
    #: A rate window's seconds (``--rate_window_seconds``): the ``*_per_minute`` limits count per window.
    window: float = WINDOW_SECONDS


class StorageQuotaExceeded(TooManyRequestsError):
    """A tenant's stored bytes are at its ``max_stored_bytes``: OpenAI's 429 ``insufficient_quota``, with
    ``x-should-retry: false`` (the SDKs do not retry: waiting frees no bytes)."""

    error_type = "insufficient_quota"
    default_code = "insufficient_quota"
    headers = {"x-should-retry": "false"}


def capped_tier(request: ResponsesRequest, tenant: Tenant) -> ResponsesRequest:
    """``request`` served in at most its tenant's tier (``Tenant.priority``): its ``service_tier`` lowered when
    it asks for more (so the engine's priority and the answer's ``service_tier`` say the tier it gets)."""
    served = service_tier(request.service_tier)[0]
    capped = tenant.tier(served)
    if capped == served:
        return request
    return request.model_copy(update={"service_tier": capped})


class Gate:
    """Limits and fair share of this frontend: ``admit`` a turn, get an :class:`Admission` back."""

    def __init__(self, store: ResponseStore, metrics: ServerMetrics, limits: AdmissionLimits) -> None:
        self.limits = limits
        self.metrics = metrics
        self.share = FairShare(limits.max_running, limits.max_waiting)
        self._store = store
        self._limiter: RateLimiter | None = None
        self._waiters: dict[Ticket, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def limiter(self) -> RateLimiter:
        """The rate limiter over the store's counters (made at the first limited turn)."""
        if self._limiter is None:
            self._limiter = RateLimiter(self._store.counters(), self.limits.window)
        return self._limiter

    async def quota(self, tenant: Tenant) -> Quota | None:
        """What a limited ``tenant`` has left (None: it has no rate limit)."""
        if not limited(tenant.limits):
            return None
        return await self.limiter.quota(tenant)

    async def admit(
        self,
        tenant: Tenant,
        member: str,
        tier: str,
        input_tokens: int,
        *,
        background: bool,
        stores: bool = False,
    ) -> Admission:
        """Let one turn of ``tenant`` in (``member``: its response id; ``stores``: it will store its response):
        its limits counted, its place in the engine's queue taken (it may still have to wait:
        ``Admission.turn``). RateLimitError (429) if a limit is crossed or the queue is full;
        StorageQuotaExceeded (429) if it stores and its tenant's stored bytes are at their limit."""
        admission = Admission(self, tenant, member, background)
        try:
            if stores and tenant.limits.max_stored_bytes is not None:
                await self._check_stored(tenant, tenant.limits.max_stored_bytes)
            if self.share.capacity > 0:  # a full queue refuses before anything is counted
                admission.queue(Ticket(tenant.name, tenant.weight, tier))
            if limited(tenant.limits):
                admission.counted(await self.limiter.admit(tenant, input_tokens, member))
        except BaseException as error:
            if isinstance(error, RateLimitError):
                self.metrics.tenants.refusal(tenant.name, error.error_type)
            admission.refused(error)
            admission.close()
            raise
        self.metrics.tenants.request(tenant.name)
        if not admission.waiting:
            admission.admitted(0.0)
        return admission

    async def _check_stored(self, tenant: Tenant, limit: int) -> None:
        """StorageQuotaExceeded if ``tenant``'s stored bytes are at or over ``limit`` (nothing counted yet)."""
        stored = await self._store.scope_bytes(tenant.scope, limit)
        if stored >= limit:
            self.metrics.tenants.refusal(tenant.name, StorageQuotaExceeded.error_type)
            raise StorageQuotaExceeded(
                f"Tenant {tenant.name!r} stores {stored} bytes of responses, at its limit of {limit} "
                "stored bytes: delete responses (DELETE /v1/responses/{id}) or ask the operator to raise "
                "max_stored_bytes, or send store: false."
            )

    def enqueue(self, ticket: Ticket) -> None:
        """Take ``ticket``'s place in the fair share; a waiter for it when it has no slot yet."""
        if not self.share.arrive(ticket):
            self._waiters[ticket] = asyncio.get_running_loop().create_future()

    def waiter(self, ticket: Ticket) -> asyncio.Future[None] | None:
        """What ``ticket`` waits on (None: it holds a slot, or has left)."""
        return self._waiters.get(ticket)

    def leave(self, ticket: Ticket) -> None:
        """``ticket`` gives its place or slot up; the tickets that get a slot by it go on."""
        self._waiters.pop(ticket, None)
        self.wake(self.share.leave(ticket))

    def wake(self, tickets: list[Ticket]) -> None:
        """``tickets`` hold a slot now: their waiters go on."""
        for ticket in tickets:
            future = self._waiters.pop(ticket, None)
            if future is not None and not future.done():
                future.set_result(None)

    def spawn(self, work: object) -> None:
        """Run a counting coroutine without waiting for it (a run's end must not wait on the store)."""
        task = asyncio.ensure_future(work)  # type: ignore[call-overload]
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("a tenant's counts were not updated: %r", task.exception())


class Admission:
    """One turn let in: its quota (the rate-limit headers), its slot, its concurrency lease; held by the runs
    that answer it (chat's ``n`` choices: ``n``), given back when the last ends (or the transport gives up)."""

    def __init__(self, gate: Gate, tenant: Tenant, member: str, background: bool) -> None:
        self.gate = gate
        #: A background turn: it waits for its slot in its run, as long as it takes.
        self.background = background
        self.tenant = tenant
        self.member = member
        #: What its tenant had left when it was let in (None: no rate limit).
        self.quota: Quota | None = None
        self._ticket: Ticket | None = None
        self._holders = 0
        self._output = 0
        self._usage: ResponseUsage | None = None
        self._closed = False
        self._renewal: asyncio.TimerHandle | None = None
        #: Its ``queue`` span (docs/tracing-and-dashboards.md#spans): from its arrival to its slot, or refusal.
        self._span = tracing.start_span("queue")

    def admitted(self, waited: float, outcome: str = "admitted") -> None:
        """It has its slot after ``waited`` seconds (or will never have one: ``outcome``): its span ends."""
        live, self._span = self._span, tracing.NULL_SPAN
        if live.is_recording():
            live.set_attributes({trace_attrs.QUEUE_WAIT_S: waited, trace_attrs.QUEUE_OUTCOME: outcome})
            if self.background:
                live.set_attribute(trace_attrs.BACKGROUND, True)
        live.end()

    def refused(self, error: BaseException, outcome: str = "refused", waited: float = 0.0) -> None:
        """It was not let in (a 429: ``outcome``; its client gone: cancelled): its span ends, failed with
        the error's type when an error refused it."""
        if isinstance(error, APIError):
            tracing.fail(self._span, error.message, error_type=error.error_type)
            self.admitted(waited, outcome)
        else:
            self.admitted(waited, "cancelled")

    def counted(self, quota: Quota) -> None:
        """Its tenant's limits counted it (``quota``: what is left); its concurrency lease is renewed while
        it is held."""
        self.quota = quota
        if self.tenant.limits.max_concurrent_responses is not None:
            self._renew_later()

    @property
    def waiting(self) -> bool:
        """It waits for a slot of the engine (``turn`` returns when it has one)."""
        return self._ticket is not None and self.gate.waiter(self._ticket) is not None

    def queue(self, ticket: Ticket) -> None:
        """Ask for a slot of the engine (EngineFull if the queue is full)."""
        self.gate.enqueue(ticket)
        self._ticket = ticket

    async def turn(self) -> None:
        """Wait for its slot (at once if it has one); a background turn waits as long as it takes, a
        foreground one ``max_wait`` seconds (then EngineFull, its place given up). A caller cancelled
        while it waits gives its place up."""
        ticket = self._ticket
        future = self.gate.waiter(ticket) if ticket is not None else None
        if future is None:
            return
        started = time.perf_counter()
        limit = None if self.background else self.gate.limits.max_wait
        try:
            await asyncio.wait_for(asyncio.shield(future), limit)
        except asyncio.TimeoutError:
            full = EngineFull(f"The engine stayed full for {limit:g} s; retry later.")
            self.refused(full, "timeout", time.perf_counter() - started)
            self.close()
            self.gate.metrics.tenants.refusal(self.tenant.name, "requests")
            raise full from None
        except BaseException as error:
            self.refused(error, waited=time.perf_counter() - started)
            self.close()
            raise
        else:
            self.admitted(time.perf_counter() - started)
        finally:
            self.gate.metrics.tenants.queued(self.tenant.name, time.perf_counter() - started)

    def withdraw(self) -> None:
        """Its run was cancelled while it waited: give the place up (its drive goes on and ends at once)."""
        ticket = self._ticket
        if ticket is not None and not ticket.running:
            self.gate.wake([ticket])
            self.gate.leave(ticket)

    def hold(self) -> None:
        """A run answering this turn holds it until :meth:`release`."""
        self._holders += 1

    def release(self, usage: ResponseUsage | None) -> None:
        """A run holding it ended with ``usage``; the last one gives everything back."""
        if usage is not None:
            self._output += usage.output_tokens
            self._usage = self._usage or usage
        self._holders -= 1
        if self._holders <= 0:
            self.close()

    def close(self) -> None:
        """Give the slot, the lease and the output tokens back (once; idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._span is not tracing.NULL_SPAN:  # given back before it had its slot
            self.admitted(0.0, "cancelled")
        gate, tenant = self.gate, self.tenant
        if self._renewal is not None:
            self._renewal.cancel()
        if self._ticket is not None:
            gate.leave(self._ticket)
        if self._usage is not None:
            details = self._usage.input_tokens_details
            gate.metrics.tenants.used(
                tenant.name, self._usage.input_tokens, details.cached_tokens if details else 0, self._output
            )
        if self.quota is not None:
            gate.spawn(self._give_back(self._output))

    async def _give_back(self, output: int) -> None:
        limiter = self.gate.limiter
        await limiter.release(self.tenant, self.member)
        await limiter.spent(self.tenant, output)

    def _renew_later(self) -> None:
        lease = self.gate.limiter.lease
        self._renewal = asyncio.get_running_loop().call_later(lease / 3, self._renew)

    def _renew(self) -> None:
        if not self._closed:
            self.gate.spawn(self.gate.limiter.renew(self.tenant, self.member))
            self._renew_later()
