"""Counters: the shared, atomic counts a tenant's limits are kept in (docs/tenants.md#limits).

Each store backend has them (``store.counters()``), so every process of a store counts together: the
memory store's are one process's, SQLite's a table written in one transaction per operation (every
frontend of a group on one file), Redis's one script per operation (atomic across replicas).

Two kinds of count:

- a **window count** (``add``): a number that starts at 0, is added to, and is gone ``ttl`` seconds after
  it was made (a fixed window: requests and tokens per minute);
- a **lease set** (``acquire``/``renew``/``release``): at most ``limit`` members at once, each member gone
  ``lease`` seconds after it was last renewed (concurrent responses: a process that dies holding one leaks it
  for one lease at most).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Counters"]


class Counters(Protocol):
    """Atomic counts shared by every process of a store."""

    async def add(self, key: str, amount: int, ttl: float) -> tuple[int, float]:
        """Add ``amount`` (may be negative) to ``key``, made at 0 if absent or expired, expiring ``ttl``
        seconds after it was made; its new total and the seconds until it expires."""
        ...

    async def acquire(self, key: str, member: str, limit: int, lease: float) -> tuple[bool, int]:
        """Put ``member`` into the lease set ``key`` for ``lease`` seconds if it holds fewer than ``limit``
        live members (a member already in it is renewed); whether it is in, and how many live members the
        set holds now."""
        ...

    async def renew(self, key: str, member: str, lease: float) -> None:
        """Extend ``member``'s lease in ``key`` to ``lease`` seconds from now (no-op if it is not in it)."""
        ...

    async def release(self, key: str, member: str) -> None:
        """Take ``member`` out of the lease set ``key`` (no-op if it is not in it)."""
        ...
