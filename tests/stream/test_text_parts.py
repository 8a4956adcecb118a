"""TextParts: an item's text kept a few hundred deltas apart at most, whatever its length."""

from __future__ import annotations

import sys

import pytest

from trtllm_responses.stream.item import PACK, TextParts


@pytest.mark.parametrize("count", [0, 1, PACK - 1, PACK, PACK + 1, 3 * PACK + 5])
def test_text_is_every_delta_in_order(count: int) -> None:
    parts = TextParts()
    deltas = [f"<{i}>" for i in range(count)]
    for delta in deltas:
        parts.append(delta)
    assert parts.text() == "".join(deltas)


def test_a_long_text_keeps_few_small_objects_alive() -> None:
    # Before: one string a delta until the item ended (100k tokens: 100k strings of the small-object
    # allocator, whose arenas outlived the response).
    parts = TextParts()
    blocks = sys.getallocatedblocks()
    for i in range(100_000):
        parts.append(f" w{i}")
    assert sys.getallocatedblocks() - blocks < 2 * PACK + 100_000 // PACK + 64
    assert parts.text().split() == [f"w{i}" for i in range(100_000)]
