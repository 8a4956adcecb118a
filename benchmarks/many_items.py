"""Loop lag of many-item bodies (issue 44, point 3) and of the echo's 1 MB last message (point 9).

Starts ``serve`` (echo, pinned where possible: ``_server.py``), sends each body ``--runs`` times after a
warm-up (each route's first request, the render workers started) and reports, per body, the server's worst
event-loop lag while it was prepared and answered (``/stats`` ``event_loop_lag``: the wall-clock lag, and
the CPU time the loop's thread spent between two watchdog ticks, which a loaded machine does not inflate),
its longest GC collection of each generation, and the request's time: the median run and the worst. The
goal (docs/limits.md#hostile-input-and-limits): steps under 10 ms; the bound of issue 44: 50 ms.

    .venv/bin/python benchmarks/many_items.py [--items 20000] [--runs 3]

The echo's context window is widened to 400,000 tokens (``serve``'s echo has 131,072, and 20,000 items are
~140,000 tokens): the whole path, stored and answered, is measured, not a refusal. Each body differs from
the last (a run's tag in every item), so no run finds an earlier one's renders cached. Another tree's server
(a base, for an A/B): ``PYTHONPATH=/that/tree .venv/bin/python benchmarks/many_items.py`` (its server
imports the package from there; a tree without the CPU figure reports it as null).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from _server import get_json, pin_this_process, start_server

#: The echo's context window for these bodies (tokens).
WINDOW = 400_000
#: Seconds waited after each request: the server's full GC collection runs once it has been quiet a second
#: (``ops/gc_schedule.py``; a tree that runs it sooner may run it inside the request's window instead).
QUIET = 2.0


def serve_wide(port: str) -> int:
    """``trtllm-responses serve`` (echo) on ``port`` with a window of WINDOW tokens (run as this script)."""
    import functools

    import trtllm_responses.executors as executors
    from trtllm_responses.cli import main as cli_main

    wide = functools.partial(executors.EchoExecutor, max_seq_len=WINDOW)
    executors.EchoExecutor = wide  # type: ignore[misc,assignment]  # serve builds it from here
    return cli_main(["serve", "--port", port, "--log_level", "warning"])


def _post(url: str, body: dict[str, Any]) -> tuple[int, float]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as refused:
        status = refused.code
    return status, time.perf_counter() - started


def _cases(n: int) -> dict[str, tuple[str, Callable[[str], dict[str, Any]]]]:
    """Each body by name: its path, and the body for a run's ``tag``."""
    return {
        f"{n:,} items (/v1/responses)": (
            "/v1/responses",
            lambda tag: {
                "model": "m",
                "input": [{"role": "user", "content": f"item {i} {tag}"} for i in range(n)],
                "max_output_tokens": 8,
            },
        ),
        f"{n + 1:,} messages (/v1/messages)": (
            "/v1/messages",
            lambda tag: {
                "model": "m",
                "max_tokens": 8,
                "messages": [
                    {"role": ("user", "assistant")[i % 2], "content": f"m {i} {tag}"} for i in range(n + 1)
                ],
            },
        ),
        "1 MB last user message (echo)": (
            "/v1/responses",
            lambda tag: {
                "model": "m",
                "input": (tag + " " + " ".join(f"word{i}" for i in range(200_000)))[:1_000_000],
                "max_output_tokens": 8,
            },
        ),
    }


def _measure(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One request: its status and time, the loop's worst lag and GC collections while it was made, and
    the full collection the server then ran once quiet (in the next QUIET seconds)."""
    get_json(url + "/stats?reset=1")
    status, seconds = _post(url + path, body)
    stats = get_json(url + "/stats")
    lag = stats["event_loop_lag"]
    time.sleep(QUIET)
    after = get_json(url + "/stats")["gc"]["generation_2"]["max_since_reset_ms"]
    return {
        "status": status,
        "seconds": seconds,
        "lag_ms": lag["max_since_reset_ms"],
        "held_cpu_ms": lag.get("max_cpu_since_reset_ms"),
        "gc_ms": [stats["gc"][f"generation_{g}"]["max_since_reset_ms"] for g in range(3)],
        "full_gc_after_ms": after,
    }


def _summary(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def spread(key: str) -> list[float] | None:
        values = [r[key] for r in runs]
        if any(v is None for v in values):
            return None
        return [round(statistics.median(values), 1), round(max(values), 1)]

    return {
        "case": name,
        "status": sorted({r["status"] for r in runs}),
        "seconds_median_max": spread("seconds"),
        "lag_ms_median_max": spread("lag_ms"),
        "held_cpu_ms_median_max": spread("held_cpu_ms"),
        "gc_ms_max": [round(max(r["gc_ms"][g] for r in runs), 1) for g in range(3)],
        "full_gc_after_ms_max": round(max(r["full_gc_after_ms"] for r in runs), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pin_this_process()
    # Both cores: pinned to one, its render worker (a child, pinned with it) took the server's core for
    # whole timeslices, which the wall-clock lag counted; the load generator waits while a request runs.
    process, url = start_server(command=[sys.executable, __file__], cpus="0,1")
    try:
        _post(url + "/v1/responses", {"model": "m", "input": "x " * 20_000, "max_output_tokens": 1})
        _post(
            url + "/v1/messages",
            {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]},
        )
        get_json(url + "/stats")  # its first answer (~30 ms: FastAPI builds the route) would follow its reset
        for name, (path, body_of) in _cases(args.items).items():
            runs = []
            for run in range(args.runs):
                runs.append(_measure(url, path, body_of(f"run{run}-{time.time()}")))
            print(json.dumps(_summary(name, runs)), flush=True)
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].isdigit():  # start_server's command: this script, the port
        sys.exit(serve_wide(sys.argv[1]))
    main()
