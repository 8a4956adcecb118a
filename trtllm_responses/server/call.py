"""Call: one request served by a route of the app's table (``router.py``), as its handler sees it.

A handler reads the request from it (the ASGI channel, the headers, the body under a
:class:`~.body.BodyLimit`), notes on its access record what it answered (``response_id``,
``session_id``) and names the generations that answer it (``runs``); once the answer is written,
the router puts their usage into the access record (:meth:`Call.account`), the same for every API.
A handler lets its turn in through :meth:`Call.admit` (its tenant's limits and the engine's fair share,
``responses/gate.py``): the call keeps what its tenant had left (:attr:`Call.quota`), which the router
writes as the rate-limit headers of the answer, and gives the turn back if no run took it.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from starlette.types import Receive, Scope, Send

from ..ops import AccessRecord, trace_attrs, tracing
from ..responses import Admission, PreparedResponse, ResponseRun, ResponsesService
from ..tenants import Quota, RateLimitError, Tenant
from .body import BodyLimit, read_body
from .operations import tenant_of
from .responses import unless_client_leaves

__all__ = ["Call"]

T = TypeVar("T")


class Call:
    """One request a route of the table serves: its ASGI scope and channel, its access record, and the
    runs that answer it (one per generation: a chat completion's ``n`` choices are ``n`` runs)."""

    __slots__ = ("scope", "receive", "send", "record", "runs", "admission", "quota", "streamed")

    def __init__(self, scope: Scope, receive: Receive, send: Send, record: AccessRecord) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.record = record
        #: The generations answering this request (set by the handler once it starts them).
        self.runs: Sequence[ResponseRun] = ()
        #: Its turn, once let in (:meth:`admit`), and what its tenant had left then (or when refused).
        self.admission: Admission | None = None
        self.quota: Quota | None = None
        #: How it is answered, once the handler knows: a stream (True) or one JSON object (False); None: it
        #: generates nothing (its span's ``trtllm.transport``, docs/tracing-and-dashboards.md#spans).
        self.streamed: bool | None = None

    @property
    def tenant(self) -> Tenant:
        """Who asked: the tenant the request's key names (set by the app before the route runs)."""
        return tenant_of(self.scope)

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        """The request's raw headers (lower-case names)."""
        return self.scope["headers"]  # type: ignore[no-any-return]

    async def body(self, limit: BodyLimit) -> bytes:
        """The request's body, read under ``limit`` (``body.read_body``), in the span ``request.read_body``."""
        with tracing.span("request.read_body") as live:
            body = await read_body(self.receive, self.scope["headers"], limit)
            live.set_attribute(trace_attrs.BYTES, len(body))
            return body

    async def unless_client_leaves(self, work: Coroutine[Any, Any, T]) -> T:
        """Await a non-streamed answer's ``work``, cancelled if the client hangs up first (``ClientGone``)."""
        return await unless_client_leaves(self.receive, work)

    async def admit(self, service: ResponsesService, prepared: PreparedResponse) -> Admission:
        """Let the prepared turn in (``ResponsesService.admit``), a foreground one once it has a slot of the
        engine: RateLimitError (429) if its tenant's limits or the engine's queue refuse it (or it waited
        ``--max_wait_seconds``); either way :attr:`quota` says what the tenant has left."""
        try:
            admission = self.admission = await service.admit(prepared, self.tenant)
            self.quota = admission.quota
            if admission.waiting and not admission.background:
                # a full engine: wait for a slot, nothing written yet; a client that leaves gives its place up
                await self.unless_client_leaves(admission.turn())
        except RateLimitError as error:
            self.quota = error.quota if self.quota is None else self.quota
            raise
        return admission

    def done(self) -> None:
        """The answer is written: a foreground turn's slot is given back if its runs have not (a run never
        driven); a background one's stays with its run."""
        admission = self.admission
        if admission is not None and not admission.background:
            admission.close()

    def account(self) -> None:
        """Put the runs' usage into the access record, once every one has ended with one: the prompt counted
        once, the output of every run summed, the first token the earliest."""
        runs = self.runs
        usages = [run.usage for run in runs]
        first = usages[0] if usages else None
        if first is None or any(usage is None for usage in usages):
            return
        record = self.record
        record.input_tokens = first.input_tokens
        record.output_tokens = sum(usage.output_tokens for usage in usages if usage is not None)
        record.cached_tokens = first.input_tokens_details.cached_tokens
        record.first_token = min(
            (r.first_token_at for r in runs if r.first_token_at is not None), default=None
        )
