"""Chains of stored responses in Redis: deltas, their dependants, hiding and TTLs (``RedisStore``).

A response is ``trtllm:resp:<id>``, the codec's stored bytes (``codec.encode_stored``): a snapshot, or a
delta whose prefix names the entries it extends (at most ``SNAPSHOT_EVERY - 1``, its snapshot first). Beside
it, while others depend on it, ``trtllm:deps:<id>`` counts the deltas naming it as their parent, and a
deleted response that others depend on is hidden (``trtllm:hid:<id>``): it reads as unknown, and stays until
its last dependant goes (docs/sessions-and-kv-cache.md#what-the-store-keeps). Each operation is one script:

- ``put`` of a delta checks, in the script, that the parent is there and its history is the one the entry
  extends (its message count) and its chain is short enough, and renews the TTL of every entry of the chain:
  a dependant never outlives what it extends. Otherwise the caller stores a snapshot.
- ``get`` and ``touch`` renew the TTL of the whole chain (so every entry of it lives as long as its last
  reader keeps it), and ``get`` returns the chain's bytes, its snapshot first; a chain missing an entry (Redis's
  ``maxmemory`` evicted it: ``allkeys-lru`` may, since reads keep a chain's entries equally recent but its LRU
  is sampled) reads as absent.
- ``delete`` hides a response others depend on; one nothing depends on goes, and with it each hidden
  ancestor nothing else depends on then. A put over an existing id releases what its old version depended on;
  one over a response others extend is refused (their chains name it; the server mints every id once).

Scripts name keys they compute (as ``redis_scopes.py`` does): a store is one Redis, never a cluster.
"""

from __future__ import annotations

from typing import Any

from .base import SNAPSHOT_EVERY

__all__ = ["DEPENDANTS", "HIDDEN", "Chains"]

DEPENDANTS = "trtllm:deps:"
HIDDEN = "trtllm:hid:"

#: Helpers every script starts with. ARGV[1..4]: the responses' prefix, DEPENDANTS, HIDDEN, the TTL (0: none).
_LIB = """
local P, D, H, TTL = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local function chain(v)
  if not v or string.sub(v, 1, 4) ~= 'TRS2' then return -1, {} end
  local count, n = struct.unpack('<I4I4', v, 5)
  local ids = {}
  for a in string.gmatch(string.sub(v, 13, 12 + n), '[^\\n]+') do ids[#ids + 1] = a end
  return count, ids
end
local function renew(r)
  if TTL > 0 then
    redis.call('EXPIRE', P .. r, TTL)
    redis.call('EXPIRE', D .. r, TTL)
    redis.call('EXPIRE', H .. r, TTL)
  end
end
local function prefix(r)
  local v = redis.call('GETRANGE', P .. r, 0, 16383)
  if v == '' then return nil end
  return v
end
-- r no longer depends on its parent (the last id of its chain): a hidden parent nothing else depends on
-- goes, and so on up; the ids that went.
local function release(v, gone)
  local _, ids = chain(v)
  local parent = ids[#ids]
  while parent do
    if redis.call('DECR', D .. parent) > 0 then return end
    redis.call('DEL', D .. parent)
    if redis.call('EXISTS', H .. parent) == 0 then return end
    local pv = prefix(parent)
    redis.call('DEL', P .. parent, H .. parent)
    gone[#gone + 1] = parent
    _, ids = chain(pv)
    parent = ids[#ids]
  end
end
"""

#: ARGV[5..]: id, parent ('' for a snapshot), the parent's message count expected, the entry's message count,
#: the bytes (a snapshot's whole, or a delta's body after its prefix). The stored length, or 0: the parent is
#: not there as expected (store a snapshot instead), or -1: the id is a response others extend (not replaced).
#: Then the ids of hidden entries that went.
_PUT = (
    _LIB
    + f"""
local id, parent, expected, count, data = ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
local ids = {{}}
if parent ~= '' then
  local pv = prefix(parent)
  if not pv then return {{0}} end
  local pcount, pids = chain(pv)
  if pcount ~= expected or #pids + 1 >= {SNAPSHOT_EVERY} then return {{0}} end
  for _, a in ipairs(pids) do ids[#ids + 1] = a end
  ids[#ids + 1] = parent
  local joined = table.concat(ids, '\\n')
  data = 'TRS2' .. struct.pack('<I4I4', count, #joined) .. joined .. data
end
local gone = {{}}
local old = prefix(id)
if old and tonumber(redis.call('GET', D .. id) or '0') > 0 then return {{-1}} end
if old then release(old, gone) end
redis.call('DEL', H .. id)
if TTL > 0 then redis.call('SET', P .. id, data, 'EX', TTL) else redis.call('SET', P .. id, data) end
if parent ~= '' then
  redis.call('INCR', D .. parent)
  for _, a in ipairs(ids) do renew(a) end
end
renew(id)
local out = {{#data}}
for _, g in ipairs(gone) do out[#out + 1] = g end
return out
"""
)

#: ARGV[5]: id, ARGV[6]: 'get' or 'touch'. False if unknown, hidden or its chain is broken; else (get) the
#: chain's bytes, its snapshot first, or (touch) 1. Every entry of the chain has its TTL renewed.
_READ = (
    _LIB
    + """
local id, mode = ARGV[5], ARGV[6]
if redis.call('EXISTS', H .. id) == 1 then return false end
local v
if mode == 'get' then v = redis.call('GET', P .. id) else v = prefix(id) end
if not v then return false end
local _, ids = chain(v)
local out = {}
for _, a in ipairs(ids) do
  local d
  if mode == 'get' then d = redis.call('GET', P .. a) else d = redis.call('EXISTS', P .. a) == 1 end
  if not d then return false end
  out[#out + 1] = d
end
renew(id)
for _, a in ipairs(ids) do renew(a) end
if mode ~= 'get' then return 1 end
out[#out + 1] = v
return out
"""
)

#: ARGV[5]: id. {0} if unknown or hidden; {1} it is hidden now (others depend on it); {2, ids...} it went,
#: and so did the hidden ancestors named.
_DELETE = (
    _LIB
    + """
local id = ARGV[5]
if redis.call('EXISTS', H .. id) == 1 then return {0} end
local v = prefix(id)
if not v then return {0} end
if tonumber(redis.call('GET', D .. id) or '0') > 0 then
  redis.call('SET', H .. id, 1)
  local t = redis.call('PTTL', P .. id)
  if t > 0 then redis.call('PEXPIRE', H .. id, t) end
  return {1}
end
redis.call('DEL', P .. id, D .. id)
local gone = {2}
release(v, gone)
return gone
"""
)


class Chains:
    """The scripts above, for a store whose responses are ``prefix`` + id and live ``ttl`` seconds (0: no TTL)."""

    def __init__(self, prefix: str, ttl: int) -> None:
        self.args = (prefix, DEPENDANTS, HIDDEN, ttl)

    def put(
        self, pipe: Any, response_id: str, data: bytes, parent: tuple[str, int] | None, count: int
    ) -> None:
        """Queue on ``pipe`` the put of ``data``: a snapshot, or a delta's body on ``parent`` (its id and the
        message count of the history it must hold). Its reply: [stored length (0: not stored), ids gone...]."""
        pid, expected = parent if parent is not None else ("", -1)
        pipe.eval(_PUT, 0, *self.args, response_id, pid, expected, count, data)

    def read(self, pipe: Any, response_id: str, *, whole: bool) -> None:
        """Queue the chain's bytes (``whole``) or whether it is there: False if not; TTLs renewed."""
        pipe.eval(_READ, 0, *self.args, response_id, "get" if whole else "touch")

    def delete(self, pipe: Any, response_id: str) -> None:
        """Queue the delete: [0] unknown, [1] hidden, [2, ids gone...] gone (with hidden ancestors)."""
        pipe.eval(_DELETE, 0, *self.args, response_id)
