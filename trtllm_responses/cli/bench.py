"""``trtllm-responses bench``: a load generator for any OpenAI-compatible Responses server.

Closed loop (``--concurrency C``: C connections, each sending its next request
when the last one ends) or open loop (``--rate R``: Poisson arrivals at R
requests/s), streaming or not, after ``--warmup`` requests, for ``--duration``
seconds or ``--requests`` requests. Prompts: ``--prompt`` text, or ``--lorem N``
(the echo executor's ``#lorem N``: exactly N output tokens), ``--max-output-tokens``.

It reports TTFT (first streamed delta of any kind), inter-token latency (gaps
between delta events; events that arrive in one read share its timestamp),
output tokens/s in total and per stream (from each response's usage), requests/s
and errors, and its own CPU cost per token, so a reader can tell whether the
client kept up. With ``--server-pid`` (a local server) it reads the server's CPU
time and memory from /proc.

It speaks HTTP/1.1 on raw asyncio streams (uvloop when installed) and counts SSE
frames by scanning bytes; it parses JSON only for each response's last event.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .bench_wire import RESPONSES, WIRES, Wire

__all__ = ["BenchConfig", "BenchResult", "run_bench", "add_bench_arguments", "cmd_bench", "percentile"]

_END_OF_CHUNKED = b"\r\n0\r\n\r\n"


@dataclass(frozen=True)
class BenchConfig:
    base_url: str = "http://127.0.0.1:8000"
    concurrency: int = 64
    rate: float | None = None
    stream: bool = True
    duration: float | None = 20.0
    requests: int | None = None
    warmup: int = 8
    prompt: str | None = None
    lorem: int | None = 2000
    max_output_tokens: int | None = None
    model: str = "gpt-oss"
    server_pid: int | None = None
    progress: bool = True
    timeout: float = 600.0
    store: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    api: str = (
        "responses"  # or "chat" (POST /v1/chat/completions), "messages" (POST /v1/messages): bench_wire.py
    )


@dataclass
class RequestRecord:
    ok: bool
    start: float
    end: float
    ttft: float | None = None
    output_tokens: int = 0
    deltas: int = 0
    gaps: list[float] = field(default_factory=list)
    first_delta: float | None = None
    error: str | None = None


@dataclass
class BenchResult:
    config: dict[str, Any]
    summary: dict[str, Any]


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class _ResponseReader(asyncio.Protocol):
    """Reads responses on one keep-alive connection; counts SSE deltas as bytes arrive (no coroutine per read)."""

    def __init__(self, wire: Wire = RESPONSES) -> None:
        self.wire = wire
        self._tail_size = max(len(m) for m in wire.deltas + wire.terminals)
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[RequestRecord] | None = None
        self.closed = False
        self._reset(0.0)

    def _reset(self, start: float) -> None:
        self.record = RequestRecord(False, start, start)
        self.head = bytearray()
        self.status = 0
        self.chunked = False
        self.length = -1
        self.body = bytearray()
        self.tail = b""
        self.last = 0.0
        self.terminal: bytearray | None = None  # the stream from its terminal event on

    def begin(self, request: bytes, start: float) -> asyncio.Future[RequestRecord]:
        assert self.transport is not None
        self._reset(start)
        self.done = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.done

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is not None and not self.done.done():
            self._fail(f"connection closed: {exc}")

    def _fail(self, error: str) -> None:
        self.record.error = error
        self.record.end = time.perf_counter()
        assert self.done is not None
        self.done.set_result(self.record)

    def data_received(self, data: bytes) -> None:
        if self.done is None or self.done.done():
            return
        now = time.perf_counter()
        if self.status == 0:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.head[:end]).lower()
            data = bytes(self.head[end + 4 :])
            try:
                self.status = int(head.split(b" ", 2)[1])
                self.chunked = b"transfer-encoding: chunked" in head
                if not self.chunked:
                    self.length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
            except (IndexError, ValueError):
                self._fail(f"bad response head: {head[:200]!r}")
                return
        if self.chunked:
            self._stream(data, now)
        else:
            self.body += data
            if len(self.body) >= self.length:
                self._finish_plain(now)

    def _stream(self, data: bytes, now: float) -> None:
        record = self.record
        scan = self.tail + data
        deltas = self.wire.deltas
        count = scan.count(deltas[0]) + scan.count(deltas[1]) + scan.count(deltas[2])
        if count:
            if record.first_delta is None:
                record.first_delta = now
                record.ttft = now - record.start
            else:
                record.gaps.append(now - self.last)
            if count > 1:
                record.gaps.extend([0.0] * (count - 1))
            record.deltas += count
            self.last = now
        self.tail = scan[-self._tail_size :]
        if self.terminal is None:
            # Only the new bytes (and the carried tail) can hold the terminal event's marker.
            for marker in self.wire.terminals:
                at = scan.find(marker)
                if at >= 0:
                    self.terminal = bytearray(scan[at:])
                    break
        else:
            self.terminal += data
        if self.terminal is not None and self.terminal.endswith(_END_OF_CHUNKED):
            frame = bytes(self.terminal)
            record.end = time.perf_counter()
            try:
                record.output_tokens, error = self.wire.terminal(frame)
            except (IndexError, ValueError, KeyError) as exc:
                self._fail(f"unreadable end of stream: {exc}")
                return
            record.ok = self.status == 200 and error is None
            if error is not None:
                record.error = error
            assert self.done is not None
            self.done.set_result(record)

    def _finish_plain(self, now: float) -> None:
        record = self.record
        record.end = now
        body = bytes(self.body[: self.length])
        if self.status != 200:
            self._fail(f"HTTP {self.status}: {body[:200]!r}")
            return
        try:
            record.output_tokens, error = self.wire.plain(body)
        except ValueError as exc:
            self._fail(f"unreadable body: {exc}")
            return
        record.ok = error is None
        record.error = error
        assert self.done is not None
        self.done.set_result(record)


class _Connection:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, host: str, port: int, wire: Wire = RESPONSES) -> None:
        self.host, self.port = host, port
        self.wire = wire
        self.protocol: _ResponseReader | None = None

    async def send(self, request: bytes, timeout: float) -> RequestRecord:
        start = time.perf_counter()
        try:
            if self.protocol is None or self.protocol.closed:
                loop = asyncio.get_running_loop()
                _, self.protocol = await loop.create_connection(
                    lambda: _ResponseReader(self.wire), self.host, self.port
                )
            return await asyncio.wait_for(self.protocol.begin(request, start), timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            self.close()
            return RequestRecord(False, start, time.perf_counter(), error=f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.close()
        self.protocol = None


class _Client:
    def __init__(self, config: BenchConfig) -> None:
        url = urlsplit(config.base_url)
        if url.scheme != "http":
            raise ValueError("bench speaks plain http:// (put TLS in front of it elsewhere)")
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or 80
        base = url.path.rstrip("/")
        self.wire = WIRES[config.api]
        self.path = base + self.wire.path if base.endswith("/v1") else base + "/v1" + self.wire.path
        self.config = config
        body = self.wire.body(
            _prompt(config), config.stream, config.store, config.max_output_tokens, config.model
        )
        body.update(config.extra_body)
        payload = json.dumps(body).encode()
        self.request = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode() + payload

    async def send(self, conn: _Connection) -> RequestRecord:
        return await conn.send(self.request, self.config.timeout)


def _prompt(config: BenchConfig) -> str:
    if config.prompt is not None:
        return config.prompt
    return f"#lorem {config.lorem or 128}"


def _proc_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _Progress:
    def __init__(self, enabled: bool, config: BenchConfig) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.config = config
        self.last = 0.0

    def update(self, started: float, done: int, tokens: int, final: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (not final and now - self.last < 0.5):
            return
        self.last = now
        elapsed = now - started
        if self.config.requests:
            fraction = done / self.config.requests
        else:
            fraction = elapsed / (self.config.duration or 1)
        fraction = min(fraction, 1.0)
        bar = "#" * int(fraction * 30)
        rate = tokens / elapsed if elapsed > 0 else 0.0
        sys.stderr.write(f"\r[{bar:<30}] {fraction:4.0%} {done} requests, {rate:,.0f} tokens/s ")
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


async def _run(config: BenchConfig) -> BenchResult:
    client = _Client(config)
    records: list[RequestRecord] = []
    pool: list[_Connection] = [
        _Connection(client.host, client.port, client.wire) for _ in range(max(1, config.concurrency))
    ]

    # Warm-up: not recorded.
    await asyncio.gather(*[client.send(pool[i % len(pool)]) for i in range(min(config.warmup, len(pool)))])
    for i in range(config.warmup - min(config.warmup, len(pool))):
        await client.send(pool[i % len(pool)])

    progress = _Progress(config.progress, config)
    stop_at = time.perf_counter() + config.duration if config.duration else float("inf")
    budget = config.requests
    server_cpu0 = _proc_cpu_seconds(config.server_pid) if config.server_pid else None
    cpu0 = time.process_time()
    started = time.perf_counter()
    issued = 0
    tokens_so_far = 0

    def may_issue() -> bool:
        return time.perf_counter() < stop_at and (budget is None or issued < budget)

    async def worker(conn: _Connection) -> None:
        nonlocal issued, tokens_so_far
        while may_issue():
            issued += 1
            record = await client.send(conn)
            records.append(record)
            tokens_so_far += record.output_tokens
            progress.update(started, len(records), tokens_so_far)

    if config.rate:
        free: asyncio.Queue[_Connection] = asyncio.Queue()
        for conn in pool:
            free.put_nowait(conn)
        tasks = []

        async def one() -> None:
            nonlocal tokens_so_far
            conn = await free.get()
            try:
                record = await client.send(conn)
            finally:
                free.put_nowait(conn)
            records.append(record)
            tokens_so_far += record.output_tokens
            progress.update(started, len(records), tokens_so_far)

        rng = random.Random(0)
        next_at = time.perf_counter()
        while may_issue():
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            issued += 1
            tasks.append(asyncio.create_task(one()))
            next_at += rng.expovariate(config.rate)
        await asyncio.gather(*tasks)
    else:
        await asyncio.gather(*[worker(conn) for conn in pool])
    elapsed = time.perf_counter() - started
    client_cpu = time.process_time() - cpu0
    progress.update(started, len(records), tokens_so_far, final=True)
    server_cpu = (
        (_proc_cpu_seconds(config.server_pid) - server_cpu0)
        if config.server_pid and server_cpu0 is not None
        else None
    )
    for conn in pool:
        conn.close()
    return BenchResult(
        config=_config_dict(config), summary=_summarize(records, elapsed, client_cpu, server_cpu, config)
    )


def _config_dict(config: BenchConfig) -> dict[str, Any]:
    return {k: v for k, v in config.__dict__.items() if k != "progress"}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


def _summarize(
    records: list[RequestRecord],
    elapsed: float,
    client_cpu: float,
    server_cpu: float | None,
    config: BenchConfig,
) -> dict[str, Any]:
    ok = [r for r in records if r.ok]
    errors = [r.error for r in records if not r.ok]
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    gaps = [g for r in ok for g in r.gaps]
    tokens = sum(r.output_tokens for r in ok)
    per_stream = [
        r.output_tokens / (r.end - r.first_delta)
        for r in ok
        if r.first_delta is not None and r.end > r.first_delta
    ]
    latencies = [r.end - r.start for r in ok]
    summary: dict[str, Any] = {
        "requests": len(records),
        "errors": len(errors),
        "error_samples": sorted(set(e for e in errors if e))[:3],
        "duration_s": round(elapsed, 3),
        "requests_per_s": round(len(ok) / elapsed, 2) if elapsed else 0.0,
        "output_tokens": tokens,
        "output_tokens_per_s": round(tokens / elapsed, 1) if elapsed else 0.0,
        "per_stream_tokens_per_s_p50": round(percentile(per_stream, 50) or 0.0, 1),
        "ttft_ms": {q: _ms(percentile(ttfts, p)) for q, p in (("p50", 50), ("p90", 90), ("p99", 99))},
        "itl_ms": {
            **{q: _ms(percentile(gaps, p)) for q, p in (("p50", 50), ("p90", 90), ("p99", 99))},
            "max": _ms(max(gaps)) if gaps else None,
        },
        "latency_ms": {q: _ms(percentile(latencies, p)) for q, p in (("p50", 50), ("p99", 99))},
        "client_cpu_s": round(client_cpu, 3),
        "client_cpu_utilization": round(client_cpu / elapsed, 3) if elapsed else 0.0,
        "client_us_per_token": round(client_cpu / tokens * 1e6, 3) if tokens else None,
    }
    if server_cpu is not None and config.server_pid:
        summary["server_cpu_s"] = round(server_cpu, 3)
        summary["server_cpu_utilization"] = round(server_cpu / elapsed, 3) if elapsed else 0.0
        summary["server_us_per_token"] = round(server_cpu / tokens * 1e6, 3) if tokens else None
        summary["server_rss_mib"] = round(_proc_rss_mib(config.server_pid), 1)
    return summary


def run_bench(config: BenchConfig) -> BenchResult:
    """Run a benchmark to its end (uvloop when installed)."""
    try:
        import uvloop

        return uvloop.run(_run(config))
    except ImportError:
        return asyncio.run(_run(config))


def format_table(result: BenchResult) -> str:
    """A readable summary."""
    s = result.summary
    c = result.config
    mode = f"rate {c['rate']}/s" if c.get("rate") else f"concurrency {c['concurrency']}"
    rows = [
        ("target", f"{c['base_url']}  ({mode}, {'streaming' if c['stream'] else 'non-streaming'})"),
        ("requests (errors)", f"{s['requests']} ({s['errors']})"),
        ("duration", f"{s['duration_s']} s"),
        ("requests/s", s["requests_per_s"]),
        ("output tokens/s", f"{s['output_tokens_per_s']:,}"),
        ("per-stream tokens/s p50", s["per_stream_tokens_per_s_p50"]),
        ("TTFT ms p50 / p90 / p99", " / ".join(str(s["ttft_ms"][q]) for q in ("p50", "p90", "p99"))),
        ("ITL ms p50 / p90 / p99", " / ".join(str(s["itl_ms"][q]) for q in ("p50", "p90", "p99"))),
        (
            "client CPU µs/token (util)",
            f"{s['client_us_per_token']} ({s['client_cpu_utilization']:.0%} of a core)",
        ),
    ]
    if "server_us_per_token" in s:
        rows.append(
            (
                "server CPU µs/token (util)",
                f"{s['server_us_per_token']} ({s['server_cpu_utilization']:.0%} of a core)",
            )
        )
        rows.append(("server RSS", f"{s['server_rss_mib']} MiB"))
    if s["error_samples"]:
        rows.append(("errors seen", "; ".join(s["error_samples"])))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The bench flags (shared by the CLI and benchmarks/ scripts); each default is BenchConfig's."""
    d = BenchConfig()
    parser.add_argument("--base-url", default=d.base_url, help="server to load (default: %(default)s)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=d.concurrency,
        help="connections in closed-loop mode (default: %(default)s)",
    )
    parser.add_argument(
        "--rate", type=float, help="open loop: Poisson arrivals per second (connections: --concurrency)"
    )
    parser.add_argument("--no-stream", dest="stream", action="store_false", help="non-streaming requests")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--duration", type=float, help=f"seconds to measure (default: {d.duration:g} unless --requests)"
    )
    group.add_argument("--requests", type=int, help="requests to measure")
    parser.add_argument(
        "--warmup",
        type=int,
        default=d.warmup,
        help="requests sent first and not measured (default: %(default)s)",
    )
    parser.add_argument("--prompt", help="input text (default: '#lorem N' for the echo executor)")
    parser.add_argument(
        "--lorem",
        type=int,
        default=d.lorem,
        help="N for the echo executor's '#lorem N' (default: %(default)s)",
    )
    parser.add_argument("--max-output-tokens", type=int, help="max_output_tokens of each request")
    parser.add_argument("--model", default=d.model, help="(default: %(default)s)")
    parser.add_argument("--store", action="store_true", help="store the responses (default: store false)")
    parser.add_argument(
        "--body-json",
        type=json.loads,
        default=d.extra_body,
        help="extra request fields, e.g. previous_response_id",
    )
    parser.add_argument("--server-pid", type=int, help="a local server's pid: report its CPU time and memory")
    parser.add_argument(
        "--api", choices=sorted(WIRES), default=d.api, help="the API to load (default: %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-progress", dest="progress", action="store_false")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    duration = (
        args.duration if args.duration is not None else (None if args.requests else BenchConfig().duration)
    )
    return BenchConfig(
        base_url=args.base_url,
        concurrency=args.concurrency,
        rate=args.rate,
        stream=args.stream,
        duration=duration,
        requests=args.requests,
        warmup=args.warmup,
        prompt=args.prompt,
        lorem=args.lorem,
        max_output_tokens=args.max_output_tokens,
        model=args.model,
        server_pid=args.server_pid,
        progress=args.progress,
        store=args.store,
        extra_body=args.body_json,
        api=args.api,
    )


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the load generator and print the result."""
    result = run_bench(config_from_args(args))
    if args.json:
        print(json.dumps({"config": result.config, "summary": result.summary}, indent=2))
    else:
        print(format_table(result))
    return 0 if result.summary["errors"] == 0 else 1
