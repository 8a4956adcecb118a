"""Added latency per tool round trip inside a response (the in-response tool loop, MCP).

A real MCP server (tests/support/mcp_server.py: the ``mcp`` package's MCPServer, streamable HTTP,
in this process) and ``trtllm-responses serve --engine echo`` (a subprocess) on loopback.
Each request makes the echo model call ``demo.add`` once; the client streams and times,
per response, the gap between the call's ``response.mcp_call_arguments.done`` and the
next turn's first ``response.output_item.added``. That gap is everything one round trip
costs: running the call (the MCP session, the call) plus rendering the output back and
starting the next generation. The MCP server's own time (its HTTP handling of every
request of that call, measured by a middleware inside it) is subtracted to get the
server's added latency per round trip.

    python benchmarks/tool_loop.py [--requests 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from _server import pin_this_process, report, start_server, stop  # noqa: E402
from support.mcp_server import MCPTestServer, _serve, build_server  # noqa: E402


class _Timer:
    """ASGI middleware: adds up the MCP server's time handling requests (one tool call at a time)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.busy = 0.0
        self.lock = threading.Lock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["method"] != "GET":  # the GET stream stays open for the session: not work
                with self.lock:
                    self.busy += time.perf_counter() - started


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pinned = pin_this_process()

    mcp = MCPTestServer(url="", sse_url="")
    timer = _Timer(build_server().streamable_http_app())
    mcp.url = _serve(timer, mcp) + "/mcp"
    process, base = start_server(["--mcp_allowed_urls", mcp.url])
    tool = {"type": "mcp", "server_label": "demo", "server_url": mcp.url, "require_approval": "never"}
    body = {"input": 'call demo.add {"a": 2, "b": 3}', "tools": [tool], "stream": True}
    gaps: list[float] = []
    added: list[float] = []
    totals: list[float] = []
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            for i in range(args.requests + 5):
                timer.busy = 0.0
                started = time.perf_counter()
                call_done = next_turn = None
                final: dict[str, Any] = {}
                terminal = False
                with client.stream("POST", "/v1/responses", json=body) as reply:
                    for line in reply.iter_lines():
                        if call_done is None and line == "event: response.mcp_call_arguments.done":
                            call_done = time.perf_counter()
                        elif (
                            call_done is not None
                            and next_turn is None
                            and line == "event: response.output_item.added"
                        ):
                            next_turn = time.perf_counter()
                        elif line == "event: response.completed":
                            terminal = True
                        elif terminal and line.startswith("data: "):
                            final = json.loads(line[6:])["response"]
                            terminal = False
                total = time.perf_counter() - started
                assert final["output"][-1]["content"][0]["text"] == "demo.add returned: 5", final
                assert call_done is not None and next_turn is not None
                if i >= 5:  # warm-up
                    gaps.append(next_turn - call_done)
                    added.append(next_turn - call_done - timer.busy)
                    totals.append(total)
    finally:
        stop(process)
        mcp.stop()
    ms = 1000.0
    report(
        {
            "requests": len(gaps),
            "round_trip_ms_p50": round(statistics.median(gaps) * ms, 2),
            "round_trip_ms_p90": round(_pct(gaps, 0.9) * ms, 2),
            "mcp_server_own_ms_p50": round(
                statistics.median([g - a for g, a in zip(gaps, added, strict=True)]) * ms, 2
            ),
            "added_by_server_ms_p50": round(statistics.median(added) * ms, 2),
            "added_by_server_ms_p90": round(_pct(added, 0.9) * ms, 2),
            "response_total_ms_p50": round(statistics.median(totals) * ms, 2),
            "pinned": pinned,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
