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

import orjson

from ..core import ServiceUnavailableError
from .base import ConversationItem, ConversationPage, StoredConversation, StoredResponse, StoreStats
from .codec import decode_stored, encode_entry

__all__ = ["RedisStore", "redis_client"]

logger = logging.getLogger(__name__)

PREFIX = "trtllm:resp:"
CONVERSATION = "trtllm:conv:"  # + id: the conversation's JSON; + id + ":items": a list of item_id \0 JSON


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

    async def ping(self) -> None:
        """ServiceUnavailableError (503) unless Redis answers within its timeout."""
        await self._call("ping")

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry (its TTL renewed); None if unknown or expired."""
        key = PREFIX + response_id
        data = await (self._call("getex", key, ex=self.ttl) if self.ttl else self._call("get", key))
        return decode_stored(data, response_id)

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry for ``ttl`` seconds (0: until Redis evicts it)."""
        data = encode_entry(entry)
        if len(data) > self.max_bytes:
            self._rejected += 1
            logger.warning(
                "Response %s (%d bytes) is larger than --max_store_bytes; not stored", entry.id, len(data)
            )
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

    # -- conversations -------------------------------------------------------------------------
    # A conversation is two keys: its fields (JSON) and its items (a list, RPUSH is atomic, so
    # processes appending at once never lose an item). Both get the store's TTL on every write.

    @staticmethod
    def _encode_item(item: ConversationItem) -> bytes:
        return item[0].encode() + b"\0" + item[1]

    @staticmethod
    def _decode_item(raw: bytes) -> ConversationItem:
        item_id, _, data = raw.partition(b"\0")
        return item_id.decode(), data

    async def _expire(self, *keys: str) -> None:
        if self.ttl:
            for key in keys:
                await self._call("expire", key, self.ttl)

    async def create_conversation(
        self, conversation: StoredConversation, items: list[ConversationItem]
    ) -> None:
        """Keep a conversation and its first items."""
        key = CONVERSATION + conversation.id
        fields = orjson.dumps(
            {"created_at": conversation.created_at, "metadata": orjson.loads(conversation.metadata_json)}
        )
        await self._call("set", key, fields, ex=self.ttl or None)
        if items:
            await self._call("rpush", key + ":items", *[self._encode_item(i) for i in items])
            await self._expire(key + ":items")

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        """The conversation, or None."""
        raw = await self._call("get", CONVERSATION + conversation_id)
        if raw is None:
            return None
        fields = orjson.loads(raw)
        return StoredConversation(
            conversation_id, int(fields["created_at"]), orjson.dumps(fields["metadata"])
        )

    async def update_conversation(
        self, conversation_id: str, metadata_json: bytes
    ) -> StoredConversation | None:
        """Replace its metadata."""
        old = await self.get_conversation(conversation_id)
        if old is None:
            return None
        new = StoredConversation(conversation_id, old.created_at, metadata_json)
        await self.create_conversation(new, [])
        return new

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Forget a conversation and its items."""
        key = CONVERSATION + conversation_id
        return bool(await self._call("delete", key, key + ":items"))

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem] | None:
        """Its items, oldest first."""
        if await self.get_conversation(conversation_id) is None:
            return None
        raw = await self._call("lrange", CONVERSATION + conversation_id + ":items", 0, -1)
        return [self._decode_item(r) for r in raw]

    async def conversation_page(
        self, conversation_id: str, *, after: str | None, limit: int, order: str
    ) -> ConversationPage | None:
        """One page, read from the list's end the order starts at, in chunks, until the page is full: only
        the page is read without ``after``; with it, the items before ``after`` too (ids are not indexed)."""
        if await self.get_conversation(conversation_id) is None:
            return None
        key = CONVERSATION + conversation_id + ":items"
        chunk = max(limit + 1, 256)
        page: list[ConversationItem] = []
        found = after is None
        offset = 0
        while len(page) <= limit:
            if order == "asc":
                raw = await self._call("lrange", key, offset, offset + chunk - 1)
            else:
                raw = await self._call("lrange", key, -offset - chunk, -offset - 1)
                raw.reverse()
            for item in map(self._decode_item, raw):
                if found:
                    page.append(item)
                elif item[0] == after:
                    found = True
            if len(raw) < chunk:
                break
            offset += chunk
        if not found:
            raise LookupError(after)
        return page[:limit], len(page) > limit

    async def append_conversation_items(self, conversation_id: str, items: list[ConversationItem]) -> bool:
        """Append items (one RPUSH)."""
        key = CONVERSATION + conversation_id
        if await self.get_conversation(conversation_id) is None:
            return False
        if items:
            await self._call("rpush", key + ":items", *[self._encode_item(i) for i in items])
            await self._expire(key, key + ":items")
        return True

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool | None:
        """Remove one item."""
        items = await self.conversation_items(conversation_id)
        if items is None:
            return None
        for item in items:
            if item[0] == item_id:
                removed = await self._call(
                    "lrem", CONVERSATION + conversation_id + ":items", 1, self._encode_item(item)
                )
                return bool(removed)
        return False
