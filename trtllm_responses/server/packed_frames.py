"""A finished background response's recorded SSE frames, packed into one buffer.

While a response runs, each frame is a bytes object of its own (a few hundred bytes: the allocator's
small-object arenas, plus a header and a deque slot each). Once it ended they never change, so they are
joined into one buffer and an offset table: what the process-wide budget counts is then what is held
(the buffer's bytes and 8 bytes a frame), and forgetting the run gives the buffer back to the system
at once (a large allocation), where thousands of small frees leave arenas that other runs' frames share.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from itertools import accumulate

__all__ = ["PackedFrames"]


class PackedFrames:
    """Frames in one buffer, read like the deque they replace (``len``, ``[i]``; ``join`` for a range)."""

    __slots__ = ("_buffer", "_offsets", "_start")

    def __init__(self, frames: Iterable[bytes]) -> None:
        frames = list(frames)
        self._buffer = b"".join(frames)
        self._offsets = array("Q", [0, *accumulate(len(f) for f in frames)])
        self._start = 0

    def __len__(self) -> int:
        return len(self._offsets) - 1 - self._start

    def __getitem__(self, index: int) -> bytes:
        if not 0 <= index < len(self):
            raise IndexError(index)
        at = self._start + index
        return self._buffer[self._offsets[at] : self._offsets[at + 1]]

    def join(self, start: int, end: int) -> bytes:
        """Frames ``start`` to ``end`` (exclusive) as one bytes: one copy."""
        return self._buffer[self._offsets[self._start + start] : self._offsets[self._start + end]]

    def nbytes_of(self, start: int, end: int) -> int:
        """What frames ``start`` to ``end`` (exclusive) hold: their bytes and their offsets."""
        offsets = self._offsets
        return offsets[self._start + end] - offsets[self._start + start] + offsets.itemsize * (end - start)

    @property
    def nbytes(self) -> int:
        """What it holds: the buffer and the offset table."""
        return len(self._buffer) + self._offsets.itemsize * len(self._offsets)
