"""``--store redis://HOST:PORT/DB``: one store shared by every server process and replica.

What one process stores, any other continues: entries are the codec's bytes
under ``trtllm:resp:<id>``. Bounds are Redis's own: each entry lives
``ttl`` seconds after its last use (``GETEX`` renews it; 0: no expiry), and the
server's ``maxmemory``/``maxmemory-policy`` (``allkeys-lru`` is the right one)
evicts under memory pressure. Use a database of its own (``/DB``): ``stats``
counts its keys.

Every command has a socket timeout; an unreachable or slow Redis becomes
ServiceUnavailableError (a 503), and the connection pool reconnects on the
next request once Redis is back.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ServiceUnavailableError
from .base import StoredResponse, StoreStats
from .codec import CodecError, decode_entry, encode_entry

__all__ = ["RedisStore", "redis_client"]

logger = logging.getLogger(__name__)

PREFIX = "trtllm:resp:"


def redis_client(url: str, timeout: float) -> Any:
    """A redis-py asyncio client for ``url`` whose every command gives up after ``timeout`` seconds."""
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        health_check_interval=30,
        retry_on_timeout=False,
    )


class RedisStore:
    """A ResponseStore in Redis, shared between processes; bounded by TTL and Redis's memory policy."""

    def __init__(
        self,
        url: str,
        ttl: int = 0,
        max_bytes: int = 1 << 30,
        timeout: float = 2.0,
        client: Any = None,
    ) -> None:
        self.url = url
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.client = client if client is not None else redis_client(url, timeout)
        self._rejected = 0

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        import redis.exceptions

        try:
            return await getattr(self.client, name)(*args, **kwargs)
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            logger.error("The Redis store failed on %s: %r", name, exc)
            raise ServiceUnavailableError("The response store is unavailable; retry later.") from exc

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry (its TTL renewed); None if unknown or expired."""
        key = PREFIX + response_id
        data = await (self._call("getex", key, ex=self.ttl) if self.ttl else self._call("get", key))
        if data is None:
            return None
        try:
            return decode_entry(data)
        except CodecError:
            logger.exception("Stored response %s is corrupt; treating it as absent", response_id)
            return None

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry for ``ttl`` seconds (0: until Redis evicts it)."""
        data = encode_entry(entry)
        if len(data) > self.max_bytes:
            self._rejected += 1
            logger.warning("Response %s (%d bytes) is larger than --max_store_bytes; not stored", entry.id, len(data))
            return False
        await self._call("set", PREFIX + entry.id, data, ex=self.ttl or None)
        return True

    async def delete(self, response_id: str) -> bool:
        """Forget an entry."""
        return bool(await self._call("delete", PREFIX + response_id))

    async def stats(self) -> StoreStats:
        """Keys in this database, Redis's memory, and its evictions."""
        keys = await self._call("dbsize")
        info = await self._call("info")
        return StoreStats(
            responses=int(keys),
            bytes=int(info.get("used_memory", 0)),
            max_responses=0,
            max_bytes=int(info.get("maxmemory", 0)),
            evictions=int(info.get("evicted_keys", 0)) + int(info.get("expired_keys", 0)),
            rejected=self._rejected,
        )

    async def close(self) -> None:
        """Close the connection pool."""
        try:
            await self.client.aclose()
        except Exception:  # closing a pool to a dead server must not fail shutdown
            logger.debug("closing the Redis client failed", exc_info=True)
