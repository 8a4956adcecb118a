"""Store backends compared: continuing a ~100k-token conversation, and streaming throughput, per backend.

For each of memory, SQLite (a temporary file) and Redis (a redis-server on a free
loopback port, started here):

1. grow a stored conversation to ~100k tokens through the API (previous_response_id);
2. short streaming requests, one at a time: fresh ones, then ones continuing that
   conversation; the difference of their TTFT p50 is what continuing costs
   (the backend reads and decodes the whole token-level history);
3. streaming throughput: ``--concurrency`` streams of ``#lorem N``, stored (each
   response is written to the backend before its terminal event).

    python benchmarks/store_backends.py [--requests 50] [--history 100000] [--duration 8] [--json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from _server import get_json, pin_this_process, post_json, report, start_server, stop  # noqa: E402
from support.redis_harness import RedisServer  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, run_bench  # noqa: E402

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def ttft(url: str, requests: int, prompt: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    config = BenchConfig(
        base_url=url, concurrency=1, duration=None, requests=requests, warmup=3, prompt=prompt,
        progress=False, extra_body=extra or {},
    )  # fmt: skip
    return run_bench(config).summary


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    fresh = ttft(url, args.requests, "Hello there, how are you?")
    previous = None
    tokens = turns = 0
    while tokens < args.history:
        words = " ".join(WORDS[(turns + i) % len(WORDS)] for i in range(args.turn_words))
        body: dict[str, Any] = {"input": f"Turn {turns}: {words}", "store": True}
        if previous:
            body["previous_response_id"] = previous
        response = post_json(url + "/v1/responses", body)
        previous = response["id"]
        tokens = response["usage"]["input_tokens"] + response["usage"]["output_tokens"]
        turns += 1
    get_json(url + "/stats?reset=1")
    continued = ttft(url, args.requests, "And one more short question?", {"previous_response_id": previous})
    added = get_json(url + "/stats")["server_added_latency"]
    throughput = run_bench(
        BenchConfig(
            base_url=url,
            concurrency=args.concurrency,
            duration=args.duration,
            lorem=args.lorem,
            store=True,
            progress=False,
            warmup=4,
        )  # fmt: skip
    ).summary
    return {
        "history_tokens": tokens,
        "fresh_ttft_ms_p50": fresh["ttft_ms"]["p50"],
        "continued_ttft_ms_p50": continued["ttft_ms"]["p50"],
        "continued_ttft_ms_p99": continued["ttft_ms"]["p99"],
        "continued_added_ttft_ms": round(continued["ttft_ms"]["p50"] - fresh["ttft_ms"]["p50"], 3),
        "continued_server_added_ms_p50": added["p50_ms"],
        "stream_output_tokens_per_s": throughput["output_tokens_per_s"],
        "stream_requests_per_s": throughput["requests_per_s"],
        "stream_ttft_ms_p50": throughput["ttft_ms"]["p50"],
        "errors": fresh["errors"] + continued["errors"] + throughput["errors"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--history", type=int, default=100_000)
    ap.add_argument("--turn-words", type=int, default=7_000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--lorem", type=int, default=500)
    ap.add_argument("--backends", default="memory,sqlite,redis")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pinned = pin_this_process()
    result: dict[str, Any] = {"pinned": pinned}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            redis = None
            if backend == "memory":
                url_flag = "memory"
            elif backend == "sqlite":
                url_flag = f"sqlite:///{tmp}/bench.db"
            else:
                redis = RedisServer().start()
                url_flag = redis.url
            server, url = start_server(["--store", url_flag])
            started = time.perf_counter()
            try:
                figures = measure(url, args)
            finally:
                stop(server)
                if redis is not None:
                    redis.stop()
            figures["seconds"] = round(time.perf_counter() - started, 1)
            for key, value in figures.items():
                result[f"{backend}.{key}"] = value
    report(result, args.json)


if __name__ == "__main__":
    main()
