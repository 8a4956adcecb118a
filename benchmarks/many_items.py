"""Loop lag of many-item bodies (issue 44, point 3) and of the echo's 1 MB last message (point 9).

Starts ``serve`` (echo, pinned where possible: ``_server.py``), sends each body once after a warm-up and
reports the server's worst event-loop lag (``/stats`` ``event_loop_lag``) while it was prepared and
answered, and the request's time. The goal (docs/limits.md#hostile-input-and-limits): steps under 10 ms.

    .venv/bin/python benchmarks/many_items.py [--items 20000]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from typing import Any

from _server import get_json, pin_this_process, start_server


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20_000)
    n = parser.parse_args().items
    pin_this_process()
    process, url = start_server()
    try:
        cases = {
            f"{n:,} items (/v1/responses)": (
                "/v1/responses",
                {"model": "m", "input": [{"role": "user", "content": f"item {i}"} for i in range(n)]},
            ),
            f"{n + 1:,} messages (/v1/messages)": (
                "/v1/messages",
                {
                    "model": "m",
                    "max_tokens": 8,
                    "messages": [
                        {"role": ("user", "assistant")[i % 2], "content": f"m {i}"} for i in range(n + 1)
                    ],
                },
            ),
            "1 MB last user message (echo)": (
                "/v1/responses",
                {"model": "m", "input": " ".join(f"word{i}" for i in range(200_000))[:1_000_000]},
            ),
        }
        _post(url + "/v1/responses", {"model": "m", "input": "x " * 20_000, "max_output_tokens": 1})
        for name, (path, body) in cases.items():
            get_json(url + "/stats?reset=1")
            status, seconds = _post(url + path, {**body, "max_output_tokens": 8} if "input" in body else body)
            lag = get_json(url + "/stats")["event_loop_lag"]["max_since_reset_ms"]
            print(
                json.dumps(
                    {"case": name, "status": status, "seconds": round(seconds, 2), "loop_lag_max_ms": lag}
                )
            )
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    main()
