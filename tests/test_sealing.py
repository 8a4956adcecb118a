"""Encrypted content, pure: round trips, the kind is authenticated, other keys and edits are refused."""

from __future__ import annotations

import pytest

from trtllm_responses.errors import InvalidRequestError
from trtllm_responses.sealing import SUMMARY_PREFIX, ContentSealer, unseal_items

SEALER = ContentSealer(b"s" * 32)


def test_round_trip_and_fresh_nonces() -> None:
    a, b = SEALER.seal_reasoning("think"), SEALER.seal_reasoning("think")
    assert a != b and a.startswith("v1.")
    assert SEALER.open("reasoning", a, "x") == {"text": "think"}


def test_the_kind_is_authenticated() -> None:
    summary = SEALER.seal_summary("all done")
    with pytest.raises(InvalidRequestError) as bad:
        unseal_items([{"type": "reasoning", "encrypted_content": summary}], SEALER)
    assert bad.value.code == "invalid_encrypted_content" and bad.value.param == "input[0].encrypted_content"


def test_another_key_is_refused() -> None:
    blob = ContentSealer(b"o" * 32).seal_reasoning("x")
    with pytest.raises(InvalidRequestError):
        SEALER.open("reasoning", blob, "input[0].encrypted_content")


@pytest.mark.parametrize("blob", [None, 3, "", "v1.", "v1.!!!", "v2." + "A" * 40, "v1." + "A" * 8])
def test_malformed_blobs_are_400_not_500(blob: object) -> None:
    with pytest.raises(InvalidRequestError):
        SEALER.open("reasoning", blob, "p")


def test_unseal_items_opens_what_is_sealed_and_nothing_else() -> None:
    plain = [{"role": "user", "content": "hi"}, {"type": "reasoning", "summary": [], "content": None}]
    assert unseal_items(plain, SEALER) is plain  # nothing to open: no copy
    items = [
        {"type": "compaction", "id": "cmp_1", "encrypted_content": SEALER.seal_summary("S")},
        {"type": "reasoning", "summary": [], "encrypted_content": SEALER.seal_reasoning("R")},
    ]
    opened = unseal_items(items, SEALER)
    assert opened[0] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": SUMMARY_PREFIX + "S"}],
    }
    assert opened[1]["content"] == [{"type": "reasoning_text", "text": "R"}]
    assert items[1].get("content") is None  # the caller's items are not changed
