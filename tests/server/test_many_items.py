"""A body of many small items holds the event loop no longer than a large one of few (issue 44, point 3).

Before: 20,000 distinct items (~0.9 MB) held the loop 420 ms on a quiet machine, in proportion to their
count, and ``/v1/messages`` with 20,001 messages 346 ms: passes over every item in one step (typing them,
the Messages translation, the normalized copies freed at once, 20,000 pydantic messages freed together),
and young GC collections on a 20 ms timer that walked everything a preparation had allocated since
(gen-1: 120-150 ms). Now every pass runs in steps of ~5 ms (``core/loop_steps.py``) and CPython collects
the young generations as it allocates (``ops/gc_schedule.py``).

What is bounded is the CPU time the loop's thread spent between two ticks of the server's 5 ms watchdog
(``/stats`` ``event_loop_lag.max_cpu_since_reset_ms``): the time the loop was held, less the time the
process waited for a core, which on a loaded 2-core machine is most of the wall-clock lag and not the
server's. The wall-clock lag keeps a loose bound: it is what sees a thread holding the GIL (the decode
thread's parse). ``benchmarks/many_items.py`` measures both on a separate server process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from support.server_harness import RunningServer

from trtllm_responses.executors.echo import EchoExecutor

#: The most CPU time the loop may be held while such a request is prepared and answered, past the
#: watchdog's 5 ms (issue 44's bound). Measured here, items / messages / the 1 MB string: 11-15, 6-8 and
#: 5-7 ms on the quiet 2-core machine, up to 36, 19 and 14 at a load of 3-5; base 2681030 (this metric
#: patched in): 59-111, 74-84 and 103 (its gen-1 collections alone 60-160 ms).
HELD_BOUND_MS = 50
#: The worst wall-clock lag allowed: wide, as a loaded machine deschedules the process for tens to hundreds
#: of ms at a time (at a load of 20, 4,288 and 5,831 ms before the loop was stepped, 616 and 679 ms after
#: its item passes were), and in a whole suite's run this process's other servers share the GIL with this
#: one (each runs its own full GC collections of the whole process when it is idle: 522 ms seen).
LAG_BOUND_MS = 1500
ITEMS = 20_000


@pytest.fixture(scope="module")
def roomy(encoding, serve) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    # A window that takes 20,000 items, so that the whole path (stored, answered) is measured.
    running = serve(EchoExecutor(encoding, max_seq_len=400_000))
    with httpx.Client(base_url=running.base_url, timeout=120) as client:  # the render workers started
        client.post("/v1/responses", json={"model": "m", "input": "x " * 20_000, "max_output_tokens": 1})
        # and each route's first request served (FastAPI builds a route's handling on its first one: /stats's
        # ~30 ms would fall after its own reset)
        client.post(
            "/v1/messages",
            json={"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]},
        )
        client.get("/stats")
    yield running
    running.stop()


def _lag_while(server: RunningServer, path: str, body: dict[str, Any]) -> tuple[httpx.Response, float, float]:
    """The answer, and the most CPU time the loop was held and its worst lag while it was made (ms)."""
    data = orjson.dumps(body)  # made before the measurement: the client shares the server's GIL
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        client.get("/stats", params={"reset": "1"})
        answer = client.post(path, content=data, headers={"content-type": "application/json"})
        lag = client.get("/stats").json()["event_loop_lag"]
    return answer, lag["max_cpu_since_reset_ms"], lag["max_since_reset_ms"]


def test_twenty_thousand_items_do_not_hold_the_loop(roomy: RunningServer) -> None:
    items = [{"role": "user", "content": f"item {i}"} for i in range(ITEMS)]
    answer, held, lag = _lag_while(
        roomy, "/v1/responses", {"model": "m", "input": items, "max_output_tokens": 8}
    )
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["usage"]["input_tokens"] > 5 * ITEMS
    assert held < HELD_BOUND_MS, f"the loop was held {held:.0f} ms of CPU at once"
    assert lag < LAG_BOUND_MS, f"the loop stalled {lag:.0f} ms"
    with httpx.Client(base_url=roomy.base_url, timeout=60) as client:  # stored whole
        page = client.get(f"/v1/responses/{answer.json()['id']}/input_items", params={"limit": 1})
    assert page.status_code == 200 and page.json()["data"][0]["content"][0]["text"] == f"item {ITEMS - 1}"


def test_twenty_thousand_and_one_messages_do_not_hold_the_loop(roomy: RunningServer) -> None:
    messages = [{"role": ("user", "assistant")[i % 2], "content": f"message {i}"} for i in range(ITEMS + 1)]
    answer, held, lag = _lag_while(
        roomy, "/v1/messages", {"model": "m", "max_tokens": 8, "messages": messages}
    )
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["usage"]["input_tokens"] > 5 * ITEMS
    assert held < HELD_BOUND_MS, f"the loop was held {held:.0f} ms of CPU at once"
    assert lag < LAG_BOUND_MS, f"the loop stalled {lag:.0f} ms"


def test_a_one_megabyte_string_input_does_not_hold_the_loop(roomy: RunningServer) -> None:
    # A string input is one user message: it was counted as no new bytes, so its 1 MB was tokenized on the
    # loop rather than in a render worker, and looked at character by character for an MCP approval.
    text = " ".join(f"word{i}" for i in range(200_000))[:1_000_000]
    answer, held, lag = _lag_while(
        roomy, "/v1/responses", {"model": "m", "input": text, "max_output_tokens": 8}
    )
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["usage"]["input_tokens"] > 200_000
    assert held < HELD_BOUND_MS, f"the loop was held {held:.0f} ms of CPU at once"
    assert lag < LAG_BOUND_MS, f"the loop stalled {lag:.0f} ms"
