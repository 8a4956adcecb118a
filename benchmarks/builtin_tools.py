"""What gpt-oss's built-in tools cost the server, outside the tool's own work.

- ``python local``: one call of ``print(1)`` (a fresh bubblewrap sandbox, its cgroup made and removed),
  beside the same interpreter as a bare subprocess (the sandbox's cost);
- ``browser open``: fetching a ~2 MiB HTML page from loopback and turning it into wrapped text
  (in a worker thread), and the event loop's worst stall meanwhile (should stay small: the parsing
  is off the loop).

    python benchmarks/builtin_tools.py [--calls 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trtllm_responses.tools.browser import BrowserProvider
from trtllm_responses.tools.python_tool import LocalPython
from trtllm_responses.tools.sandbox import setup_sandbox
from trtllm_responses.tools.settings import PythonLimits, ToolSettings

PAGE = (
    "<html><head><title>Big</title></head><body>"
    + "".join(f"<p>para {i} " + "word " * 40 + f"<a href='/x{i}'>link {i}</a></p>" for i in range(8000))
    + "</body></html>"
).encode()


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: Any) -> None:
        pass


async def _lag_probe(stop: asyncio.Event, worst: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.005)
        worst[0] = max(worst[0], time.perf_counter() - start - 0.005)


async def _bare_subprocess(calls: int) -> list[float]:
    """The same interpreter as a plain subprocess, for comparison (``-S``: the sandbox hides site-packages)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            setup_sandbox(PythonLimits()).interpreter,
            "-I",
            "-S",
            "-c",
            "print(1)",
            stdout=asyncio.subprocess.PIPE,
        )
        await proc.communicate()
        times.append(time.perf_counter() - start)
    return times


async def main(calls: int) -> None:
    python = LocalPython(PythonLimits())
    bare = await _bare_subprocess(calls)
    print(
        f"bare subprocess print(1): p50 {statistics.median(bare) * 1e3:.1f} ms, max {max(bare) * 1e3:.1f} ms"
    )
    print(setup_sandbox(PythonLimits()).describe())
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        outcome = await python.call("", "print(1)")
        times.append(time.perf_counter() - start)
        assert not outcome.failed
    print(
        f"python local print(1): p50 {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms"
    )

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/big"
    settings = ToolSettings(browser_backend="searxng:http://127.0.0.1:1", fetch_allow_private=("127.0.0.1",))
    times, lags = [], []
    for _ in range(max(3, calls // 4)):
        browser = BrowserProvider(settings)
        stop, worst = asyncio.Event(), [0.0]
        probe = asyncio.create_task(_lag_probe(stop, worst))
        start = time.perf_counter()
        outcome = await browser.call("open", f'{{"id": "{url}"}}')
        times.append(time.perf_counter() - start)
        stop.set()
        await probe
        lags.append(worst[0])
        assert not outcome.failed, outcome
    httpd.shutdown()
    print(
        f"browser open of a {len(PAGE) / 2**20:.1f} MiB page: p50 {statistics.median(times) * 1e3:.0f} ms; "
        f"worst event-loop stall p50 {statistics.median(lags) * 1e3:.1f} ms, max {max(lags) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20)
    asyncio.run(main(parser.parse_args().calls))
