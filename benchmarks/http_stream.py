"""HTTP benchmark: one server process (echo executor, unpaced), N concurrent streams of ``#lorem N``.

Starts ``trtllm-responses serve`` as a subprocess, runs the load generator
against it ``--runs`` times, and reports medians: streamed tokens/s, TTFT and
ITL percentiles, and the server's CPU time per streamed token beside the
parser-only cost per token measured in the same run (openai-harmony's
StreamableParser over the same completion).

    python benchmarks/http_stream.py [--concurrency 64] [--lorem 2000] [--duration 15] [--runs 3] [--json]
                                     [--sweep 8,16,32,128] [--no-charts]

``--sweep`` adds one run at each other concurrency, on the same server after the main runs (their figures
are reported under ``by_concurrency`` beside the main runs' medians, which they do not change). Unless
``--no-charts``, tokens/s and server CPU per token against concurrency are drawn into
``benchmarks/charts/http_stream.svg`` (``charts.py``; matplotlib, the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import charts  # noqa: E402
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
    ap.add_argument("--sweep", default="", help="other concurrencies, one run each (e.g. 8,16,32,128)")
    ap.add_argument("--no-charts", action="store_true", help="draw no chart")
    args = ap.parse_args()
    sweep = [int(n) for n in args.sweep.split(",") if n and int(n) != args.concurrency]

    def load(
        process: Any, url: str, concurrency: int | None = None, runs: int | None = None
    ) -> list[dict[str, Any]]:
        concurrency = concurrency or args.concurrency
        config = BenchConfig(
            base_url=url,
            concurrency=concurrency,
            lorem=args.lorem,
            duration=args.duration,
            warmup=concurrency,
            server_pid=process.pid,
            progress=False,
        )
        return [run_bench(config).summary for _ in range(runs or args.runs)]

    pinned = pin_this_process()
    server, url = start_server()
    try:
        floor_before = parser_floor_us(args.lorem)
        summaries = load(server, url)
        floor_after = parser_floor_us(args.lorem)
        swept = {n: load(server, url, n, runs=1)[0] for n in sweep}
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
    result["by_concurrency"] = sorted(
        [point(args.concurrency, result), *(point(n, s) for n, s in swept.items())],
        key=lambda p: p["concurrency"],
    )
    if not args.no_charts:
        draw_chart(args, result)
    report(result, args.json)


def point(concurrency: int, figures: dict[str, Any]) -> dict[str, Any]:
    """One concurrency's figures for ``by_concurrency`` (the main runs' medians, or a sweep's one run)."""
    ttft = figures["ttft_ms"]["p50"] if isinstance(figures.get("ttft_ms"), dict) else figures["ttft_ms_p50"]
    return {
        "concurrency": concurrency,
        "output_tokens_per_s": round(figures["output_tokens_per_s"], 1),
        "server_us_per_token": figures["server_us_per_token"],
        "ttft_ms_p50": ttft,
        "errors": figures["errors"],
    }


def draw_chart(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """Throughput and CPU per token against concurrency: benchmarks/charts/http_stream.svg."""
    configuration = (
        f"#lorem {args.lorem}, {args.duration:g} s a run, {args.runs} runs at {args.concurrency} streams "
        f"(median), 1 run at each other; pinned: {result['pinned']}"
    )
    floors = {"concurrency": args.concurrency, **{k: result[k] for k in FLOORS}}
    path = charts.http_stream_chart(result["by_concurrency"], floors, configuration)
    if path is not None:
        print(f"chart: {path}", file=sys.stderr)


#: The same run's references drawn beside the curve.
FLOORS = ("bare_starlette_tokens_per_s", "bare_starlette_us_per_token", "parser_only_us_per_token")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
