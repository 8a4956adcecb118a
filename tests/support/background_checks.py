"""One check of background responses across two processes, run on every way the server has of sharing them:
two ``serve`` processes on one Redis (``tests/store/test_store_processes.py``) and the two frontends of a
``--num_serve_frontends 2`` group on SQLite and on Redis (``tests/cli/test_frontends.py``)
(docs/stores-and-frontends.md#many-frontends-num_serve_frontends).
"""

from __future__ import annotations

import time

import openai

__all__ = ["check_background_across"]


def check_background_across(on_a: openai.OpenAI, on_b: openai.OpenAI, pace: int) -> None:
    """Started on A: polled, resumed, cancelled and replayed on B, whose echo emits ``pace`` tokens a second.

    Each replay on B is of a response A ran (finished when B asks, at the group's pace): B does not hold
    its events, and must get them wherever they are kept.
    """
    # Resume on B a stream that A generates, and read it to its end.
    short = on_a.responses.create(model="m", input=f"#lorem {pace * 6 // 10}", background=True)
    deadline = time.monotonic() + 30
    while on_b.responses.retrieve(short.id).status == "queued" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert on_b.responses.retrieve(short.id).status in ("in_progress", "completed")
    with on_b.responses.stream(response_id=short.id, starting_after=3) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert events[0].sequence_number == 4 and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(4, 4 + len(events)))
    assert final.output_text == on_a.responses.retrieve(short.id).output_text
    assert on_b.responses.retrieve(short.id).status == "completed"
    # Finished: its whole stream again, from B, as often as asked.
    for _ in range(3):
        replayed = list(on_b.responses.retrieve(short.id, stream=True))
        assert replayed[0].type == "response.created" and replayed[-1].type == "response.completed"

    # Cancel on B what A runs.
    long = on_a.responses.create(model="m", input=f"#lorem {pace * 50}", background=True)
    while on_b.responses.retrieve(long.id).status == "queued" and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    polled = on_b.responses.retrieve(long.id)
    assert polled.status == "in_progress" and polled.background
    cancelled = on_b.responses.cancel(long.id)
    assert cancelled.status == "cancelled"
    assert on_a.responses.retrieve(long.id).status == "cancelled"
    assert on_b.responses.cancel(long.id).status == "cancelled"  # idempotent, from anywhere
    # B can still replay the cancelled response's whole stream.
    replayed = list(on_b.responses.retrieve(long.id, stream=True))
    assert replayed[0].type == "response.created" and replayed[-1].type == "response.failed"
    assert replayed[-1].response.status == "cancelled"
