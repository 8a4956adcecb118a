"""A background response's recorded SSE frames, kept in a few large buffers instead of one object each.

A frame is a few hundred bytes. Kept as a bytes object of its own (what this replaced), each cost a
header and a deque slot besides its bytes, and lived in the allocator's small-object arenas beside
everything short-lived: when 20 runs of 100k frames were forgotten, those arenas stayed with the
process, half empty (781 MiB of RSS held against a 512 MiB budget). Here frames are copied into
chunks of :data:`CHUNK` bytes, allocated whole and freed whole, with 12 bytes of index a frame; what
:attr:`FrameLog.nbytes` says is held is what is allocated, so a budget over it bounds the RSS.
"""

from __future__ import annotations

from array import array
from collections import deque

__all__ = ["CHUNK", "FrameLog"]

#: Bytes of one chunk (a frame longer than this gets a chunk of its own size).
CHUNK = 64 << 10
#: Index bytes a frame: its chunk, its start and its length.
INDEX_BYTES = 12


class FrameLog:
    """Frames appended at the end and dropped at the front, read by position (``len``, ``[i]``, ``join``)."""

    __slots__ = ("_chunk_of", "_chunks", "_fill", "_first", "_first_chunk", "_lengths", "_starts", "nbytes")

    def __init__(self) -> None:
        self._chunks: deque[bytearray] = deque()
        self._first_chunk = 0  # the number of self._chunks[0] (chunks before it were freed)
        self._fill = 0  # bytes used in the last chunk
        # Per frame, from self._first on (entries before it are compacted away now and then).
        self._chunk_of = array("I")
        self._starts = array("I")
        self._lengths = array("I")
        self._first = 0
        #: Bytes held: every chunk's allocation, and the index of every kept frame.
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._lengths) - self._first

    def append(self, frame: bytes) -> None:
        """Copy ``frame`` in at the end."""
        size = len(frame)
        if not self._chunks or self._fill + size > len(self._chunks[-1]):
            chunk = bytearray(max(CHUNK, size))
            self._chunks.append(chunk)
            self.nbytes += len(chunk)
            self._fill = 0
        chunk = self._chunks[-1]
        chunk[self._fill : self._fill + size] = frame
        self._chunk_of.append(self._first_chunk + len(self._chunks) - 1)
        self._starts.append(self._fill)
        self._lengths.append(size)
        self._fill += size
        self.nbytes += INDEX_BYTES

    def _where(self, index: int) -> tuple[bytearray, int, int]:
        at = self._first + index
        return self._chunks[self._chunk_of[at] - self._first_chunk], self._starts[at], self._lengths[at]

    def __getitem__(self, index: int) -> bytes:
        if not 0 <= index < len(self):
            raise IndexError(index)
        chunk, start, size = self._where(index)
        return bytes(chunk[start : start + size])

    def join(self, start: int, end: int) -> bytes:
        """Frames ``start`` to ``end`` (exclusive) as one bytes."""
        parts = []
        for index in range(start, end):
            chunk, at, size = self._where(index)
            parts.append(memoryview(chunk)[at : at + size])
        return b"".join(parts)

    def drop_oldest(self) -> int:
        """Forget the oldest frame; the bytes this gave back (its index, and its chunk once all of that
        chunk's frames are gone)."""
        if not len(self):
            raise IndexError("no frame to drop")
        freed = INDEX_BYTES
        self._first += 1
        next_chunk = self._chunk_of[self._first] if len(self) else self._first_chunk + len(self._chunks)
        while self._first_chunk < next_chunk and len(self._chunks) > 1:
            freed += len(self._chunks.popleft())
            self._first_chunk += 1
        if self._first > 4096 and self._first * 2 > len(self._lengths):  # compact the index
            for column in (self._chunk_of, self._starts, self._lengths):
                del column[: self._first]
            self._first = 0
        self.nbytes -= freed
        return freed

    def seal(self) -> int:
        """No frame comes after this: the last chunk shrinks to what it holds; the bytes given back."""
        if not self._chunks:
            return 0
        last = self._chunks[-1]
        freed = len(last) - self._fill
        if freed > 0:
            self._chunks[-1] = last[: self._fill]
            self.nbytes -= freed
        return max(freed, 0)
