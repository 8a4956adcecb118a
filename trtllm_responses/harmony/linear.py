"""Tokenization in linear time, whatever the text.

o200k's byte-pair merge is quadratic in a piece's length (100 KB of ``=`` took 10 s; 1 MB of ``a``
overflowed the regex engine's stack). Text with no run longer than :data:`MAX_RUN` characters is
encoded by harmony as it is, token for token; a longer run is cut where a piece boundary is certain
(after a letter or digit, before punctuation), and only a run with no such boundary is cut by force
(tokens may differ there, the text never). Why that is exact: docs/limits.md#hostile-input-and-limits
("Why 256 characters leaves ordinary text's tokens unchanged").
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import regex

__all__ = ["LONG_RUN", "MAX_RUN", "has_long_run", "linear_encode", "split_points"]

#: Longest run (whitespace, or non-whitespace non-digit) handed to the tokenizer whole.
MAX_RUN = 256

_WORD = r"[^\p{White_Space}\p{N}]"
_SPACE = r"\p{White_Space}"
# A whole run of at least MAX_RUN characters: anchored at the run's start (the lookbehind), so the
# search is linear (no restart inside a run).
LONG_RUN = regex.compile(
    rf"(?P<word>(?<!{_WORD}){_WORD}{{{MAX_RUN},}})|(?P<space>(?<!{_SPACE}){_SPACE}{{{MAX_RUN},}})"
)
# Where o200k certainly ends a piece inside a word run: a letter or digit, then punctuation that is
# not a combining mark (marks join letter pieces) nor an apostrophe (contractions: 's, 't …).
_CERTAIN_BOUNDARY = regex.compile(r"(?<=[\p{L}\p{N}])(?=[^\p{White_Space}\p{L}\p{N}\p{M}'])")


# ASCII text is classified a byte at a time (``bytes.translate``), then searched for a run with
# ``bytes.__contains__``: ~50x faster than LONG_RUN on a tool's output, with the same answer. In ASCII,
# \p{White_Space} is exactly \t \n \v \f \r and the space, and \p{N} exactly 0-9.
_ASCII_CLASS = bytes(
    ord(" ") if chr(i) in "\t\n\v\f\r " else ord("0") if "0" <= chr(i) <= "9" else ord("x")
    for i in range(128)
) + bytes(128)
_ASCII_WORD_RUN = b"x" * MAX_RUN
_ASCII_SPACE_RUN = b" " * MAX_RUN


def has_long_run(text: str) -> bool:
    """Whether ``text`` has a run longer than the tokenizer may take whole (LONG_RUN finds one)."""
    if len(text) < MAX_RUN:
        return False
    if text.isascii():
        classes = text.encode("ascii").translate(_ASCII_CLASS)
        return _ASCII_WORD_RUN in classes or _ASCII_SPACE_RUN in classes
    return LONG_RUN.search(text) is not None


def split_points(text: str) -> list[int]:
    """Offsets at which to cut ``text`` so that no part holds a run longer than :data:`MAX_RUN`."""
    cuts: list[int] = []
    for run in LONG_RUN.finditer(text):
        start, end = run.span()
        boundaries: list[int] = []
        if run.lastgroup == "word":
            boundaries = [m.start() for m in _CERTAIN_BOUNDARY.finditer(text, start + 1, end)]
        position = start
        while end - position > MAX_RUN:
            # The furthest certain boundary within reach; else a forced cut.
            i = bisect.bisect_right(boundaries, position + MAX_RUN) - 1
            cut = boundaries[i] if i >= 0 and boundaries[i] > position else position + MAX_RUN
            cuts.append(cut)
            position = cut
    return cuts


def linear_encode(encode: Callable[[str], list[int]], text: str) -> list[int]:
    """``encode(text)`` in linear time: parts without long runs, each encoded by ``encode``."""
    if not has_long_run(text):
        return encode(text)
    tokens: list[int] = []
    previous = 0
    for cut in split_points(text):
        tokens += encode(text[previous:cut])
        previous = cut
    tokens += encode(text[previous:])
    return tokens
