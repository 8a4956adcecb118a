"""Store memory under a long run of stored requests: bytes per stored response, and a bounded total.

Runs a server with a small --max_store_bytes, sends many stored requests, and
samples the store's own accounting (GET /stats) and the server's RSS. The store
must never account more than the bound, and RSS must level off once eviction
starts.

    python benchmarks/store_memory.py [--requests 6000] [--max-store-mib 32] [--json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _server import get_json, pin_this_process, report, start_server, stop  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, _proc_rss_mib, run_bench  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--phases", type=int, default=6)
    ap.add_argument("--max-store-mib", type=int, default=32)
    ap.add_argument("--lorem", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pinned = pin_this_process()
    limit = args.max_store_mib << 20
    server, url = start_server(["--max_store_bytes", str(limit), "--max_stored_responses", "1000000"])
    samples: list[dict[str, Any]] = []
    try:
        rss_start = _proc_rss_mib(server.pid)
        for _ in range(args.phases):
            config = BenchConfig(
                base_url=url,
                concurrency=8,
                duration=None,
                requests=args.requests // args.phases,
                warmup=0,
                lorem=args.lorem,
                stream=False,
                store=True,
                progress=False,
            )
            summary = run_bench(config).summary
            store = get_json(url + "/stats")["store"]
            samples.append(
                {
                    "stored": store["responses"],
                    "store_mib": round(store["bytes"] / 2**20, 2),
                    "evictions": store["evictions"],
                    "rss_mib": round(_proc_rss_mib(server.pid), 1),
                    "errors": summary["errors"],
                }
            )
    finally:
        stop(server)
    last = samples[-1]
    result = {
        "pinned": pinned,
        "requests": args.requests,
        "max_store_mib": args.max_store_mib,
        "bytes_per_response": round(last["store_mib"] * 2**20 / last["stored"]) if last["stored"] else None,
        "max_accounted_mib": max(s["store_mib"] for s in samples),
        "within_bound": all(s["store_mib"] * 2**20 <= limit for s in samples),
        "rss_start_mib": round(rss_start, 1),
        "rss_samples_mib": [s["rss_mib"] for s in samples],
        "stored_samples": [s["stored"] for s in samples],
        "evictions": last["evictions"],
        "errors": sum(s["errors"] for s in samples),
    }
    report(result, args.json)


if __name__ == "__main__":
    main()
