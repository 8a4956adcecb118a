"""Each scope's stored bytes in Redis (``RedisStore.scope_bytes``; docs/tenants.md#limits).

Redis drops an entry when its TTL runs out or ``maxmemory`` evicts it, and tells nobody, so a running sum
alone would only grow. A scope keeps instead one hash, ``trtllm:scope:<scope>``, of its responses' sizes
(response id → encoded bytes) with their sum (field ``\\0bytes``), written by one script in the
transaction that stores or deletes the response; the scopes are named in the set ``trtllm:scopes`` (so
``stats`` can leave their keys out of its count). What went unseen is taken out by **reconciling**: a
script walks the hash with a cursor (field ``\\0cursor``) and drops the members whose response key is
gone, lowering the sum by their sizes.

- Every :data:`PUT_SWEEP_EVERY`-th ``put`` of a scope reconciles one step of its hash (``HSCAN … COUNT``
  :data:`PUT_SWEEP`: a hash of up to 128 members is one step), so the members of expired responses do not
  pile up in a scope that stores on.
- A reading at or over the caller's limit reconciles first, up to :data:`RECONCILE_BUDGET` members, and
  stops as soon as the sum is under the limit: a scope's sum may stay above its true bytes by the
  expired responses the budget did not reach, and each later reading walks on from where it stopped.

The sum is never below the bytes really stored (a response's size is added in the transaction that
writes it), so a limit on it never lets a scope store more than the limit plus a turn's own bytes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PUT_SWEEP", "PUT_SWEEP_EVERY", "RECONCILE_BUDGET", "SCOPES", "ScopeSizes"]

SCOPE = "trtllm:scope:"
#: The set of scopes that have a hash.
SCOPES = "trtllm:scopes"
#: Every how many puts of a scope one sweeps a step, and the step's ``HSCAN`` count (a hint: a small hash,
#: up to 128 members, is one step whatever it says).
PUT_SWEEP_EVERY = 8
PUT_SWEEP = 32
#: The most members a reading over its limit checks before it answers.
RECONCILE_BUDGET = 1_000

#: Walk the scope's hash (KEYS[1]) from its cursor, dropping members whose response (``prefix`` + id) is
#: gone, until a whole step is done and ``limit`` < 0, the walk ends, ``budget`` members were checked or
#: the sum is under ``limit``; the sum after.
_SWEEP = """
if redis.replicate_commands then redis.replicate_commands() end
local function sweep(key, prefix, limit, budget, count)
  local total = tonumber(redis.call('HGET', key, '\\0bytes') or '0')
  local cursor = redis.call('HGET', key, '\\0cursor') or '0'
  local checked = 0
  repeat
    local step = redis.call('HSCAN', key, cursor, 'COUNT', count)
    cursor = step[1]
    local fields = step[2]
    for i = 1, #fields, 2 do
      local id = fields[i]
      if string.byte(id, 1) ~= 0 then
        checked = checked + 1
        if redis.call('EXISTS', prefix .. id) == 0 then
          redis.call('HDEL', key, id)
          total = redis.call('HINCRBY', key, '\\0bytes', 0 - tonumber(fields[i + 1]))
        end
      end
    end
  until limit < 0 or cursor == '0' or checked >= budget or total < limit
  if redis.call('EXISTS', key) == 1 then redis.call('HSET', key, '\\0cursor', cursor) end
  return total
end
"""
#: KEYS: the scope's hash, SCOPES; ARGV: the scope, a response id, its size ('': it is deleted), the
#: responses' key prefix. Every PUT_SWEEP_EVERY-th put of the scope sweeps a step. The scope's sum after.
_WRITE = (
    _SWEEP
    + f"""
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '0')
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[2])
  return redis.call('HINCRBY', KEYS[1], '\\0bytes', 0 - old)
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
local total = redis.call('HINCRBY', KEYS[1], '\\0bytes', tonumber(ARGV[3]) - old)
if redis.call('HINCRBY', KEYS[1], '\\0puts', 1) % {PUT_SWEEP_EVERY} == 0 then
  total = sweep(KEYS[1], ARGV[4], -1, 0, {PUT_SWEEP})
end
return total
"""
)
#: KEYS: the scope's hash; ARGV: the responses' key prefix, the limit. Its sum, reconciled first (up to
#: RECONCILE_BUDGET members) when it is at or over the limit.
_RECONCILE = (
    _SWEEP
    + f"""
local total = tonumber(redis.call('HGET', KEYS[1], '\\0bytes') or '0')
local limit = tonumber(ARGV[2])
if total < limit then return total end
return sweep(KEYS[1], ARGV[1], limit, {RECONCILE_BUDGET}, 100)
"""
)


class ScopeSizes:
    """The scripts keeping each scope's sizes and sum, for a store whose responses are ``prefix`` + id."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def put(self, pipe: Any, scope: str, response_id: str, size: int) -> None:
        """Queue on ``pipe``: ``response_id`` (a stored id) holds ``size`` bytes now (now and then a sweep step)."""
        pipe.eval(_WRITE, 2, SCOPE + scope, SCOPES, scope, response_id, size, self.prefix)

    def delete(self, pipe: Any, scope: str, response_id: str) -> None:
        """Queue on ``pipe``: ``response_id`` holds nothing now."""
        pipe.eval(_WRITE, 2, SCOPE + scope, SCOPES, scope, response_id, "", self.prefix)

    def read(self, pipe: Any, scope: str, limit: int | None) -> None:
        """Queue on ``pipe`` the scope's sum, reconciled first when it is at or over ``limit``."""
        key = SCOPE + scope
        if limit is None:
            pipe.hget(key, "\0bytes")
        else:
            pipe.eval(_RECONCILE, 1, key, self.prefix, max(0, limit))
