"""GET /stats: server-added latency, event-loop lag, counts, store bytes; and the request size limit."""

from __future__ import annotations

import httpx
import pytest
from support.server_harness import stream_events
from support.stream_grammar import check_stream


def test_stats_report_latency_counts_and_store(http: httpx.Client) -> None:
    http.get("/stats", params={"reset": "1"})
    before = http.get("/stats").json()
    assert before["server_added_latency"]["count"] == 0
    stored = http.post("/v1/responses", json={"input": "#lorem 5"}).json()
    check_stream(stream_events(http, {"input": "#lorem 7", "store": False}))
    stats = http.get("/stats").json()
    assert stats["responses"] == before["responses"] + 2
    assert (
        stats["output_tokens"] - before["output_tokens"]
        == stored["usage"]["output_tokens"] + stored["usage"]["output_tokens"] + 2
    )
    latency = stats["server_added_latency"]
    assert latency["count"] == 2 and 0 <= latency["p50_ms"] <= latency["max_ms"] < 1000
    assert stats["event_loop_lag"]["count"] > 0
    store = stats["store"]
    assert (
        store["responses"] >= 1 and store["bytes"] <= store["max_bytes"] and store["bytes_per_response"] > 0
    )


def test_oversized_bodies_are_413(http: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from trtllm_responses.server import body

    monkeypatch.setattr(body, "MAX_BODY_BYTES", 1000)
    response = http.post("/v1/responses", json={"input": "x" * 2000})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
