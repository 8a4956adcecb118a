"""The chat writer's stop-string matcher, against a plain reading of the same text (no server)."""

from __future__ import annotations

import random

from trtllm_responses.server.dialects.edge import StopMatcher


def reference(pieces: list[str], stops: list[str]) -> str:
    """What a stream cut at stop strings says: after each piece, the text before the earliest stop string."""
    text = ""
    for piece in pieces:
        text += piece
        found = [text.find(s) for s in stops if s in text]
        if found:
            return text[: min(found)]
    return text


def matched(pieces: list[str], stops: list[str]) -> str:
    matcher = StopMatcher(stops)
    out = ""
    for piece in pieces:
        text, stopped = matcher.feed(piece)
        out += text
        if stopped:
            return out
    return out + matcher.flush()


def test_stop_strings_split_anywhere_over_the_pieces() -> None:
    rng = random.Random(21)
    for _ in range(5000):
        stops = [
            "".join(rng.choice("ab c") for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 4))
        ]
        text = "".join(rng.choice("ab c") for _ in range(rng.randint(0, 40)))
        pieces, i = [], 0
        while i < len(text):
            size = rng.randint(1, 5)
            pieces.append(text[i : i + size])
            i += size
        assert matched(pieces, stops) == reference(pieces, stops), (pieces, stops)


def test_text_that_may_begin_a_stop_string_is_held_back_only_until_it_cannot() -> None:
    matcher = StopMatcher(["</end>"])
    assert matcher.feed("Hello </e") == ("Hello ", False)
    assert matcher.feed("x") == ("</ex", False)
    assert matcher.feed("done </en") == ("done ", False)
    assert matcher.feed("d> more") == ("", True)
