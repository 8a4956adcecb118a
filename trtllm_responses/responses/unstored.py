"""Unstored: the final responses of runs whose store write failed, answered instead of a silent 404.

A run asked to be stored (``store: true``, or a ``conversation``) whose write failed ends ``failed``,
saying so (``generation.py``). Its client was told; whoever retrieves it by id must be told the same,
for the grace period of background responses (docs/stores-and-frontends.md#stores, "When Redis fails"):
a background run keeps its failed response with its events (``background.py``); every other run's is
kept here, by key (its tenant's scope and its id, ``ResponseRun.key``), and, with a Redis store, copied
to Redis for every other process (``relay.py``). Bounded: at most ``max_finished`` of them, and
``max_unstored_bytes`` of their JSON together (the oldest go first), each for ``grace`` seconds.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from .background import BackgroundLimits

__all__ = ["Unstored"]


class Unstored:
    """Failed final responses of runs that could not be stored, by key, for their grace period."""

    def __init__(self, limits: BackgroundLimits) -> None:
        self.limits = limits
        #: key -> (when it ended, its JSON), oldest-ended first.
        self._finals: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._finals)

    def keep(self, key: str, final: bytes) -> None:
        """Keep ``final`` (a failed response's JSON) under ``key``; older ones go past the budgets."""
        self.forget(key)
        self._finals[key] = (time.monotonic(), final)
        self.nbytes += len(final)
        self._reap()

    def get(self, key: str) -> bytes | None:
        """The failed response kept under ``key``, while its grace lasts."""
        self._reap()
        found = self._finals.get(key)
        return None if found is None else found[1]

    def forget(self, key: str) -> bool:
        """Drop what is kept under ``key`` (DELETE); whether anything was."""
        found = self._finals.pop(key, None)
        if found is not None:
            self.nbytes -= len(found[1])
        return found is not None

    def _reap(self) -> None:
        """Drop those whose grace is over, then the oldest past the count and byte budgets."""
        limits, finals = self.limits, self._finals
        expired = time.monotonic() - limits.grace
        while finals and (
            next(iter(finals.values()))[0] < expired
            or len(finals) > limits.max_finished
            or self.nbytes > limits.max_unstored_bytes
        ):
            _, (_, final) = finals.popitem(last=False)
            self.nbytes -= len(final)
