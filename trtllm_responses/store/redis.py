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

The item index is one hash, ``trtllm:items`` (item id → the response holding it, and per response a field
listing its item ids), written by a script in ``put``'s transaction; ``delete`` and a replacing ``put``
take the response's items out in theirs. Redis 7.0 cannot expire a hash field, so the fields of a response
that expired or was evicted are dropped when a lookup finds it gone, and by a sweep: once the hash holds
more than :data:`INDEX_SWEEP_FIELDS` fields, every :data:`INDEX_SWEEP_EVERY`-th ``put`` checks
:data:`INDEX_SWEEP_BATCH` more of them (a cursor over the hash). A lookup never names a response that is
gone.

A response that continues a stored one is a delta on it (``redis_chains.py``): ``get`` reads its chain in
one script, ``touch`` and ``put`` renew the chain's TTLs, ``delete`` hides a response others depend on.
Entries written before deltas (``TRS1``) read as snapshots.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

import orjson

from ..core import ServiceUnavailableError
from .base import (
    ConversationHead,
    ConversationItem,
    ConversationPage,
    StoredConversation,
    StoredResponse,
    StoreStats,
    item_ids,
    own_part,
    scope_of,
)
from .codec import decode_stored_chain, encode_delta_body, encode_stored
from .counters import RedisCounters
from .redis_chains import Chains
from .redis_scopes import SCOPES, ScopeSizes

__all__ = ["RedisStore", "redis_client"]

logger = logging.getLogger(__name__)

PREFIX = "trtllm:resp:"
#: + id: the conversation's JSON; + id + ":items": a list of item_id \0 JSON; + ":ids": a set of its item
#: ids; + ":bytes": its items' JSON bytes.
CONVERSATION = "trtllm:conv:"
#: The item index: a hash of item id → response id.
ITEMS = "trtllm:items"
#: The index's size past which puts sweep it, how often they do, and how many fields a sweep checks.
INDEX_SWEEP_FIELDS = 100_000
INDEX_SWEEP_EVERY = 100
INDEX_SWEEP_BATCH = 1_000


#: A response's own field in the index (``\0`` + its id): its item ids, ``\0``-separated, so that replacing or
#: deleting it takes out exactly its items.
_OWN = b"\0"
#: Take a response (ARGV[1]) out of the index: the items still naming it, and its own field.
_UNINDEX_BODY = """
local own = '\\0' .. ARGV[1]
local old = redis.call('HGET', KEYS[1], own)
if old then
  for id in string.gmatch(old, '[^%z]+') do
    if redis.call('HGET', KEYS[1], id) == ARGV[1] then redis.call('HDEL', KEYS[1], id) end
  end
  redis.call('HDEL', KEYS[1], own)
end
"""
_UNINDEX = _UNINDEX_BODY + "return 0"
#: Index a response (ARGV[1]) with its item ids (ARGV[2:]), its earlier version's items out first; the index's size.
_INDEX = (
    _UNINDEX_BODY
    + """
if #ARGV > 1 then
  local ids = {}
  for i = 2, #ARGV do
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
    ids[#ids + 1] = ARGV[i]
  end
  redis.call('HSET', KEYS[1], own, table.concat(ids, '\\0'))
end
return redis.call('HLEN', KEYS[1])
"""
)


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
        self._puts = 0  # puts that found the index over INDEX_SWEEP_FIELDS since it was last swept
        self._sweep_cursor = 0
        self._counters = RedisCounters(self._call)
        self._scopes = ScopeSizes(PREFIX)
        self._chains = Chains(PREFIX, ttl)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        import redis.exceptions

        try:
            return await getattr(self.client, name)(*args, **kwargs)
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            logger.error("The Redis store failed on %s: %r", name, exc)
            raise ServiceUnavailableError("The response store is unavailable; retry later.") from exc

    def counters(self) -> RedisCounters:
        """Counts of tenants' limits in this Redis (atomic scripts): every process and replica counts together."""
        return self._counters

    async def ping(self) -> None:
        """ServiceUnavailableError (503) unless Redis answers within its timeout."""
        await self._call("ping")

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry, its history assembled from its chain (every entry's TTL renewed); None if unknown or
        expired."""
        blobs = (
            await self._multi(lambda p: self._chains.read(p, response_id, whole=True), transaction=False)
        )[0]
        return decode_stored_chain(blobs or None, response_id)

    async def touch(self, response_id: str) -> bool:
        """Whether the entry and its chain are there (their TTLs renewed); its data is not read."""
        there = await self._multi(lambda p: self._chains.read(p, response_id, whole=False), transaction=False)
        return bool(there[0])

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry for ``ttl`` seconds (0: until Redis evicts it): a delta on its parent when that is
        there (``redis_chains.py``), else a snapshot."""
        own = own_part(entry)
        stored = 0
        gone: list[Any] = []
        if own is not None and entry.parent is not None:
            body = encode_delta_body(entry, own)
            parent = (entry.parent.id, len(entry.parent.history.messages))
            if len(body) <= self.max_bytes:
                stored, *gone = await self._script(
                    lambda p: self._chains.put(p, entry.id, body, parent, len(entry.history.messages))
                )
        if not stored:
            data = encode_stored(entry)
            if len(data) > self.max_bytes:
                self._rejected += 1
                logger.warning(
                    "Response %s (%d bytes) is larger than --max_store_bytes; not stored", entry.id, len(data)
                )
                return False
            stored, *gone = await self._script(
                lambda p: self._chains.put(p, entry.id, data, None, len(entry.history.messages))
            )
        if int(stored) < 0:
            self._rejected += 1
            logger.warning("Response %s is extended by others; not replaced", entry.id)
            return False
        ids = item_ids(entry)

        def build(pipe: Any) -> None:
            pipe.eval(_INDEX, 1, ITEMS, entry.id, *ids)
            self._scopes.put(pipe, scope_of(entry.id), entry.id, int(stored))
            for went in gone:
                self._scopes.delete(pipe, scope_of(went.decode()), went.decode())

        fields = (await self._multi(build))[0]
        if int(fields) > INDEX_SWEEP_FIELDS:
            self._puts += 1
            if self._puts >= INDEX_SWEEP_EVERY:
                self._puts = 0
                await self._sweep()
        return True

    async def _script(self, queue: Callable[[Any], None]) -> list[Any]:
        """One script's reply (a list), run on its own."""
        return list((await self._multi(queue, transaction=False))[0])

    async def _sweep(self) -> None:
        """Check the next :data:`INDEX_SWEEP_BATCH` fields of the item index; drop those of responses gone."""
        cursor, fields = await self._call("hscan", ITEMS, self._sweep_cursor, count=INDEX_SWEEP_BATCH)
        self._sweep_cursor = int(cursor)
        named = {
            (k[len(_OWN) :] if k.startswith(_OWN) else v).decode() for k, v in fields.items()
        }  # a response's own field names it by its key, an item's by its value
        await self._gone(named)

    async def _gone(self, responses: Collection[str]) -> set[str]:
        """Those of ``responses`` that are gone (expired, evicted), their items taken out of the index."""
        names = list(dict.fromkeys(responses))
        if not names:
            return set()
        there = await self._multi(lambda p: [p.exists(PREFIX + r) for r in names], transaction=False)
        gone = {r for r, n in zip(names, there, strict=True) if not n}
        if gone:
            await self._multi(lambda p: [p.eval(_UNINDEX, 1, ITEMS, r) for r in gone], transaction=False)
        return gone

    async def delete(self, response_id: str) -> bool:
        """Forget an entry (hidden while others depend on it: ``redis_chains.py``) and take its items out of
        the index; the bytes of what went leave its scope's count."""
        status, *gone = await self._script(lambda p: self._chains.delete(p, response_id))
        if not status:
            return False

        def build(pipe: Any) -> None:
            pipe.eval(_UNINDEX, 1, ITEMS, response_id)
            if int(status) == 2:
                self._scopes.delete(pipe, scope_of(response_id), response_id)
            for went in gone:
                self._scopes.delete(pipe, scope_of(went.decode()), went.decode())

        await self._multi(build)
        return True

    async def item_responses(self, item_ids: Collection[str]) -> dict[str, str]:
        """HMGET on the index, then EXISTS on the responses named (those gone leave the index)."""
        wanted = [i for i in dict.fromkeys(item_ids) if not i.startswith("\0")]
        if not wanted:
            return {}
        values = await self._call("hmget", ITEMS, wanted)
        found = {i: v.decode() for i, v in zip(wanted, values, strict=True) if v is not None}
        gone = await self._gone(found.values())
        return {i: r for i, r in found.items() if r not in gone}

    async def scope_bytes(self, scope: str, limit: int | None = None) -> int:
        """The encoded bytes of the responses under ``scope``, as their puts and deletes counted them; at or
        over ``limit``, first reconciled with the responses that expired or were evicted (``redis_scopes.py``)."""
        return int(
            (await self._multi(lambda p: self._scopes.read(p, scope, limit), transaction=False))[0] or 0
        )

    async def stats(self) -> StoreStats:
        """Keys in this database (the item index's hash and the scopes' sizes not counted), Redis's memory, and
        its evictions."""
        keys, index, scopes, hashes = await self._multi(
            lambda p: p.dbsize().exists(ITEMS).exists(SCOPES).scard(SCOPES), transaction=False
        )
        info = await self._call("info")
        return StoreStats(
            responses=int(keys) - int(index) - int(scopes) - int(hashes),
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
    # A conversation is four keys: its fields (JSON); its items (a list of item_id \0 JSON: RPUSH is
    # atomic, so processes appending at once never lose an item); the set of its item ids; and its
    # items' bytes (a counter). The last two are its head, kept so that a turn reads neither the list
    # nor more than one item: every write changes the list and its head in one MULTI/EXEC, and gives
    # all four keys the store's TTL. A conversation written before heads were kept (no counter) gets
    # its head from its list once, on first use (``_index``).

    @staticmethod
    def _keys(conversation_id: str) -> tuple[str, str, str, str]:
        key = CONVERSATION + conversation_id
        return key, key + ":items", key + ":ids", key + ":bytes"

    @staticmethod
    def _encode_item(item: ConversationItem) -> bytes:
        return item[0].encode() + b"\0" + item[1]

    @staticmethod
    def _decode_item(raw: bytes) -> ConversationItem:
        item_id, _, data = raw.partition(b"\0")
        return item_id.decode(), data

    async def _multi(self, build: Callable[[Any], object], *, transaction: bool = True) -> list[Any]:
        """Run the commands ``build`` queues on a pipeline in one round trip (in MULTI/EXEC if ``transaction``)."""
        import redis.exceptions

        try:
            async with self.client.pipeline(transaction=transaction) as pipe:
                build(pipe)
                return list(await pipe.execute())
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            logger.error("The Redis store failed on a pipeline: %r", exc)
            raise ServiceUnavailableError("The response store is unavailable; retry later.") from exc

    def _expire_all(self, pipe: Any, keys: tuple[str, ...]) -> None:
        if self.ttl:
            for key in keys:
                pipe.expire(key, self.ttl)

    async def _index(self, conversation_id: str) -> None:
        """Give a conversation written before heads were kept its id set and byte counter, from its list
        (once: the list is watched, so an append meanwhile makes it start again)."""
        import redis.exceptions

        keys = self._keys(conversation_id)
        _, items_key, ids_key, bytes_key = keys
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        await pipe.watch(items_key, bytes_key)
                        if await pipe.exists(bytes_key):
                            return  # another process did it
                        items = [self._decode_item(r) for r in await pipe.lrange(items_key, 0, -1)]
                        pipe.multi()
                        pipe.delete(ids_key)
                        if items:
                            pipe.sadd(ids_key, *{item_id for item_id, _ in items})
                        pipe.set(bytes_key, sum(len(data) for _, data in items))
                        self._expire_all(pipe, keys[1:])
                        await pipe.execute()
                        return
                    except redis.exceptions.WatchError:
                        continue
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            logger.error("The Redis store failed indexing a conversation: %r", exc)
            raise ServiceUnavailableError("The response store is unavailable; retry later.") from exc

    async def _known(self, conversation_id: str) -> bool:
        """Whether the conversation exists (its head brought up to date if it predates heads)."""
        fields_key, _, _, bytes_key = self._keys(conversation_id)
        exists, indexed = await self._multi(
            lambda p: p.exists(fields_key).exists(bytes_key), transaction=False
        )
        if exists and not indexed:
            await self._index(conversation_id)
        return bool(exists)

    async def create_conversation(
        self, conversation: StoredConversation, items: list[ConversationItem]
    ) -> None:
        """Keep a conversation, its first items and its head (one transaction)."""
        keys = self._keys(conversation.id)
        fields_key, items_key, ids_key, bytes_key = keys
        fields = orjson.dumps(
            {"created_at": conversation.created_at, "metadata": orjson.loads(conversation.metadata_json)}
        )

        def build(pipe: Any) -> None:
            pipe.delete(items_key, ids_key)
            pipe.set(fields_key, fields, ex=self.ttl or None)
            if items:
                pipe.rpush(items_key, *[self._encode_item(i) for i in items])
                pipe.sadd(ids_key, *{item_id for item_id, _ in items})
            pipe.set(bytes_key, sum(len(data) for _, data in items), ex=self.ttl or None)
            self._expire_all(pipe, (items_key, ids_key))

        await self._multi(build)

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
        """Replace its metadata (only if it still exists), renewing the TTL of all its keys."""
        old = await self.get_conversation(conversation_id)
        if old is None:
            return None
        keys = self._keys(conversation_id)
        fields = orjson.dumps({"created_at": old.created_at, "metadata": orjson.loads(metadata_json)})

        def build(pipe: Any) -> None:
            pipe.set(keys[0], fields, ex=self.ttl or None, xx=True)
            self._expire_all(pipe, keys[1:])

        if not (await self._multi(build))[0]:
            return None  # deleted meanwhile
        return StoredConversation(conversation_id, old.created_at, metadata_json)

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Forget a conversation, its items and its head."""
        fields_key, *rest = self._keys(conversation_id)
        deleted = await self._multi(lambda p: p.delete(fields_key).delete(*rest))
        return bool(deleted[0])

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem] | None:
        """Its items, oldest first."""
        if await self.get_conversation(conversation_id) is None:
            return None
        raw = await self._call("lrange", CONVERSATION + conversation_id + ":items", 0, -1)
        return [self._decode_item(r) for r in raw]

    async def conversation_head(self, conversation_id: str) -> ConversationHead | None:
        """LLEN, the last item (LINDEX -1) and the byte counter: one round trip, one snapshot."""
        fields_key, items_key, _, bytes_key = self._keys(conversation_id)
        for _ in range(2):  # a second time only after indexing a conversation from before heads
            exists, count, last, nbytes = await self._multi(
                lambda p: p.exists(fields_key).llen(items_key).lindex(items_key, -1).get(bytes_key)
            )
            if not exists:
                return None
            if nbytes is not None:
                last_id = self._decode_item(last)[0] if last is not None else None
                return ConversationHead(int(count), last_id, int(nbytes))
            await self._index(conversation_id)
        raise ServiceUnavailableError("The response store is unavailable; retry later.")

    async def conversation_holds(self, conversation_id: str, item_ids: Collection[str]) -> set[str] | None:
        """SMISMEMBER on its id set (Redis 6.2 or newer), with its existence: one round trip."""
        fields_key, _, ids_key, bytes_key = self._keys(conversation_id)
        wanted = list(dict.fromkeys(item_ids))

        def build(pipe: Any) -> None:
            pipe.exists(fields_key).exists(bytes_key)
            if wanted:
                pipe.smismember(ids_key, wanted)

        for _ in range(2):  # a second time only after indexing a conversation from before heads
            exists, indexed, *found = await self._multi(build, transaction=False)
            if not exists:
                return None
            if indexed:
                held = found[0] if found else []
                return {item_id for item_id, there in zip(wanted, held, strict=True) if there}
            await self._index(conversation_id)
        raise ServiceUnavailableError("The response store is unavailable; retry later.")

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
        """Append items and grow the head (one transaction)."""
        if not await self._known(conversation_id):
            return False
        if items:
            keys = self._keys(conversation_id)
            _, items_key, ids_key, bytes_key = keys

            def build(pipe: Any) -> None:
                pipe.rpush(items_key, *[self._encode_item(i) for i in items])
                pipe.sadd(ids_key, *{item_id for item_id, _ in items})
                pipe.incrby(bytes_key, sum(len(data) for _, data in items))
                self._expire_all(pipe, keys)

            await self._multi(build)
        return True

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool | None:
        """Remove one item (its list is read to find it), then shrink the head."""
        if not await self._known(conversation_id):
            return None
        _, items_key, ids_key, bytes_key = self._keys(conversation_id)
        raw = await self._call("lrange", items_key, 0, -1)
        items = [self._decode_item(r) for r in raw]
        for n, item in enumerate(items):
            if item[0] == item_id:
                if not await self._call("lrem", items_key, 1, raw[n]):
                    return False  # removed meanwhile, by whoever shrank the head for it
                again = any(other[0] == item_id for other in items[n + 1 :])

                def build(pipe: Any, data: bytes = item[1], again: bool = again) -> None:
                    pipe.decrby(bytes_key, len(data))
                    if not again:
                        pipe.srem(ids_key, item_id)

                await self._multi(build)
                return True
        return False
