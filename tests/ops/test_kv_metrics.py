"""``/metrics``' KV metrics (docs/sessions-and-kv-cache.md#kv-events-and-metrics) from real servers on the fake
TensorRT-LLM: the per-turn cached-token ratio, the session turns that missed their prefix, the engine's KV
blocks and queue."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.server_harness import ServerFactory
from support.trtllm_harness import executor_for

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.ops.session_metrics import missed_prefix

BLOCK = 32


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _session(client: httpx.Client, turns: list[str], session: str) -> list[dict[str, Any]]:
    """One session's turns, each continuing the last (``previous_response_id``) under its ``x-session-id``."""
    out: list[dict[str, Any]] = []
    for text in turns:
        body: dict[str, Any] = {"input": text}
        if out:
            body["previous_response_id"] = out[-1]["id"]
        response = client.post("/v1/responses", json=body, headers={"x-session-id": session})
        assert response.status_code == 200, response.text
        out.append(response.json())
    return out


def _usage(response: dict[str, Any]) -> tuple[int, int]:
    usage = response["usage"]
    return usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"]


@pytest.mark.parametrize("pool_blocks", [2048, 3], ids=["pool-holds-the-session", "pool-of-3-blocks"])
def test_cached_ratio_and_missed_prefixes_per_turn(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, pool_blocks: int
) -> None:
    executor = executor_for(
        encoding,
        kv_cache_config={"enable_block_reuse": True, "max_tokens": pool_blocks * BLOCK},
    )
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            turns = _session(client, [f"turn {i}: " + "words to keep " * 60 for i in range(3)], "agent-1")
            other = _session(client, ["a different session"], "agent-2")
            got = _samples(client.get("/metrics").text)
    finally:
        running.stop()
    assert executor._watch is None  # neither events nor stats asked for: nothing runs beside the engine
    usages = [_usage(r) for r in turns + other]
    tenant = (("tenant", "default"),)
    assert got[("trtllm_turn_cached_ratio_count", tenant)] == 4
    assert got[("trtllm_turn_cached_ratio_sum", tenant)] == pytest.approx(sum(c / n for n, c in usages))
    # agent-2's one turn is no session turn; agent-1's second and third are.
    assert got[("trtllm_session_turns_total", tenant)] == 2
    expected = sum(
        missed_prefix(previous[0], current[0], current[1], BLOCK)
        for previous, current in zip(usages[:2], usages[1:3], strict=True)
    )
    assert got[("trtllm_session_prefix_misses_total", tenant)] == expected
    if pool_blocks == 2048:
        assert expected == 0 and all(c > 0 for _, c in usages[1:3])
    else:
        assert expected == 2, usages  # a pool of 3 blocks keeps less than each turn's previous prompt


def test_engine_kv_and_queue_gauges(
    fake_trtllm: Any,
    encoding: HarmonyEncoding,
    serve: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", "1.4.0rc1")  # get_kv_cache_capacity (PR #15385)
    monkeypatch.setenv("FAKE_TRTLLM_STEP_DELAY", "0.05")
    executor = executor_for(encoding, enable_iter_perf_stats=True, max_batch_size=1)
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            idle = _samples(client.get("/metrics").text)
            # Known before any request, from get_kv_cache_capacity: 64 Ki tokens of 32-token blocks.
            assert idle[("trtllm_engine_kv_blocks", (("state", "capacity"),))] == 2048
            assert ("trtllm_engine_queued_requests", ()) not in idle  # no iteration yet: nothing said
            threads = [
                threading.Thread(
                    target=lambda: client.post("/v1/responses", json={"input": "#lorem 60"}), daemon=True
                )
                for _ in range(2)
            ]
            for thread in threads:
                thread.start()
            deadline, busy = time.monotonic() + 20, {}
            while time.monotonic() < deadline:
                busy = _samples(client.get("/metrics").text)
                if busy.get(("trtllm_engine_queued_requests", ())) == 1:
                    break
                time.sleep(0.1)
            for thread in threads:
                thread.join(30)
    finally:
        running.stop()
    # Two requests on an engine that runs one at a time: one runs, holding blocks, one waits.
    assert busy[("trtllm_engine_queued_requests", ())] == 1
    assert busy[("trtllm_engine_active_requests", ())] == 1
    used = busy[("trtllm_engine_kv_blocks", (("state", "used"),))]
    assert used > 0 and busy[("trtllm_engine_kv_usage_ratio", ())] == pytest.approx(used / 2048)


def test_no_engine_gauges_without_iteration_stats(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding)  # 1.2.0: no get_kv_cache_capacity; stats not enabled
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            client.post("/v1/responses", json={"input": "hello"})
            got = _samples(client.get("/metrics").text)
    finally:
        running.stop()
    assert not [name for name, _ in got if name.startswith("trtllm_engine_")]
