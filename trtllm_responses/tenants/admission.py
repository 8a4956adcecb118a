"""Fair share of a full engine: which waiting turn runs next (docs/tenants.md#fair-share).

A frontend runs at most ``capacity`` turns at once (``serve --max_running_responses``; 0: no bound, no
queue). A turn that finds every slot taken waits in its tenant's queue:

- within a tenant, by service tier (``priority`` before ``default`` before ``flex``), then by arrival;
- across tenants, weighted fair queueing (stride scheduling): each turn a tenant starts advances its
  *pass* by ``1 / weight``; a freed slot goes to the waiting tenant with the lowest pass (ties: the one whose
  next turn arrived first). A tenant that was idle starts at the pass of the last turn started (no credit
  banked while idle). So a tenant with many turns waits behind the others' next turns, and over a busy
  stretch tenants start turns in proportion to their weights; none is skipped for good.

At most ``max_waiting`` turns wait (then :meth:`FairShare.arrive` raises :class:`EngineFull`). The class
is pure state: no clock, no I/O; its caller (``responses/gate.py``) waits, times out and withdraws.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from .limits import RateLimitError

__all__ = ["EngineFull", "FairShare", "Ticket"]

#: Order of the service tiers in a tenant's queue (lowest first).
TIER_RANK = {"priority": 0, "default": 1, "flex": 2}


class EngineFull(RateLimitError):
    """Every slot is taken and ``max_waiting`` turns wait already (or a turn waited its longest): a 429
    ``rate_limit_exceeded`` of type ``requests``."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__("requests", message, retry_after)


@dataclass(eq=False, slots=True)
class Ticket:
    """One turn asking for a slot: its tenant's ``name`` and ``weight``, its service ``tier``."""

    tenant: str
    weight: float = 1.0
    tier: str = "default"
    seq: int = 0
    #: Holds a slot now.
    running: bool = False
    #: Left (withdrawn or released): no longer waiting or running.
    gone: bool = False


@dataclass(slots=True)
class _Queue:
    heap: list[tuple[int, int, Ticket]] = field(default_factory=list)
    waiting: int = 0


class FairShare:
    """The slots of one frontend's engine and the turns waiting for them."""

    def __init__(self, capacity: int = 0, max_waiting: int = 1024) -> None:
        self.capacity = capacity
        self.max_waiting = max_waiting
        #: Running turns by tenant, and in all.
        self.running: dict[str, int] = {}
        self.total_running = 0
        self.total_waiting = 0
        self._queues: dict[str, _Queue] = {}
        self._seq = itertools.count()
        #: Each tenant's pass (turns started, each ``1 / weight``), and the pass of the last turn started.
        self._pass: dict[str, float] = {}
        self._now = 0.0

    def waiting(self, tenant: str) -> int:
        """How many of ``tenant``'s turns wait."""
        queue = self._queues.get(tenant)
        return queue.waiting if queue else 0

    def arrive(self, ticket: Ticket) -> bool:
        """A turn asks for a slot: True if it runs now, False if it waits (its place kept until
        :meth:`admit_next` admits it or :meth:`leave` withdraws it). EngineFull if the queue is full."""
        ticket.seq = next(self._seq)
        if self.capacity <= 0 or (self.total_running < self.capacity and not self.total_waiting):
            self._start(ticket)
            return True
        if self.total_waiting >= self.max_waiting:
            raise EngineFull(f"The engine is full and {self.total_waiting} turns wait already; retry later.")
        queue = self._queues.setdefault(ticket.tenant, _Queue())
        heapq.heappush(queue.heap, (TIER_RANK.get(ticket.tier, 1), ticket.seq, ticket))
        queue.waiting += 1
        self.total_waiting += 1
        return False

    def leave(self, ticket: Ticket) -> list[Ticket]:
        """A turn is done (ended, or withdrawn while it waited: a client that left, a timeout); the turns
        that run now in the slots it freed."""
        if ticket.gone:
            return []
        ticket.gone = True
        if ticket.running:
            self.running[ticket.tenant] -= 1
            if not self.running[ticket.tenant]:
                del self.running[ticket.tenant]
            self.total_running -= 1
        else:
            queue = self._queues[ticket.tenant]
            queue.waiting -= 1
            self.total_waiting -= 1
            if not queue.waiting:
                del self._queues[ticket.tenant]
        return self.admit_next()

    def admit_next(self) -> list[Ticket]:
        """Fill free slots from the queues, fairest first; the turns that run now."""
        admitted = []
        while self.total_waiting and (self.capacity <= 0 or self.total_running < self.capacity):
            name = min(self._queues, key=self._share)
            queue = self._queues[name]
            ticket = self._pop(queue)
            queue.waiting -= 1
            self.total_waiting -= 1
            if not queue.waiting:
                del self._queues[name]
            self._start(ticket)
            admitted.append(ticket)
        return admitted

    def _share(self, name: str) -> tuple[float, int]:
        head = self._head(self._queues[name])
        return max(self._pass.get(name, 0.0), self._now), head.seq

    @staticmethod
    def _head(queue: _Queue) -> Ticket:
        while queue.heap[0][2].gone:  # withdrawn turns are dropped when they reach the head
            heapq.heappop(queue.heap)
        return queue.heap[0][2]

    def _pop(self, queue: _Queue) -> Ticket:
        self._head(queue)
        return heapq.heappop(queue.heap)[2]

    def _start(self, ticket: Ticket) -> None:
        start = max(self._pass.get(ticket.tenant, 0.0), self._now)
        self._now = start
        self._pass[ticket.tenant] = start + 1.0 / ticket.weight
        ticket.running = True
        self.running[ticket.tenant] = self.running.get(ticket.tenant, 0) + 1
        self.total_running += 1
