"""Hostile inputs: no request, whatever its size, stalls other streams or grows memory past its bounds.

Bounds here are generous (the server shares this test process's GIL with the
client); benchmarks/hostile_input.py measures them precisely.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from support.server_harness import RunningServer

from trtllm_responses.executors.echo import EchoExecutor

# A stalled loop shows as gaps of seconds (100 KB of '=' held it 10.4 s before the fix).
GAP_BOUND_S = 0.25


@pytest.fixture(scope="module")
def paced(encoding, serve) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    running = serve(EchoExecutor(encoding, tokens_per_second=200))
    yield running
    running.stop()


def _stream_gaps(base_url: str, tokens: int, started: threading.Event) -> list[float]:
    """Inter-delta gaps of one streamed #lorem response, as its client sees them."""
    gaps: list[float] = []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        body = {"input": f"#lorem {tokens}", "stream": True}
        with client.stream("POST", "/v1/responses", json=body) as response:
            last = None
            for line in response.iter_lines():
                if line.startswith("data: ") and '"response.output_text.delta"' in line:
                    now = time.perf_counter()
                    if last is not None:
                        gaps.append(now - last)
                    last = now
                    started.set()
    return gaps


@pytest.mark.parametrize(
    "hostile",
    ["=" * 100_000, "中" * 100_000, "a" * 400_000],
    ids=["100KB-equals", "100k-cjk", "400KB-a"],
)
def test_a_pathological_input_does_not_stall_another_stream(paced: RunningServer, hostile: str) -> None:
    started = threading.Event()
    gaps: list[float] = []
    streamer = threading.Thread(target=lambda: gaps.extend(_stream_gaps(paced.base_url, 400, started)))
    streamer.start()
    assert started.wait(10)
    with httpx.Client(base_url=paced.base_url, timeout=60) as client:
        client.get("/stats", params={"reset": "1"})
        answer = client.post("/v1/responses", json={"input": hostile, "max_output_tokens": 50})
        lag = client.get("/stats").json()["event_loop_lag"]["max_since_reset_ms"]
    streamer.join()
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "incomplete"  # echoing it back is cut at 50 tokens
    assert max(gaps) < GAP_BOUND_S, f"a stream stalled {max(gaps) * 1000:.0f} ms"
    assert lag < GAP_BOUND_S * 1000


def test_a_megabyte_without_whitespace_is_a_normal_response(http: httpx.Client) -> None:
    response = http.post("/v1/responses", json={"input": "a" * 1_000_000, "max_output_tokens": 20})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "incomplete" and body["usage"]["input_tokens"] > 100_000


def test_larger_than_the_input_bound_is_refused_before_tokenizing(http: httpx.Client) -> None:
    response = http.post("/v1/responses", json={"input": "a" * (16 * 131072 + 1)})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_an_instructions_storm_stays_within_the_cache_budget(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    from trtllm_responses.adapter import HarmonyAdapter

    own_adapter = HarmonyAdapter(encoding, today=lambda: "2026-11-21")
    server = serve(adapter=own_adapter)
    try:
        _storm(server, own_adapter)
    finally:
        server.stop()


def _storm(server: RunningServer, adapter) -> None:  # type: ignore[no-untyped-def]
    cache = adapter._developers
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        client.post("/v1/responses", json={"input": "warm", "instructions": "w " * 50_000, "store": False})
        gc.collect()
        before = _rss()
        refused = 0
        for i in range(10):  # 2 MB each: rendered, then refused (longer than the context window)
            instructions = f"{i} " + "word " * 400_000
            response = client.post(
                "/v1/responses", json={"input": "x", "instructions": instructions, "store": False}
            )
            refused += response.status_code == 400
        assert refused == 10
        assert len(cache) <= 1  # refused prompts leave nothing in the cache
        for i in range(40):  # 100 KB each, accepted: cached within the byte budget
            instructions = f"{i} " + "word " * 20_000
            response = client.post(
                "/v1/responses", json={"input": "x", "instructions": instructions, "store": False}
            )
            assert response.status_code == 200
    gc.collect()
    grown = _rss() - before
    assert cache.bytes <= cache.max_bytes
    assert grown < cache.max_bytes + (48 << 20), f"RSS grew {grown >> 20} MiB"
