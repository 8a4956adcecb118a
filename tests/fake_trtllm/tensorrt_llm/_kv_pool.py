"""TensorRT-LLM's KV-cache block pool, faked: reuse, retention priorities, eviction order and the host tier.

Copied from the C++ KV-cache manager (NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``,
``evictionPolicy.cpp``, ``cpp/tensorrt_llm/executor/kvCacheRetentionConfig.cpp``, ``blockKey.cpp``), as the releases
1.1 to 1.4.0rc1 have it (the fake plays no difference between them here):

- **Blocks and their keys.** A sequence is cut into whole blocks of ``tokens_per_block``; a block's key is its
  tokens and its parent's key, so a block is found only after the same prefix (the radix tree of
  ``BlockManager``). The fake chains an int hash per block, ``hash((parent, tokens))``, O(1) a block; the first
  block mixes in the request's ``cache_salt`` (PR #7106: "the salt's id is mixed into the first block's hash
  only", ``blockKey.cpp``), so a salt's blocks are found by its requests alone.
- **Reuse.** A request reuses the longest chain of stored blocks its prompt starts with, never its last token
  (``addSequence``: "Ignore last token because it can't be recovered"), whole blocks only.
- **Retention.** ``KvCacheRetentionConfig``'s per-block priority and duration
  (``getPerBlockRetentionPriorityDuration``): a prompt block takes the token range its first token is in (none:
  ``nullopt``), a block past the prompt the decode priority and duration. A reused block is *claimed* with the
  request's value (``LRUEvictionPolicy::claimBlock``: "New priority values always override the previous value";
  a ``nullopt`` priority keeps the block's, and its duration is replaced, so cleared); a new block takes the
  value or the default 35. Stored blocks are *released* into the free queue of their priority
  (``releaseBlock``); a duration starts then, and when it has passed the block drops to the default priority
  at the back of that queue (``refresh``).
- **Eviction.** The pool evicts from the lowest priority's queue first, front first (``getFreeBlock``); a
  sequence's blocks are released leaf first, so its leaves go before the prefix they hang from. A block
  evicted from the device whose priority is at least ``secondary_offload_min_priority`` (default 30) moves to
  the host tier while ``host_cache_size`` has room for it (``canOffload`` in ``getFreeBlock``; the host tier
  evicts the same way, its blocks then lost); any other evicted block is lost, with the blocks that hung from
  it ("freeing all descendants"). A reused host block is onboarded (copied back to the device) when
  ``onboard_blocks`` (default True); without it the fake treats a host block as a miss (its own reading).
- **Capacity.** ``kv_cache_config.max_tokens`` tokens on the device (else :data:`DEFAULT_CACHE_TOKENS`), which
  a test may set smaller than the sessions' working set; ``host_cache_size`` bytes on the host at
  :data:`KV_BYTES_PER_TOKEN` a token.

Hooks for what watches the pool (KV cache events): :meth:`KvPool._stored`, :meth:`_removed`, :meth:`_offloaded`
and :meth:`_onboarded` are the one place each happens; each calls the ``listeners`` that have a method of that
name (``stored(blocks, tokens, ends)``, ``removed(keys)``, ``offloaded(keys)``, ``onboarded(keys)``).
"""

from __future__ import annotations

import hashlib
import heapq
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

__all__ = [
    "DEFAULT_CACHE_TOKENS",
    "DEFAULT_PRIORITY",
    "KV_BYTES_PER_TOKEN",
    "Block",
    "KvPool",
    "Reuse",
    "TurnRecord",
]

#: The device pool's size when ``kv_cache_config.max_tokens`` is not set (the fake has no GPU to measure).
DEFAULT_CACHE_TOKENS = 64 << 10
#: ``KvCacheRetentionConfig::kDefaultRetentionPriority``.
DEFAULT_PRIORITY = 35
#: ``kDefaultSecondaryOffloadMinPriority`` (``evictionPolicy.cpp``).
DEFAULT_OFFLOAD_MIN_PRIORITY = 30
#: Bytes of KV cache a token holds, for sizing the host tier: gpt-oss-120b's 18 full-attention layers x 8 KV
#: heads x 64 dims x (K, V) x 2 bytes (bf16) = 36,864 (half that in fp8). The sliding-window layers are not counted.
KV_BYTES_PER_TOKEN = 18 * 8 * 64 * 2 * 2
DEVICE, HOST = 0, 1
#: The most per-request records kept (``KvPool.turns``).
MAX_RECORDS = 1 << 17


class Block:
    """One stored block: its key (hash), parent, level, retention priority and duration (seconds), children."""

    __slots__ = ("children", "duration", "expires", "key", "level", "parent", "priority")

    def __init__(self, key: int, parent: Optional[int], priority: int, duration: Optional[float]) -> None:
        self.key, self.parent, self.priority, self.duration = key, parent, priority, duration
        self.level = DEVICE
        self.expires: Optional[float] = None
        self.children: Optional[set[int]] = None


class Reuse(NamedTuple):
    """What a request's prompt found: tokens reused from the device, and from the host (onboarded)."""

    device: int
    host: int

    @property
    def tokens(self) -> int:
        return self.device + self.host


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One request as the pool saw it (tests and the benchmark read these): its prompt's length, the tokens
    reused (device, host) and recomputed, its salt and its ``max_tokens`` (1: a one-token request, such as the
    server's KV-cache releases and prefills, not a turn)."""

    prompt_tokens: int
    reused_device: int
    reused_host: int
    salt: Optional[str]
    max_tokens: Optional[int] = None

    @property
    def recomputed(self) -> int:
        return self.prompt_tokens - self.reused_device - self.reused_host


def _salt_id(salt: Optional[str]) -> int:
    """A salt's id, the same in every process (``hash(str)`` is not)."""
    if salt is None:
        return 0
    return int.from_bytes(hashlib.blake2b(salt.encode("utf-8"), digest_size=8).digest(), "big") | 1


def block_retention(
    config: Any, index: int, block: int, prompt_len: int
) -> tuple[Optional[int], Optional[float]]:
    """The (priority, duration in seconds) block ``index`` gets from ``config`` (None: nullopt), as
    ``getPerBlockRetentionPriorityDuration`` gives it for a prompt block and the decode values past the prompt."""
    if config is None:
        return (None, None) if index * block < prompt_len else (DEFAULT_PRIORITY, None)
    start = index * block
    if start >= prompt_len:
        duration = config.decode_duration_ms
        return config.decode_retention_priority, None if duration is None else duration.total_seconds()
    for entry in config.token_range_retention_configs:
        end = prompt_len if entry.token_end is None else entry.token_end
        if entry.token_start <= start < end:
            duration = entry.duration_ms
            return entry.priority, None if duration is None else duration.total_seconds()
    return None, None


class KvPool:
    """The block pool of one KV-cache manager (one attention-DP rank), with its host tier."""

    def __init__(
        self,
        *,
        tokens_per_block: int = 32,
        device_tokens: int = DEFAULT_CACHE_TOKENS,
        host_bytes: int = 0,
        enable_block_reuse: bool = True,
        onboard_blocks: bool = True,
        secondary_offload_min_priority: Optional[int] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enable_block_reuse
        self.block = tokens_per_block
        self.capacity = [
            max(1, device_tokens // tokens_per_block),
            host_bytes // (KV_BYTES_PER_TOKEN * tokens_per_block),
        ]
        self.onboard = onboard_blocks
        self.offload_min = (
            DEFAULT_OFFLOAD_MIN_PRIORITY
            if secondary_offload_min_priority is None
            else secondary_offload_min_priority
        )
        self.clock = clock
        self.blocks: dict[int, Block] = {}
        self._queues: list[list[OrderedDict[int, None]]] = [
            [OrderedDict() for _ in range(101)] for _ in range(2)
        ]
        self._used = [0, 0]
        self._expiring: list[tuple[float, int]] = []
        self.listeners: list[Any] = []
        self.turns: deque[TurnRecord] = deque(maxlen=MAX_RECORDS)
        self.counts = {"stored": 0, "evicted": 0, "offloaded": 0, "onboarded": 0}

    @classmethod
    def from_config(cls, kv: Any, clock: Callable[[], float] = time.monotonic) -> KvPool:
        """The pool ``LLM(kv_cache_config=kv)`` builds (``llmapi/llm_args.py`` ``KvCacheConfig`` names)."""
        return cls(
            tokens_per_block=kv.tokens_per_block,
            device_tokens=kv.max_tokens or DEFAULT_CACHE_TOKENS,
            host_bytes=kv.host_cache_size or 0,
            enable_block_reuse=kv.enable_block_reuse,
            onboard_blocks=kv.onboard_blocks,
            secondary_offload_min_priority=kv.secondary_offload_min_priority,
            clock=clock,
        )

    # -- keys -------------------------------------------------------------------------------------------

    def keys(self, tokens: Sequence[int], salt: Optional[str] = None, known: Sequence[int] = ()) -> list[int]:
        """The chained keys of ``tokens``' whole blocks (``known``: keys of its first blocks, already computed)."""
        keys = list(known)
        parent = keys[-1] if keys else _salt_id(salt)
        block = self.block
        for end in range((len(keys) + 1) * block, len(tokens) + 1, block):
            parent = hash((parent, tuple(tokens[end - block : end])))
            keys.append(parent)
        return keys

    # -- what a request does ----------------------------------------------------------------------------

    def reuse(
        self,
        prompt: Sequence[int],
        salt: Optional[str] = None,
        retention: Any = None,
        max_tokens: Optional[int] = None,
    ) -> Reuse:
        """Claim the stored blocks ``prompt`` starts with (``loadOrAllocateBlocks``), onboarding host blocks; the
        tokens reused. The last prompt token is always computed."""
        if not self.enabled or len(prompt) < 2:
            self.turns.append(TurnRecord(len(prompt), 0, 0, salt, max_tokens))
            return Reuse(0, 0)
        self._refresh()
        device = host = 0
        for index, key in enumerate(self.keys(prompt[: len(prompt) - 1], salt)):
            found = self.blocks.get(key)
            if found is None or (found.level == HOST and not self.onboard):
                break
            priority, duration = block_retention(retention, index, self.block, len(prompt))
            self._claim(found, priority, duration)
            if found.level == HOST:
                self._onboard(found)
                host += self.block
            else:
                device += self.block
        self.turns.append(TurnRecord(len(prompt), device, host, salt, max_tokens))
        return Reuse(device, host)

    def store(
        self,
        tokens: Sequence[int],
        salt: Optional[str] = None,
        retention: Any = None,
        prompt_len: Optional[int] = None,
    ) -> None:
        """Release a finished request's whole blocks into the pool (``storeContextBlocks``/``releaseBlocks``): new
        ones added, each at its retention priority, leaf first; then evict past the device's capacity."""
        if not self.enabled:
            return
        self._refresh()
        keys = self.keys(tokens, salt)
        prompt = len(tokens) if prompt_len is None else prompt_len
        new: list[Block] = []
        ends: list[int] = []  # where each new block ends in ``tokens``
        parent: Optional[int] = None
        blocks: list[Block] = []
        for index, key in enumerate(keys):
            found = self.blocks.get(key)
            priority, duration = block_retention(retention, index, self.block, prompt)
            if found is None:
                found = Block(key, parent, DEFAULT_PRIORITY if priority is None else priority, duration)
                self.blocks[key] = found
                self._used[DEVICE] += 1
                if parent is not None:
                    above = self.blocks[parent]
                    if above.children is None:
                        above.children = set()
                    above.children.add(key)
                new.append(found)
                ends.append((index + 1) * self.block)
            else:
                self._claim(found, priority, duration)
                if found.level == HOST:  # onboarded; room is made once, below
                    self._move(found, DEVICE)
                    self._onboarded([found.key])
            blocks.append(found)
            parent = key
        for found in reversed(blocks):  # leaf first: a prefix is released after what extends it
            self._release(found)
        if new:
            self._stored(new, tokens, ends)
        self._evict(DEVICE)

    # -- the eviction policy ----------------------------------------------------------------------------

    def _claim(self, found: Block, priority: Optional[int], duration: Optional[float]) -> None:
        """``claimBlock``: out of its free queue, the request's priority (if any) and duration."""
        self._queues[found.level][found.priority].pop(found.key, None)
        if priority is not None:
            found.priority = priority
        found.duration, found.expires = duration, None

    def _release(self, found: Block) -> None:
        """``releaseBlock``: to the back of its priority's free queue; a duration starts now."""
        queue = self._queues[found.level][found.priority]
        queue.pop(found.key, None)
        queue[found.key] = None
        if found.duration is not None and found.priority != DEFAULT_PRIORITY:
            found.expires = self.clock() + found.duration
            heapq.heappush(self._expiring, (found.expires, found.key))

    def _refresh(self) -> None:
        """``refresh``: blocks whose duration has passed drop to the default priority, at the back of its queue."""
        now = self.clock()
        while self._expiring and self._expiring[0][0] <= now:
            expires, key = heapq.heappop(self._expiring)
            found = self.blocks.get(key)
            if found is None or found.expires != expires:
                continue  # gone, or claimed again since
            self._queues[found.level][found.priority].pop(key, None)
            found.priority, found.expires = DEFAULT_PRIORITY, None
            self._queues[found.level][DEFAULT_PRIORITY][key] = None

    def _victim(self, level: int) -> Optional[Block]:
        """The front of the lowest priority's non-empty free queue (``getFreeBlock``); None: every block there is
        held by a running request (the engine would not have scheduled more: the fake over-commits instead)."""
        for queue in self._queues[level]:
            if queue:
                return self.blocks[next(iter(queue))]
        return None

    def _evict(self, level: int) -> None:
        """Evict from ``level`` until it fits: lowest priority first, front first; to the host when allowed."""
        removed: list[int] = []
        offloaded: list[int] = []
        while self._used[level] > self.capacity[level]:
            victim = self._victim(level)
            if victim is None:
                break
            if level == DEVICE and victim.priority >= self.offload_min and self.capacity[HOST] > 0:
                self._move(victim, HOST)
                offloaded.append(victim.key)
                if self._used[HOST] > self.capacity[HOST]:
                    self._evict(HOST)
            else:
                self._drop(victim, removed)
        if offloaded:
            self._offloaded(offloaded)
        if removed:
            self._removed(removed)

    def _move(self, found: Block, level: int) -> None:
        """To the other tier; a free block stays free (at the back of its queue there), a held one held."""
        free = self._queues[found.level][found.priority].pop(found.key, False) is None
        self._used[found.level] -= 1
        found.level = level
        self._used[level] += 1
        if free:
            self._queues[level][found.priority][found.key] = None

    def _onboard(self, found: Block) -> None:
        """``onboardBlock``: a host block copied back to the device (room made there as any store makes it)."""
        self._move(found, DEVICE)
        self._onboarded([found.key])
        self._evict(DEVICE)

    def _drop(self, found: Block, removed: list[int]) -> None:
        """A block lost, with every block that hung from it (their prefix is gone); their keys onto ``removed``."""
        stack = [found]
        while stack:
            block = stack.pop()
            self._queues[block.level][block.priority].pop(block.key, None)
            self._used[block.level] -= 1
            del self.blocks[block.key]
            removed.append(block.key)
            if block.children:
                stack.extend(self.blocks[child] for child in block.children if child in self.blocks)
        above = self.blocks.get(found.parent) if found.parent is not None else None
        if above is not None and above.children:
            above.children.discard(found.key)

    # -- hooks: the one place each change happens ---------------------------------------------------------

    def _notify(self, name: str, *payload: Any) -> None:
        for listener in self.listeners:
            method = getattr(listener, name, None)
            if method is not None:
                method(*payload)

    def _stored(self, blocks: list[Block], tokens: Sequence[int], ends: list[int]) -> None:
        """New ``blocks`` stored, block i holding ``tokens[ends[i] - tokens_per_block : ends[i]]``."""
        self.counts["stored"] += len(blocks)
        self._notify("stored", blocks, tokens, ends)

    def _removed(self, keys: list[int]) -> None:
        self.counts["evicted"] += len(keys)
        self._notify("removed", keys)

    def _offloaded(self, keys: list[int]) -> None:
        self.counts["offloaded"] += len(keys)
        self._notify("offloaded", keys)

    def _onboarded(self, keys: list[int]) -> None:
        self.counts["onboarded"] += len(keys)
        self._notify("onboarded", keys)

    # -- what tests read --------------------------------------------------------------------------------

    def used(self, level: int = DEVICE) -> int:
        """Blocks held on the device (``DEVICE``) or the host (``HOST``)."""
        return self._used[level]

    def state(self, tokens: Sequence[int], salt: Optional[str] = None) -> list[tuple[int, int]]:
        """(level, priority) of each stored block ``tokens`` starts with, up to the first one not stored."""
        self._refresh()
        out = []
        for key in self.keys(tokens, salt):
            found = self.blocks.get(key)
            if found is None:
                break
            out.append((found.level, found.priority))
        return out
