"""HTTP benchmark: one server process (echo executor, unpaced), N concurrent streams of ``#lorem N``.

Starts ``trtllm-responses serve`` as a subprocess, runs the load generator
against it ``--runs`` times, and reports medians: streamed tokens/s, TTFT and
ITL percentiles, and the server's CPU time per streamed token beside the
parser-only cost per token measured in the same run (openai-harmony's
StreamableParser over the same completion).

    python benchmarks/http_stream.py [--concurrency 64] [--lorem 2000] [--duration 15] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _server import pin_this_process, report, start_server, stop  # noqa: E402
from micro_pipeline import completion_tokens, run_parser  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, run_bench  # noqa: E402


def parser_floor_us(tokens_n: int) -> float:
    tokens, encoding, _ = completion_tokens(tokens_n)
    runs = [run_parser(encoding, tokens) for _ in range(9)]
    return statistics.median(runs) / len(tokens) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--lorem", type=int, default=2000)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    def load(process: Any, url: str) -> list[dict[str, Any]]:
        config = BenchConfig(
            base_url=url,
            concurrency=args.concurrency,
            lorem=args.lorem,
            duration=args.duration,
            warmup=args.concurrency,
            server_pid=process.pid,
            progress=False,
        )
        return [run_bench(config).summary for _ in range(args.runs)]

    pinned = pin_this_process()
    server, url = start_server()
    try:
        floor_before = parser_floor_us(args.lorem)
        summaries = load(server, url)
        floor_after = parser_floor_us(args.lorem)
    finally:
        stop(server)
    bare, bare_url = start_server(
        command=[sys.executable, str(Path(__file__).parent / "bare_starlette.py"), str(args.lorem)]
    )
    try:
        bare_runs = load(bare, bare_url)
    finally:
        stop(bare)

    def median(key: str, sub: str | None = None) -> float:
        values = [s[key][sub] if sub else s[key] for s in summaries]
        return round(statistics.median(v for v in values if v is not None), 3)

    floor = statistics.median([floor_before, floor_after])
    result = {
        "concurrency": args.concurrency,
        "lorem": args.lorem,
        "runs": args.runs,
        "pinned": pinned,
        "errors": sum(s["errors"] for s in summaries),
        "output_tokens_per_s": median("output_tokens_per_s"),
        "output_tokens_per_s_runs": [s["output_tokens_per_s"] for s in summaries],
        "ttft_ms_p50": median("ttft_ms", "p50"),
        "ttft_ms_p99": median("ttft_ms", "p99"),
        "itl_ms_p50": median("itl_ms", "p50"),
        "itl_ms_p99": median("itl_ms", "p99"),
        "server_us_per_token": median("server_us_per_token"),
        "server_cpu_utilization": median("server_cpu_utilization"),
        "parser_only_us_per_token": round(floor, 3),
        "server_cost_over_parser": round(median("server_us_per_token") / floor, 2),
        "client_us_per_token": median("client_us_per_token"),
        "client_cpu_utilization": median("client_cpu_utilization"),
        "server_rss_mib": median("server_rss_mib"),
        "bare_starlette_tokens_per_s": round(
            statistics.median(s["output_tokens_per_s"] for s in bare_runs), 1
        ),
        "bare_starlette_us_per_token": round(
            statistics.median(s["server_us_per_token"] for s in bare_runs), 3
        ),
    }
    result["share_of_bare_starlette"] = round(
        result["output_tokens_per_s"] / result["bare_starlette_tokens_per_s"], 3
    )
    report(result, args.json)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
