"""A replayed body parsed by what follows its last turn's bytes (request/replay_prefix.py) is the body a whole
parse gives, value for value, and its errors are the whole parse's.

A property test over seeded random sessions of bodies (random items of every JSON shape, non-ASCII and
escapes included), each turn one of: the last input plus new items (a replay), an earlier item changed,
the head changed, written with spaces (not found: parsed whole), and the hostile tails a prefix could be
fooled by (a key ``""``, a second ``input``, a key repeating one before ``input``, trailing bytes, nesting
too deep, too many values). Two decoders read every body, one with remembered prefixes and one without:
their results (data, counts, typed items) or their errors must be equal. ``TRTLLM_RESPONSES_PREFIX_SEEDS``
raises the number of sessions (default 200).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from typing import Any

import orjson
import pytest

from trtllm_responses.core import InvalidRequestError
from trtllm_responses.request import BodyDecoder, JsonBody, ReplayPrefixes, parse_items
from trtllm_responses.request.body import MAX_JSON_DEPTH

SEEDS = int(os.environ.get("TRTLLM_RESPONSES_PREFIX_SEEDS", "200"))
MIN_BYTES = 512  # small bodies, so that sessions of a few turns are remembered
WORDS = [
    "tool",
    "ça",
    "日本語",
    'quote "q"',
    "back\\slash",
    "tab\there",
    "line\nbreak",
    "emoji 🚀",
    "{[,]}",
    "",
]


def value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([rng.choice(WORDS), rng.randint(-(10**6), 10**6), True, None, 1.5])
    if roll < 0.7:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(WORDS) + str(i): value(rng, depth + 1) for i in range(rng.randint(0, 3))}


def item(rng: random.Random, n: int) -> dict[str, Any]:
    kind = rng.choice(["message", "function_call", "function_call_output", "reasoning", None])
    if kind is None:
        return {"role": "user", "content": f"turn {n}: " + " ".join(rng.choice(WORDS) for _ in range(30))}
    return {
        "type": kind,
        "id": f"it_{n}",
        "payload": value(rng, 0),
        "text": " ".join(rng.choices(WORDS, k=20)),
    }


def dumps(body: dict[str, Any]) -> bytes:
    return orjson.dumps(body)


def variant(rng: random.Random, head: dict[str, Any], items: list[Any], tail: dict[str, Any]) -> bytes:
    """This turn's body: mostly a replay, sometimes what a prefix could be fooled by."""
    base = {**head, "input": items, **tail}
    roll = rng.randrange(12)
    if roll == 0:  # spaces between tokens: the items are not found as their compact JSON
        return json.dumps(base).encode()
    if roll == 1:  # a key "" after the items
        return dumps(base)[:-1] + b',"":[0,1]}'
    if roll == 2:  # a second input after the first
        return dumps(base)[:-1] + b',"input":[{"role":"user","content":"second"}]}'
    if roll == 3:  # a key of the head again after the items: the last one wins
        key = next(iter(head))
        return dumps(base)[:-1] + b"," + orjson.dumps(key) + b':"again"}'
    if roll == 4:  # bytes after the object
        return dumps(base) + b" x"
    if roll == 5:  # a new item nested deeper than allowed
        deep: Any = "leaf"
        for _ in range(MAX_JSON_DEPTH):
            deep = [deep]
        return dumps({**head, "input": [*items, {"role": "user", "content": deep}], **tail})
    if roll == 6:  # the array left open
        return dumps(base)[: -len(dumps(tail)) - 1] if tail else dumps(base)[:-2]
    if roll == 7 and items:  # an earlier item changed: the prefix holds up to it
        i = rng.randrange(len(items))
        changed = [*items[:i], {**items[i], "changed": True}, *items[i + 1 :]]
        return dumps({**head, "input": changed, **tail})
    if roll == 8:  # whitespace between the items: still JSON, not found
        return dumps(base).replace(b"},{", b"}, {", 1)
    return dumps(base)


async def outcome(decoder: BodyDecoder, raw: bytes) -> Any:
    try:
        body = await decoder.decode(raw)
    except InvalidRequestError as exc:
        return ("error", exc.message, exc.param, exc.code)
    return body


def same(a: JsonBody, b: JsonBody) -> None:
    assert a.data == b.data
    assert list(a.data) == list(b.data)  # keys in the same order
    assert (a.size, a.values) == (b.size, b.values)
    items = a.data.get("input")
    if a.items is not None:  # typed as a whole parse types them
        expected = parse_items(items)
        assert [type(i) for i in a.items] == [type(i) for i in expected]
        assert [i.data for i in a.items] == [i.data for i in expected]


async def run_session(seed: int, memo: BodyDecoder, whole: BodyDecoder) -> int:
    rng = random.Random(seed)
    head = {"model": "m", "instructions": " ".join(rng.choices(WORDS, k=40)), "store": False}
    if rng.random() < 0.5:
        head["tools"] = [{"type": "function", "name": "f", "parameters": value(rng, 0)}]
    tail = {"stream": True, "prompt_cache_key": f"s{seed}"} if rng.random() < 0.7 else {}
    items: list[Any] = []
    compared = 0
    for turn in range(rng.randint(3, 9)):
        items += [item(rng, turn * 10 + k) for k in range(rng.randint(1, 3))]
        if rng.random() < 0.1:
            head = {**head, "instructions": head["instructions"] + " changed"}
        raw = variant(rng, head, items, tail)
        a = await outcome(memo, raw)
        b = await outcome(whole, raw)
        if isinstance(a, tuple) or isinstance(b, tuple):
            assert a == b, (seed, turn)
            continue
        same(a, b)
        compared += 1
    return compared


@pytest.mark.parametrize("budget", [64 << 20, 24 << 10])  # the second evicts all the time
def test_a_replay_decoded_from_a_prefix_is_the_whole_parse(budget: int) -> None:
    prefixes = ReplayPrefixes(budget, min_bytes=MIN_BYTES)
    memo = BodyDecoder(prefixes=prefixes)
    whole = BodyDecoder()

    async def main() -> int:
        return sum([await run_session(seed, memo, whole) for seed in range(SEEDS)])

    compared = asyncio.run(main())
    assert compared >= SEEDS
    # most sessions' replays were decoded from a prefix; with the small budget, some
    assert prefixes.hits >= (SEEDS if budget > 1 << 20 else SEEDS // 10)
    assert prefixes.bytes <= budget
    assert prefixes.reused_items > prefixes.hits  # a hit takes one item or more, most take several


def test_a_prefix_is_found_past_its_bucket_and_typed_items_are_the_same_objects() -> None:
    """The turn after a remembered one takes its items as they are (the objects item caches are kept on)."""
    prefixes = ReplayPrefixes(64 << 20, min_bytes=MIN_BYTES)
    decoder = BodyDecoder(prefixes=prefixes)
    rng = random.Random(7)
    items = [item(rng, n) for n in range(6)]
    head = {"model": "m", "instructions": "x" * 600}

    async def main() -> tuple[JsonBody, JsonBody]:
        first = await decoder.decode(dumps({**head, "input": items}))
        second = await decoder.decode(dumps({**head, "input": [*items, item(rng, 99)], "stream": True}))
        return first, second

    first, second = asyncio.run(main())
    assert prefixes.hits == 1 and prefixes.reused_items == len(items)
    assert first.items is not None and second.items is not None
    assert all(a is b for a, b in zip(first.items, second.items[: len(items)], strict=True))
    assert second.data["stream"] is True and len(second.data["input"]) == len(items) + 1


def test_too_many_values_after_a_prefix_is_the_whole_parse_error() -> None:
    prefixes = ReplayPrefixes(64 << 20, min_bytes=MIN_BYTES)
    memo = BodyDecoder(max_values=400, prefixes=prefixes)
    whole = BodyDecoder(max_values=400)
    head = {"model": "m", "instructions": "y" * 600}
    items = [{"role": "user", "content": "hello"}]

    async def main() -> tuple[Any, Any]:
        await memo.decode(dumps({**head, "input": items}))
        raw = dumps({**head, "input": [*items, {"role": "user", "content": [{}] * 500}]})
        return await outcome(memo, raw), await outcome(whole, raw)

    a, b = asyncio.run(main())
    assert a == b and a[3] == "too_many_json_values"


@pytest.mark.parametrize("budget", [256 << 10, 1 << 20])
def test_prefixes_stay_within_their_budget_over_a_thousand_sessions(budget: int) -> None:
    """1,000 distinct sessions of two turns each, ~12 KB a body: far more than the budget, which holds."""
    prefixes = ReplayPrefixes(budget, min_bytes=4096)
    decoder = BodyDecoder(prefixes=prefixes)

    async def main() -> int:
        most = 0
        for s in range(1000):
            rng = random.Random(s)
            items = [{"role": "user", "content": f"session {s}: " + " ".join(rng.choices(WORDS, k=400))}]
            for turn in range(2):
                items.append(
                    {"role": "user", "content": f"turn {turn}: " + " ".join(rng.choices(WORDS, k=400))}
                )
                await decoder.decode(dumps({"model": "m", "input": items}))
                most = max(most, prefixes.bytes)
        return most

    most = asyncio.run(main())
    assert 0 < most <= budget
    assert prefixes.hits >= 900  # every session's second turn was found (some buckets evicted)
    assert len(prefixes) < 1000  # it evicted: 1,000 sessions were remembered in all


def test_a_partial_match_whose_own_entry_evicts_it() -> None:
    """Remembering a body that repeats an entry in part may evict that entry (the least recently used, over
    the budget): the body is still decoded, and the budget held."""
    prefixes = ReplayPrefixes(1 << 30, min_bytes=MIN_BYTES)
    decoder = BodyDecoder(prefixes=prefixes)
    rng = random.Random(3)
    items = [item(rng, n) for n in range(4)]

    def body(name: str, its: list[Any]) -> bytes:
        return dumps({"model": "m", "instructions": name * 600, "input": its})

    async def main() -> JsonBody:
        await decoder.decode(body("x", items))  # the entry a later body repeats in part: least recently used
        for name in "abcd":  # four others, in buckets of their own
            await decoder.decode(body(name, items))
        prefixes.max_bytes = prefixes.bytes  # full: one more entry evicts the least recently used
        return await decoder.decode(body("x", [*items[:2], {**items[2], "changed": 1}, items[3]]))

    decoded = asyncio.run(main())
    assert prefixes.hits == 1 and prefixes.reused_items == 2
    assert decoded.data == orjson.loads(body("x", [*items[:2], {**items[2], "changed": 1}, items[3]]))
    assert prefixes.bytes <= prefixes.max_bytes


def test_what_is_not_remembered() -> None:
    """Each bound of its row in docs/limits.md#hostile-input-and-limits, crossed: bodies under min_bytes, a fifth body alike in its first min_bytes,
    more than MAX_ITEMS items, more than MAX_VALUES values."""
    from trtllm_responses.request.replay_prefix import BUCKET_ENTRIES, MAX_ITEMS, MAX_VALUES

    prefixes = ReplayPrefixes(1 << 30, min_bytes=4096)
    decoder = BodyDecoder(max_values=1 << 20, prefixes=prefixes)
    head = {"model": "m", "instructions": "z" * 5000}  # the first 4,096 bytes of every body below

    async def count_after(body: dict[str, Any]) -> int:
        await decoder.decode(dumps(body))
        return len(prefixes)

    async def main() -> None:
        assert await count_after({"model": "m", "input": [{"role": "user", "content": "small"}]}) == 0
        for i in range(BUCKET_ENTRIES + 1):
            kept = await count_after({**head, "input": [{"role": "user", "content": f"body {i}"}]})
        assert kept == BUCKET_ENTRIES
        many = [{"role": "user", "content": "x"} for _ in range(MAX_ITEMS + 1)]
        assert await count_after({"model": "m", "other": "y" * 5000, "input": many}) == BUCKET_ENTRIES
        values = [{"role": "user", "content": [0] * (MAX_VALUES // 10)} for _ in range(11)]
        assert await count_after({"model": "m", "other": "w" * 5000, "input": values}) == BUCKET_ENTRIES
        assert (
            await count_after({"model": "m", "other": "v" * 5000, "input": values[:9]}) == BUCKET_ENTRIES + 1
        )

    asyncio.run(main())
