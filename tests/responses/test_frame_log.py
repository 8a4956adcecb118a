"""FrameLog: frames in large chunks, read by position, dropped at the front, counted as allocated."""

from __future__ import annotations

import pytest

from trtllm_responses.responses.frame_log import CHUNK, INDEX_BYTES, FrameLog


def test_frames_read_back_as_written_across_chunks_and_drops() -> None:
    log = FrameLog()
    frames = [f"event: e\ndata: {i:05d}{'x' * (i % 700)}\n\n".encode() for i in range(3000)]
    for frame in frames:
        log.append(frame)
    assert len(log) == 3000 and [log[i] for i in (0, 1234, 2999)] == [frames[0], frames[1234], frames[2999]]
    assert log.join(10, 20) == b"".join(frames[10:20])
    chunks = -(-sum(len(f) for f in frames) // CHUNK)  # at least this many chunks were needed
    assert log.nbytes >= chunks * CHUNK + 3000 * INDEX_BYTES
    freed = sum(log.drop_oldest() for _ in range(2500))
    assert len(log) == 500 and log[0] == frames[2500] and log.join(0, 500) == b"".join(frames[2500:])
    assert freed >= (chunks * 2 // 3) * CHUNK  # whole chunks went back, not only the index
    held = log.nbytes
    assert log.seal() > 0 and log.nbytes < held and log.join(0, 500) == b"".join(frames[2500:])
    with pytest.raises(IndexError):
        log[500]


def test_a_frame_larger_than_a_chunk_gets_its_own() -> None:
    log = FrameLog()
    big = b"y" * (3 * CHUNK)
    log.append(b"small")
    log.append(big)
    log.append(b"after")
    assert [log[0], log[1], log[2]] == [b"small", big, b"after"]
    assert log.drop_oldest() == INDEX_BYTES + CHUNK  # the small frame's chunk held nothing else
