"""Latency on an idle server: server-added latency, and continuing a ~100k-token stored conversation.

1. Short streaming requests, one at a time: client-side TTFT, and the server's own
   "request received → prompt handed to the executor" latency (GET /stats).
2. A stored conversation grown through the API to ~100k tokens (user turns of
   ~8k tokens, chained with previous_response_id), with the event loop's
   worst lag while building it.
3. Short requests continuing that conversation vs fresh short requests: TTFT,
   server-added latency, worst event-loop lag.

    python benchmarks/latency.py [--requests 200] [--history 100000] [--json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _server import get_json, pin_this_process, post_json, report, start_server, stop  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, run_bench  # noqa: E402

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def ttft_run(url: str, requests: int, prompt: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    config = BenchConfig(
        base_url=url,
        concurrency=1,
        duration=None,
        requests=requests,
        warmup=5,
        prompt=prompt,
        progress=False,
        extra_body=extra or {},
    )
    return run_bench(config).summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--history", type=int, default=100_000)
    ap.add_argument("--turn-words", type=int, default=7_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pinned = pin_this_process()
    server, url = start_server()
    try:
        get_json(url + "/stats?reset=1")
        fresh = ttft_run(url, args.requests, "Hello there, how are you?")
        fresh_stats = get_json(url + "/stats")

        get_json(url + "/stats?reset=1")
        previous = None
        tokens = 0
        turns = 0
        build_started = time.perf_counter()
        while tokens < args.history:
            words = " ".join(WORDS[(turns + i) % len(WORDS)] for i in range(args.turn_words))
            body: dict[str, Any] = {"input": f"Turn {turns}: {words}", "store": True}
            if previous:
                body["previous_response_id"] = previous
            response = post_json(url + "/v1/responses", body)
            previous = response["id"]
            tokens = response["usage"]["input_tokens"] + response["usage"]["output_tokens"]
            turns += 1
        build_s = time.perf_counter() - build_started
        build_stats = get_json(url + "/stats")

        get_json(url + "/stats?reset=1")
        continued = ttft_run(
            url, args.requests, "And one more short question?", {"previous_response_id": previous}
        )
        continued_stats = get_json(url + "/stats")
        fresh_again = ttft_run(url, args.requests, "Hello there, how are you?")
    finally:
        stop(server)

    fresh_ttft = min(fresh["ttft_ms"]["p50"], fresh_again["ttft_ms"]["p50"])
    result = {
        "pinned": pinned,
        "fresh_ttft_ms_p50": fresh["ttft_ms"]["p50"],
        "fresh_ttft_ms_p99": fresh["ttft_ms"]["p99"],
        "server_added_latency_ms_p50": fresh_stats["server_added_latency"]["p50_ms"],
        "server_added_latency_ms_p99": fresh_stats["server_added_latency"]["p99_ms"],
        "history_tokens": tokens,
        "history_turns": turns,
        "history_build_s": round(build_s, 2),
        "build_phase_max_loop_lag_ms": build_stats["event_loop_lag"]["max_since_reset_ms"],
        "continued_ttft_ms_p50": continued["ttft_ms"]["p50"],
        "continued_ttft_ms_p99": continued["ttft_ms"]["p99"],
        "continued_server_added_latency_ms_p50": continued_stats["server_added_latency"]["p50_ms"],
        "continued_server_added_latency_ms_p99": continued_stats["server_added_latency"]["p99_ms"],
        "continued_added_ttft_ms": round(continued["ttft_ms"]["p50"] - fresh_ttft, 3),
        "continued_phase_max_loop_lag_ms": continued_stats["event_loop_lag"]["max_since_reset_ms"],
        "errors": fresh["errors"] + continued["errors"] + fresh_again["errors"],
    }
    report(result, args.json)


if __name__ == "__main__":
    main()
