"""The counters a tenant's limits are kept in, one kind per backend (``tenants/counters.py``'s protocol).

- :class:`MemoryCounters`: this process's dicts (the memory store serves one process);
- :class:`SQLiteCounters`: two tables of the store's file, each operation one ``BEGIN IMMEDIATE``
  transaction on the store's thread, so every frontend of a group on that file counts together;
- :class:`RedisCounters`: one Lua script per operation (atomic; Redis's clock), so replicas sharing a Redis
  count together. A key is ``trtllm:rl:<key>`` and expires with its window (leases: with their last lease).

A window count's ``ttl`` starts when the count is made; a lease set's members expire on their own.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["MemoryCounters", "RedisCounters", "SQLiteCounters"]


class MemoryCounters:
    """Counters in this process's memory (``clock``: seconds, monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._counts: dict[str, tuple[int, float]] = {}
        self._leases: dict[str, dict[str, float]] = {}

    async def add(self, key: str, amount: int, ttl: float) -> tuple[int, float]:
        """See ``tenants.Counters.add``."""
        now = self._clock()
        value, expires = self._counts.get(key, (0, 0.0))
        if expires <= now:
            value, expires = 0, now + ttl
        value += amount
        self._counts[key] = (value, expires)
        if len(self._counts) > 4096:  # drop expired windows now and then: bounded by live tenants
            self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
        return value, expires - now

    def _live(self, key: str) -> dict[str, float]:
        now = self._clock()
        members = {m: e for m, e in self._leases.get(key, {}).items() if e > now}
        self._leases[key] = members
        return members

    async def acquire(self, key: str, member: str, limit: int, lease: float) -> tuple[bool, int]:
        """See ``tenants.Counters.acquire``."""
        members = self._live(key)
        if member not in members and len(members) >= limit:
            return False, len(members)
        members[member] = self._clock() + lease
        return True, len(members)

    async def renew(self, key: str, member: str, lease: float) -> None:
        """See ``tenants.Counters.renew``."""
        members = self._live(key)
        if member in members:
            members[member] = self._clock() + lease

    async def release(self, key: str, member: str) -> None:
        """See ``tenants.Counters.release``."""
        members = self._live(key)
        members.pop(member, None)
        if not members:
            del self._leases[key]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS rate_counts (k TEXT PRIMARY KEY, v INTEGER NOT NULL, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS rate_leases (k TEXT NOT NULL, member TEXT NOT NULL, expires REAL NOT NULL,
                                        PRIMARY KEY (k, member));
"""


class SQLiteCounters:
    """Counters in two tables of a SQLite store's file, written on the store's thread (``run``) with the
    store's connection (``connect``); wall-clock time, shared by the processes of one machine."""

    def __init__(self, run: Callable[..., Awaitable[Any]], connect: Callable[[], sqlite3.Connection]) -> None:
        self._run = run
        self._connect = connect
        self._ready = False

    def _db(self) -> sqlite3.Connection:
        db = self._connect()
        if not self._ready:
            db.executescript(_SCHEMA)
            self._ready = True
        return db

    def _add(self, key: str, amount: int, ttl: float) -> tuple[int, float]:
        db, now = self._db(), time.time()
        with _immediate(db):
            db.execute("DELETE FROM rate_counts WHERE k = ? AND expires <= ?", (key, now))
            db.execute("INSERT OR IGNORE INTO rate_counts VALUES (?, 0, ?)", (key, now + ttl))
            db.execute("UPDATE rate_counts SET v = v + ? WHERE k = ?", (amount, key))
            value, expires = db.execute("SELECT v, expires FROM rate_counts WHERE k = ?", (key,)).fetchone()
        return int(value), float(expires) - now

    def _acquire(self, key: str, member: str, limit: int, lease: float) -> tuple[bool, int]:
        db, now = self._db(), time.time()
        with _immediate(db):
            db.execute("DELETE FROM rate_leases WHERE k = ? AND expires <= ?", (key, now))
            held = db.execute("SELECT count(*) FROM rate_leases WHERE k = ?", (key,)).fetchone()[0]
            mine = db.execute(
                "SELECT 1 FROM rate_leases WHERE k = ? AND member = ?", (key, member)
            ).fetchone()
            if mine is None and held >= limit:
                return False, int(held)
            db.execute("INSERT OR REPLACE INTO rate_leases VALUES (?, ?, ?)", (key, member, now + lease))
        return True, int(held) + (mine is None)

    def _renew(self, key: str, member: str, lease: float) -> None:
        self._db().execute(
            "UPDATE rate_leases SET expires = ? WHERE k = ? AND member = ?",
            (time.time() + lease, key, member),
        )

    def _release(self, key: str, member: str) -> None:
        self._db().execute("DELETE FROM rate_leases WHERE k = ? AND member = ?", (key, member))

    async def add(self, key: str, amount: int, ttl: float) -> tuple[int, float]:
        """See ``tenants.Counters.add``."""
        return await self._run(self._add, key, amount, ttl)  # type: ignore[no-any-return]

    async def acquire(self, key: str, member: str, limit: int, lease: float) -> tuple[bool, int]:
        """See ``tenants.Counters.acquire``."""
        return await self._run(self._acquire, key, member, limit, lease)  # type: ignore[no-any-return]

    async def renew(self, key: str, member: str, lease: float) -> None:
        """See ``tenants.Counters.renew``."""
        await self._run(self._renew, key, member, lease)

    async def release(self, key: str, member: str) -> None:
        """See ``tenants.Counters.release``."""
        await self._run(self._release, key, member)


class _immediate:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on an error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


#: add: INCRBY, and the window's expiry set when the count is made; the new total and its ms to live.
_ADD = """
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]); ttl = tonumber(ARGV[2]) end
return {v, ttl}
"""
#: acquire: a sorted set of members scored by when their lease ends (Redis's clock, ms).
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
local mine = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not mine) and held >= tonumber(ARGV[2]) then return {0, held} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if not mine then held = held + 1 end
return {1, held}
"""
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class RedisCounters:
    """Counters in Redis, each operation one script (``call``: the store's command runner, 503 on failure)."""

    PREFIX = "trtllm:rl:"

    def __init__(self, call: Callable[..., Awaitable[Any]]) -> None:
        self._call = call

    async def add(self, key: str, amount: int, ttl: float) -> tuple[int, float]:
        """See ``tenants.Counters.add``."""
        value, left = await self._call("eval", _ADD, 1, self.PREFIX + key, amount, max(1, int(ttl * 1000)))
        return int(value), int(left) / 1000

    async def acquire(self, key: str, member: str, limit: int, lease: float) -> tuple[bool, int]:
        """See ``tenants.Counters.acquire``."""
        ms = max(1, int(lease * 1000))
        taken, held = await self._call("eval", _ACQUIRE, 1, self.PREFIX + key, member, limit, ms)
        return bool(taken), int(held)

    async def renew(self, key: str, member: str, lease: float) -> None:
        """See ``tenants.Counters.renew``."""
        await self._call("eval", _RENEW, 1, self.PREFIX + key, member, max(1, int(lease * 1000)))

    async def release(self, key: str, member: str) -> None:
        """See ``tenants.Counters.release``."""
        await self._call("zrem", self.PREFIX + key, member)
