"""Replayed bodies parsed by what is new: a stateless agent's turn begins with its last turn's bytes.

A client that replays its history (Codex, the Agents SDK: ``store: false``, the whole ``input`` every
turn) sends a body whose bytes begin as its last body's did, up to the end of that body's last input
item: the head (model, instructions, ...) and the items, re-sent as they were serialized, then the
model's last output items and what is new. Parsing, counting, depth-checking and typing those repeated
bytes again costs ~1 ms per 100k tokens of history on every turn (``benchmarks/RESULTS.md``, "Agent
sessions"). :class:`ReplayPrefixes` keeps, for recent large bodies, their bytes up to the end of their
last input item, where each item ends, the head and the items as parsed and typed. A body whose bytes
begin with one of those, up to an item's end, takes that head and those items as they are, and only its
remaining bytes are parsed, counted and checked, as ``{"":[0`` followed by them: at an item's end the
parser is inside the top-level object, inside the ``input`` array, after a value, and so it is in that
text after the ``0``, so the rest parses to what a whole parse would give it (the new items, then the
fields after ``input``; a key there repeating one before ``input`` wins, as it does in a whole parse).

Byte equality is the only test, so the result is the whole parse's, value for value: any doubt (a
field ``""`` or a second ``input`` after the items, the rest not parsing, nesting too deep, too many
values, a partial match whose count would cost a scan) answers None, and the caller parses the body
whole, giving its usual errors. Where each item ends is learnt without a parser of our own: an item's
compact JSON (``orjson.dumps``) must be found at its place in the body, which is how Codex (serde),
the ``openai`` SDK (httpx's compact ``json.dumps``) and orjson itself write; a body written another
way (indented, ASCII-escaped) is parsed whole every turn, as before.

Bounded: only bodies of at least :data:`MIN_BYTES` are remembered or looked up (smaller ones parse in
a few hundred microseconds); entries are found by their tenant's scope and their first :data:`MIN_BYTES`
(at most :data:`BUCKET_ENTRIES` a bucket: a tenant's body repeats only its own tenant's prefixes, so
neither ``hits`` nor how fast a body parses says what another tenant sent,
docs/tenants.md#sealed-content-kv-prefixes-and-caches) and held within ``max_bytes`` (each counts its bytes plus
``VALUE_BYTES`` a value, three times over: ``_Entry.nbytes``), least recently used first out. Not thread-safe: the event loop's.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..core import InvalidRequestError
from .body import VALUE_BYTES, JsonBody, check_depth, structure_count
from .items import InputItem, parse_item

__all__ = [
    "BUCKET_ENTRIES",
    "DEFAULT_REPLAY_PREFIX_BYTES",
    "MAX_ITEMS",
    "MAX_VALUES",
    "MIN_BYTES",
    "ReplayPrefixes",
]

#: Default bound of what the remembered prefixes hold.
DEFAULT_REPLAY_PREFIX_BYTES = 128 << 20
#: Bodies smaller than this are parsed whole and not remembered; entries are found by this many first bytes.
MIN_BYTES = 64 << 10
#: Entries kept under one bucket (bodies alike in their first MIN_BYTES), most recent first tried.
BUCKET_ENTRIES = 4
#: Bodies with more input items, or more values, than these are not remembered (learning where their items
#: end is a step per item, on the loop).
MAX_ITEMS = 4096
MAX_VALUES = 1 << 16

_SEPARATOR = re.compile(rb"[ \t\r\n]*,[ \t\r\n]*")
_OPEN = re.compile(rb"[ \t\r\n]*")
# A key "" after the remembered prefix would meet the "" the rest is parsed under: parsed whole instead.
_EMPTY_KEY = re.compile(rb'""[ \t\r\n]*:')
#: Where an entry is found: its tenant's scope and the hash of its first MIN_BYTES.
_Bucket = tuple[str, int]


def _count(raw: bytes, start: int, end: int) -> int:
    """``structure_count`` of ``raw[start:end]``, whole, without copying it."""
    return raw.count(b"{", start, end) + raw.count(b"[", start, end) + raw.count(b",", start, end)


@dataclass(frozen=True, slots=True, eq=False, repr=False)  # its bytes are no one's to read
class _Entry:
    """A remembered body: its bytes up to the end of its last input item, and what they parse to."""

    bucket: _Bucket
    #: The body's bytes up to the end of its last input item.
    prefix: bytes
    #: The fields before ``input``, as parsed.
    head: dict[str, Any]
    #: Where each input item ends in ``prefix`` (the offset after it).
    ends: tuple[int, ...]
    #: The input items as parsed, and typed.
    items: tuple[Any, ...]
    typed: tuple[InputItem, ...]
    #: ``structure_count(prefix[:end])`` at each end: the value budget's count of those bytes.
    counts: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """What it holds, at most: the bytes, the strings parsed from them, each item's JSON (``InputItem.json``,
        shared with the render cache's keys) and VALUE_BYTES a value (3.2x the bytes measured, 476 KB of them)."""
        return 3 * len(self.prefix) + VALUE_BYTES * self.counts[-1]

    def matched(self, raw: bytes) -> int:
        """How many of this entry's items ``raw`` repeats: its bytes equal up to that item's end."""
        if raw.startswith(self.prefix):
            return len(self.ends)
        ends = self.ends
        view = memoryview(self.prefix)
        lo, hi = 0, len(ends) - 1  # raw repeats items[:lo]; not items[:hi + 1] (all of them: tested above)
        equal = 0  # raw[:equal] == prefix[:equal]: only the bytes after it are compared again
        while lo < hi:
            mid = (lo + hi) // 2
            if raw.startswith(view[equal : ends[mid]], equal):
                lo, equal = mid + 1, ends[mid]
            else:
                hi = mid
        return lo


class ReplayPrefixes:
    """The prefixes of recent large bodies (above): ``decode`` a body by what is new, ``remember`` one
    parsed whole."""

    def __init__(self, max_bytes: int = DEFAULT_REPLAY_PREFIX_BYTES, min_bytes: int = MIN_BYTES) -> None:
        self.max_bytes = max_bytes
        #: Bodies smaller than this are not remembered nor looked up (tests lower it).
        self.min_bytes = min_bytes
        self.bytes = 0
        self._buckets: dict[_Bucket, list[_Entry]] = {}
        self._lru: OrderedDict[_Entry, None] = OrderedDict()
        #: Bodies decoded from a prefix, and their items taken as they were (for tests and benchmarks).
        self.hits = 0
        self.reused_items = 0

    def __len__(self) -> int:
        return len(self._lru)

    def decode(self, raw: bytes, max_values: int, inline_values: int, scope: str = "") -> JsonBody | None:
        """``raw`` decoded from the longest remembered prefix it repeats, and remembered; None when it repeats
        none, or when anything is in doubt (the caller decodes it whole, with its errors). Only what follows
        the prefix is counted against ``inline_values`` (what the loop parses) and, with the prefix's count,
        ``max_values``. Only prefixes remembered for ``scope`` (the tenant's) are looked at."""
        if len(raw) < self.min_bytes:
            return None
        bucket = (scope, hash(raw[: self.min_bytes]))
        best, count = None, 0
        for entry in self._buckets.get(bucket, ()):
            n = entry.matched(raw)
            if n > count:
                best, count = entry, n
                if n == len(entry.ends):
                    break
        if best is None:
            return None
        end = best.ends[count - 1]
        values = best.counts[count - 1]
        rest = raw[end:]
        if _EMPTY_KEY.search(rest) is not None:
            return None
        added = structure_count(rest, inline_values)
        if added > inline_values or values + added > max_values:
            return None
        try:
            tail = orjson.loads(b'{"":[0' + rest)
        except orjson.JSONDecodeError:
            return None
        new = tail.pop("")[1:]
        if "input" in tail:  # a second "input": the last one is the input, as in a whole parse
            return None
        try:
            check_depth({"input": new, **tail})
        except InvalidRequestError:
            return None
        data = {**best.head, "input": [*best.items[:count], *new], **tail}
        self.hits += 1
        self.reused_items += count
        typed = self._learn(
            raw,
            bucket,
            best.head,
            best.ends[:count],
            best.counts[:count],
            best.items[:count],
            best.typed[:count],
            new,
        )
        if count == len(best.ends) and typed is not None:
            self._forget(best)  # the new entry repeats all of it
        elif best in self._lru:  # (admitting the new entry may have evicted it)
            self._lru.move_to_end(best)
        return JsonBody(data, len(raw), values + added, typed)

    def remember(self, raw: bytes | str, body: JsonBody, scope: str = "") -> JsonBody:
        """``body`` (``raw`` parsed whole) remembered for ``scope`` when it is large and its items are found in
        it; the body, with its items typed when they were."""
        items = body.data.get("input")
        if (
            not isinstance(raw, bytes)
            or len(raw) < self.min_bytes
            or not isinstance(items, list)
            or not items
        ):
            return body
        if len(items) > MAX_ITEMS or body.values > MAX_VALUES or not isinstance(items[0], dict):
            return body
        first = orjson.dumps(items[0])
        at = raw.find(first)
        if at < 0:
            return body
        bracket = raw.rfind(b"[", 0, at)
        if bracket < 0 or _OPEN.fullmatch(raw, bracket + 1, at) is None:
            return body
        try:  # the bytes before the array must be the head of an object whose last key is "input"
            head = orjson.loads(raw[:bracket] + b"0}")
        except orjson.JSONDecodeError:
            return body
        if not isinstance(head, dict) or next(reversed(head), None) != "input" or head.pop("input") != 0:
            return body
        counts = (_count(raw, 0, at),)
        typed = self._learn(raw, (scope, hash(raw[: self.min_bytes])), head, (at,), counts, (), (), items)
        if typed is None or len(typed) != len(items):
            return body
        return JsonBody(body.data, body.size, body.values, typed)

    # -- internals ---------------------------------------------------------------------------

    def _learn(
        self,
        raw: bytes,
        bucket: _Bucket,
        head: dict[str, Any],
        placed: Sequence[int],
        counted: Sequence[int],
        items: Sequence[Any],
        typed: Sequence[InputItem],
        new: Sequence[Any],
    ) -> tuple[InputItem, ...] | None:
        """Remember ``raw``'s prefix: ``items`` (typed ``typed``) end at ``placed``, where the bytes up to them
        count ``counted`` (with no items, ``placed[0]`` is where the first new one begins, ``counted[0]`` the
        count of the bytes before it), then ``new`` follow, each found at its place as its compact JSON; the
        typed items of the whole input when every new one was found and typed, else None (what was found is
        remembered all the same)."""
        at = placed[-1]
        kept_items = list(items)
        kept_typed = list(typed)
        ends = list(placed) if items else []
        counts = list(counted) if items else []
        count = counted[-1]
        pos = at
        complete = True
        for i, item in enumerate(new):
            if not isinstance(item, dict):
                complete = False
                break
            if kept_items:
                sep = _SEPARATOR.match(raw, pos)
                if sep is None:
                    complete = False
                    break
                pos = sep.end()
            text = orjson.dumps(item)
            if not raw.startswith(text, pos):
                complete = False
                break
            try:
                kept_typed.append(parse_item(item, f"input[{len(items) + i}]"))
            except InvalidRequestError:
                complete = False
                break
            count += _count(raw, ends[-1] if ends else at, pos + len(text))
            pos += len(text)
            ends.append(pos)
            counts.append(count)
            kept_items.append(item)
        if not ends or ends[-1] < self.min_bytes or len(ends) > MAX_ITEMS:
            return tuple(kept_typed) if complete else None
        entry = _Entry(
            bucket, raw[: ends[-1]], head, tuple(ends), tuple(kept_items), tuple(kept_typed), tuple(counts)
        )
        self._admit(entry)
        return tuple(kept_typed) if complete else None

    def _admit(self, entry: _Entry) -> None:
        if entry.nbytes > self.max_bytes // 4:
            return
        bucket = self._buckets.setdefault(entry.bucket, [])
        bucket.insert(0, entry)
        self._lru[entry] = None
        self.bytes += entry.nbytes
        while len(bucket) > BUCKET_ENTRIES:
            self._forget(bucket[-1])
        while self.bytes > self.max_bytes and self._lru:
            self._forget(next(iter(self._lru)))

    def _forget(self, entry: _Entry) -> None:
        if entry not in self._lru:
            return
        del self._lru[entry]
        self.bytes -= entry.nbytes
        bucket = self._buckets.get(entry.bucket)
        if bucket is not None:
            bucket.remove(entry)
            if not bucket:
                del self._buckets[entry.bucket]
