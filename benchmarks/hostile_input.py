"""Hostile input: what one attacking client does to 64 normal streams.

Starts ``trtllm-responses serve`` (echo executor, paced at ``--tokens_per_second``
per stream), and for each pathological input below runs ``--duration`` seconds
of 64 concurrent ``#lorem N`` streams while one client sends it. Reports per
input: the server's worst event-loop lag (``/stats`` ``event_loop_lag``,
``max_since_reset_ms``), the p99 and the worst inter-token gap of the normal
streams, their errors, what the attacker got back and how long it took, and the
server's RSS after.

    python benchmarks/hostile_input.py [--duration 12] [--only NAME ...] [--json]

Inputs (issue 8): ``{"input": "=" * 100000}``, ``"a" * 400000``, ``"中" * 100000``,
``"a" * 1000000``, 40 requests with distinct 2 MB ``instructions``, an input item
nested 300 deep, 200 slowloris connections (1 byte/s), a 50 MB unterminated header.
Issue 19 (``hostile_surfaces.py``): WebSocket (8 KB compressed into 8 MB, 16 lanes x 64
queued 1 MB creates, a 1 MB ``stream_id``, 2,048 idle sockets from one address),
background (20 x ``#lorem 100000``, 500 creates at once), conversations (a 300 MiB
``Content-Length``, a turn in a 10,000-item conversation) and tool output (a 900 KB MCP
result, streamed and in the background).
Issue 30, points 3, 4 and 8 (``hostile_memory.py``): non-streamed clients hanging up (abort latency),
chat logprobs n 16 x top 20, 1,000 reasoning summaries, a ``minItems: 1e8`` schema, 16 WebSocket lanes
of ``generate: false``.
result, streamed and in the background). Issue 30 (``hostile_expansion.py``): 20 WebSocket connections
x 4 compressed 1.9 MB ``[{},…]`` creates, 150 ``item_reference`` to one 100 KB message, a template
variable used 51 times with a 1.9 MB value, a 300-character ``prompt.id``.

Beside the loop lag, each row reports the worst wait of ``/health`` (asked every 50 ms from a thread of
its own while the attack runs: what a load balancer's probe sees) and the server's peak RSS.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _server import get_json, pin_this_process, report, start_server, stop  # noqa: E402
from hostile_expansion import EXPANSION_ATTACKS, prepare_prompts  # noqa: E402
from hostile_memory import MEMORY_ATTACKS  # noqa: E402
from hostile_surfaces import SURFACE_ATTACKS, start_mcp  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, _proc_rss_mib, run_bench  # noqa: E402

#: Seconds an attacking request may take (``--attack_timeout``); a frozen server may take far longer.
ATTACK_TIMEOUT = 300.0


def _post(url: str, body: dict[str, Any] | bytes) -> str:
    """POST a body; the answer as ``<status> <error code or bytes>``."""
    host, port = url.removeprefix("http://").split(":")
    if isinstance(body, dict):
        # The echo executor echoes the input: a short output keeps the attack about the input's cost.
        body = {**body, "max_output_tokens": 16}
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    conn = http.client.HTTPConnection(host, int(port), timeout=ATTACK_TIMEOUT)
    try:
        conn.request("POST", "/v1/responses", body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read()
    except OSError as exc:
        return f"connection error: {exc}"
    finally:
        conn.close()
    try:
        parsed = json.loads(payload)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        detail = str(error.get("code") or error.get("type")) if isinstance(error, dict) else "ok"
    except ValueError:
        detail = payload[:60].decode("utf-8", "replace")
    return f"{response.status} {detail}"


def _one(body: dict[str, Any]) -> Callable[[str], str]:
    return lambda url: _post(url, body)


def _instructions_storm(url: str) -> str:
    answers: dict[str, int] = {}
    for i in range(40):
        answer = _post(url, {"input": "hi", "instructions": f"{i:08d}" + "x" * (2 << 20)})
        answers[answer] = answers.get(answer, 0) + 1
    return ", ".join(f"{n} x {a}" for a, n in answers.items())


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return {"input": [{"type": "message", "role": "user", "content": "hi", "x": value}]}


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _slowloris(url: str, connections: int = 200, limit_s: float = 120.0) -> str:
    """Open ``connections`` and send one header byte a second on each until the server closes them."""
    head = (
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 1000
    )
    socks = [socket.create_connection(_address(url), timeout=5) for _ in range(connections)]
    for sock in socks:
        sock.setblocking(False)
    opened = time.monotonic()
    closed_at: dict[int, float] = {}
    i = 0
    while len(closed_at) < len(socks) and time.monotonic() - opened < limit_s:
        for n, sock in enumerate(socks):
            if n in closed_at:
                continue
            try:
                if sock.recv(65536) == b"":
                    closed_at[n] = time.monotonic() - opened
                    continue
                closed_at[n] = time.monotonic() - opened  # answered (408): closed right after
            except BlockingIOError:
                pass
            except OSError:
                closed_at[n] = time.monotonic() - opened
                continue
            try:
                sock.send(head[i % len(head) : i % len(head) + 1])
            except OSError:
                closed_at[n] = time.monotonic() - opened
        i += 1
        time.sleep(1.0)
    for sock in socks:
        sock.close()
    still = len(socks) - len(closed_at)
    last = max(closed_at.values(), default=0.0)
    return (
        f"{len(closed_at)}/{len(socks)} closed by the server, the last after {last:.1f} s; {still} still open"
    )


def _huge_header(url: str, total: int = 50 << 20, chunk: int = 64 << 10) -> str:
    """Send an unterminated header of ``total`` bytes; report how much the server took before answering."""
    sock = socket.create_connection(_address(url), timeout=30)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
    sent = 0
    answer = b""
    block = b"a" * chunk
    sock.settimeout(0.001)
    try:
        while sent < total:
            try:
                sock.sendall(block)
            except TimeoutError:
                pass
            except OSError:
                break
            sent += chunk
            try:
                answer = sock.recv(65536)
                break
            except (BlockingIOError, TimeoutError):
                continue
            except OSError:
                break
        if not answer:
            sock.settimeout(30)
            try:
                answer = sock.recv(65536)
            except OSError:
                pass
    finally:
        sock.close()
    status = answer.split(b"\r\n", 1)[0].decode("latin-1") or "no answer"
    return f"{status!r} after {sent / (1 << 20):.2f} MiB sent"


ATTACKS: dict[str, Callable[[str], str]] = {
    "baseline (no attack)": lambda url: "none",
    'input "=" x 100000': _one({"input": "=" * 100_000}),
    'input "a" x 400000': _one({"input": "a" * 400_000}),
    'input "中" x 100000': _one({"input": "中" * 100_000}),
    'input "a" x 1000000': _one({"input": "a" * 1_000_000}),
    "40 x 2 MB distinct instructions": _instructions_storm,
    "input item nested 300 deep": _one(_nested(300)),
    "200 slowloris connections": _slowloris,
    "50 MB unterminated header": _huge_header,
    **SURFACE_ATTACKS,
    **MEMORY_ATTACKS,  # issue 30's points 3, 4 and 8: hostile_memory.py
    **EXPANSION_ATTACKS,
}


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: The /health prober: its own process on any core, so that the attacking threads and the load generator
#: of this one (pinned to one core) cannot delay its asks.
_PROBE = """
import http.client, os, sys, threading, time
os.sched_setaffinity(0, range(os.cpu_count() or 1))  # not the load generator's pinned core
host, port, every = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
worst, failures = 0.0, 0
while not done.is_set():
    started = time.monotonic()
    try:
        conn = http.client.HTTPConnection(host, port, timeout=300)
        conn.request("GET", "/health")
        conn.getresponse().read()
        conn.close()
    except OSError:
        failures += 1
    worst = max(worst, time.monotonic() - started)
    time.sleep(every)
print(worst, failures)
"""


class HealthProbe:
    """Asks ``/health`` every ``every`` seconds from a process of its own until stopped; ``worst`` is its
    longest wait (seconds); a thread here samples the server's RSS (``peak_rss``, MiB)."""

    def __init__(self, url: str, pid: int, every: float = 0.05) -> None:
        self.url, self.pid, self.every = url, pid, every
        self.worst = 0.0
        self.peak_rss = 0.0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._process: subprocess.Popen[str] | None = None

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, _proc_rss_mib(self.pid))
            time.sleep(self.every)

    def start(self) -> None:
        host, port = _address(self.url)
        self._process = subprocess.Popen(
            [sys.executable, "-c", _PROBE, host, str(port), str(self.every)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(ATTACK_TIMEOUT)
        assert self._process is not None
        out, _ = self._process.communicate("", timeout=ATTACK_TIMEOUT)
        worst, failures = out.split()
        self.worst, self.failures = float(worst), int(failures)


def run_attack(
    name: str, server_pid: int, url: str, duration: float, lorem: int, concurrency: int
) -> dict[str, Any]:
    get_json(url + "/stats?reset=1")
    rss_before = _proc_rss_mib(server_pid)
    outcome: dict[str, Any] = {}

    def attack() -> None:
        time.sleep(1.0)  # the streams are running
        # The lag of the attack's own window, apart from the phase's (which includes 64 streams starting
        # at the same instant: asyncio takes all their requests in one loop iteration).
        get_json(url + "/stats?reset=1")
        probe = HealthProbe(url, server_pid)
        probe.start()
        cpu = _cpu_seconds(server_pid)
        started = time.monotonic()
        try:
            outcome["answer"] = ATTACKS[name](url)
        finally:
            outcome["attack_s"] = round(time.monotonic() - started, 2)
            time.sleep(0.5)  # what the attack left running ends inside the window
            probe.stop()
        outcome["server_cpu_s"] = round(
            _cpu_seconds(server_pid) - cpu, 2
        )  # load-independent, streams' included
        outcome["health_worst_ms"] = round(probe.worst * 1000, 1)
        outcome["health_failures"] = probe.failures
        outcome["peak_rss_mib"] = round(probe.peak_rss, 1)
        outcome["attack_lag"] = get_json(url + "/stats")["event_loop_lag"]["max_since_reset_ms"]

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    config = BenchConfig(
        base_url=url,
        concurrency=concurrency,
        lorem=lorem,
        duration=duration,
        warmup=0,
        server_pid=server_pid,
        progress=False,
        timeout=ATTACK_TIMEOUT,
    )
    summary = run_bench(config).summary
    attacker.join(ATTACK_TIMEOUT)
    try:
        lag = get_json(url + "/stats")["event_loop_lag"]["max_since_reset_ms"]
    except OSError:
        lag = None  # the server did not answer /stats within 30 s
    return {
        "attack": name,
        "answer": outcome.get("answer", "still running"),
        "attack_s": outcome.get("attack_s"),
        "loop_lag_max_ms": lag,
        "attack_window_loop_lag_max_ms": outcome.get("attack_lag"),
        "health_worst_ms": outcome.get("health_worst_ms"),
        "server_cpu_s": outcome.get("server_cpu_s"),
        "health_failures": outcome.get("health_failures"),
        "peak_rss_mib": outcome.get("peak_rss_mib"),
        "itl_p99_ms": summary["itl_ms"]["p99"],
        "itl_max_ms": summary["itl_ms"].get("max"),
        "streams": summary["requests"],
        "stream_errors": summary["errors"],
        "rss_before_mib": round(rss_before, 1),
        "rss_after_mib": round(_proc_rss_mib(server_pid), 1),
    }


def main() -> None:
    global ATTACK_TIMEOUT  # the attacks read it
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=12.0, help="seconds of normal load per input")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--lorem", type=int, default=200, help="tokens per normal stream")
    ap.add_argument("--tokens_per_second", type=float, default=100.0, help="echo pacing per stream")
    ap.add_argument("--only", nargs="*", help="substrings of the inputs to run (default: all)")
    ap.add_argument(
        "--attack_timeout", type=float, default=ATTACK_TIMEOUT, help="seconds per attacking request"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ATTACK_TIMEOUT = args.attack_timeout

    pin_this_process()
    mcp_url, stop_mcp = start_mcp()
    prompts = prepare_prompts(Path(tempfile.mkdtemp(prefix="hostile-prompts-")))
    server, url = start_server(
        [
            "--echo_tokens_per_second",
            str(args.tokens_per_second),
            "--mcp_allowed_urls",
            mcp_url,
            "--prompts",
            str(prompts),
        ]
    )
    rows = []
    try:
        for name in ATTACKS:
            if args.only and not any(part in name for part in args.only):
                continue
            row = run_attack(name, server.pid, url, args.duration, args.lorem, args.concurrency)
            rows.append(row)
            if not args.json:
                print(json.dumps(row, ensure_ascii=False), flush=True)
            if server.poll() is not None:
                rows.append({"attack": name, "answer": "the server exited"})
                break
    finally:
        stop(server)
        stop_mcp()
        shutil.rmtree(prompts, ignore_errors=True)
    attacked = [r for r in rows if r["attack"] != "baseline (no attack)" and "loop_lag_max_ms" in r]
    lags = [r["loop_lag_max_ms"] for r in attacked]
    result = {
        "duration_s": args.duration,
        "concurrency": args.concurrency,
        "tokens_per_second": args.tokens_per_second,
        # An unanswered /stats is reported as the attack timeout: the loop was frozen at least that long.
        "worst_loop_lag_ms": max(
            (lag if lag is not None else ATTACK_TIMEOUT * 1000 for lag in lags), default=None
        ),
        "worst_attack_window_loop_lag_ms": max(
            (
                r["attack_window_loop_lag_max_ms"]
                if r.get("attack_window_loop_lag_max_ms") is not None
                else ATTACK_TIMEOUT * 1000
                for r in attacked
            ),
            default=None,
        ),
        "baseline_loop_lag_ms": next(
            (r.get("loop_lag_max_ms") for r in rows if r["attack"] == "baseline (no attack)"), None
        ),
        "worst_itl_p99_ms": max((r["itl_p99_ms"] or 0 for r in attacked), default=None),
        "worst_health_ms": max((r.get("health_worst_ms") or 0 for r in attacked), default=None),
        "stream_errors": sum(r.get("stream_errors", 0) for r in rows),
        "attacks": rows,
    }
    result["load_average"] = list(os.getloadavg())
    report(result, args.json)


if __name__ == "__main__":
    main()
