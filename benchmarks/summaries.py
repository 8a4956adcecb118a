"""What reasoning summaries cost: GPU tokens and latency per response, and the streaming path without them.

1. **Latency, one stream at a time, paced echo** (``--echo_tokens_per_second``, a GPU's decode rate per
   stream). Each request streams; the client times its first reasoning delta, the reasoning item's
   ``output_item.done``, the answer's first text delta and the terminal event. With and without
   ``reasoning.summary`` (auto), the same prompts, alternated.
2. **GPU tokens**: what the summaries' side generations added (``GET /stats`` ``reasoning_summaries``:
   prompt tokens prefilled and output tokens generated) beside the responses' own tokens.
3. **CPU per token in-process** (``_drive_cpu.py``: ``drive`` over 20,000 echo tokens, no transport, the
   minimum process CPU time of 5 repeats, trees alternated): this tree against ``--base-tree`` without a
   summary, and this tree with one. On a shared machine this is the steady figure.
4. **Throughput under load, unpaced** (``bench``: 64 streams of ``#lorem 2000``): without a summary asked,
   this tree against ``--base-tree`` (another checkout, e.g. main before the change, served by the same
   venv), alternated; and this tree with ``reasoning.summary`` asked.

    python benchmarks/summaries.py [--requests 30] [--pace 100] [--base-tree DIR] [--runs 3]
                                   [--duration 8] [--parts latency,cpu,load] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))

from _server import get_json, pin_this_process, report, start_server, stop  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, run_bench  # noqa: E402

PROMPTS = [
    "Hello there. How are you today?",
    "#lorem 200",
    "Summaries cost tokens. Measure them.",
]


def timed_stream(client: httpx.Client, body: dict[str, Any]) -> dict[str, float]:
    """Seconds from sending to each milestone of one streamed response, and its usage."""
    start = time.perf_counter()
    marks: dict[str, float] = {}
    usage: dict[str, Any] = {}
    with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            kind = event["type"]
            now = time.perf_counter() - start
            if kind == "response.reasoning_text.delta":
                marks.setdefault("first_reasoning", now)
            elif kind == "response.output_item.done" and event["item"]["type"] == "reasoning":
                marks.setdefault("reasoning_done", now)
            elif kind == "response.output_text.delta":
                marks.setdefault("first_answer", now)
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                marks["total"] = now
                usage = event["response"]["usage"]
    marks["output_tokens"] = usage["output_tokens"]
    marks["reasoning_tokens"] = usage["output_tokens_details"]["reasoning_tokens"]
    return marks


def latency(pace: float, requests: int) -> dict[str, Any]:
    server, url = start_server(["--echo_tokens_per_second", str(pace)])
    try:
        rows: dict[str, list[dict[str, float]]] = {"off": [], "auto": []}
        with httpx.Client(base_url=url, timeout=300) as client:
            for warm in range(2):
                timed_stream(client, {"input": PROMPTS[warm], "reasoning": {"summary": "auto"}})
            get_json(url + "/stats?reset=1")
            for i in range(requests):
                prompt = PROMPTS[i % len(PROMPTS)]
                for mode in ("off", "auto") if i % 2 == 0 else ("auto", "off"):
                    body: dict[str, Any] = {"input": prompt}
                    if mode == "auto":
                        body["reasoning"] = {"summary": "auto"}
                    rows[mode].append(timed_stream(client, body))
        stats = get_json(url + "/stats")["reasoning_summaries"]
    finally:
        stop(server)

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[mode])

    out: dict[str, Any] = {"pace_tokens_per_s": pace, "requests_each": requests}
    for key in ("first_reasoning", "reasoning_done", "first_answer", "total"):
        off, auto = med("off", key), med("auto", key)
        out[f"{key}_ms"] = {
            "off": round(off * 1000, 1),
            "auto": round(auto * 1000, 1),
            "added": round((auto - off) * 1000, 1),
        }
    out["output_tokens_per_response"] = {
        "off": med("off", "output_tokens"),
        "auto": med("auto", "output_tokens"),
    }
    out["summary_gpu_tokens_per_response"] = {
        "prompt": round(stats["prompt_tokens"] / max(1, stats["count"]), 1),
        "output": round(stats["output_tokens"] / max(1, stats["count"]), 1),
        "summaries": stats["count"],
    }
    return out


def throughput(url: str, pid: int, duration: float, summary: bool) -> tuple[float, float]:
    """Output tokens/s and the server's CPU µs per token (steadier than wall time on a shared machine)."""
    config = BenchConfig(
        base_url=url,
        server_pid=pid,
        concurrency=64,
        duration=duration,
        lorem=2000,
        warmup=8,
        progress=False,
        extra_body={"reasoning": {"summary": "auto"}} if summary else {},
    )
    summary_ = run_bench(config).summary
    return float(summary_["output_tokens_per_s"]), float(summary_["server_us_per_token"])


def load(base_tree: str | None, runs: int, duration: float) -> dict[str, Any]:
    trees = [("this", None), ("base", base_tree)] if base_tree else [("this", None)]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in trees}
    results["this_with_summary"] = []
    for _ in range(runs):
        for name, tree in trees:
            env_path = os.environ.get("PYTHONPATH")
            if tree:
                os.environ["PYTHONPATH"] = tree
            try:
                server, url = start_server()
            finally:
                if tree:
                    if env_path is None:
                        del os.environ["PYTHONPATH"]
                    else:
                        os.environ["PYTHONPATH"] = env_path
            try:
                results[name].append(throughput(url, server.pid, duration, summary=False))
                if name == "this":
                    results["this_with_summary"].append(throughput(url, server.pid, duration, summary=True))
            finally:
                stop(server)
    return {
        name: {
            "tokens_per_s": round(statistics.median(t for t, _ in v)),
            "server_us_per_token": round(statistics.median(c for _, c in v), 2),
            "runs": [(round(t), round(c, 2)) for t, c in v],
        }
        for name, v in results.items()
    }


def cpu(base_tree: str | None, rounds: int) -> dict[str, Any]:
    """CPU µs per token of ``drive`` in-process (``_drive_cpu.py``), trees alternated; the minimum of all rounds."""
    import subprocess

    configs = [("this", None, False), ("this_with_summary", None, True)]
    if base_tree:
        configs.insert(1, ("base", base_tree, False))
    best: dict[str, list[float]] = {name: [] for name, _, _ in configs}
    for _ in range(rounds):
        for name, tree, summary in configs:
            env = {**os.environ, **({"PYTHONPATH": tree} if tree else {})}
            command = [sys.executable, str(Path(__file__).parent / "_drive_cpu.py")] + (
                ["--summary"] if summary else []
            )
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
            best[name].append(json.loads(out.strip().splitlines()[-1])["us_per_token"])
    return {name: {"min_us_per_token": min(v), "rounds": v} for name, v in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--pace", type=float, default=100.0)
    ap.add_argument("--base-tree", help="another checkout to serve for the no-summary A/B (PYTHONPATH)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--parts", default="latency,cpu,load", help="which parts to run (latency, cpu, load)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pinned = pin_this_process()
    result: dict[str, Any] = {"pinned": pinned}
    parts = set(args.parts.split(","))
    if "latency" in parts:
        result["latency"] = latency(args.pace, args.requests)
    if "cpu" in parts:
        result["cpu"] = cpu(args.base_tree, args.runs)
    if "load" in parts:
        result["load"] = load(args.base_tree, args.runs, args.duration)
    report(result, args.json)


if __name__ == "__main__":
    main()
