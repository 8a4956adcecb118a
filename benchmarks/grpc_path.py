"""What the gRPC path costs: CPU per token and per turn of ``serve --engine_url grpc://…`` in front of the fake
TensorRT-LLM gRPC engine (``tests/fake_trtllm/grpc_server.py``, a process of its own), beside ``serve
--engine trtllm`` with the fake LLM in-process (docs/a-fleet-of-engines.md#what-the-grpc-path-costs).

The same streams on both (the fake model's deterministic plan: same prompts, same token counts, unpaced):

1. **streams**: ``--streams`` concurrent streamed responses of ``#lorem --tokens``, ``--requests`` in all;
   CPU seconds of the ``serve`` process and of the engine process over the phase, per output token;
2. **sessions**: ``--sessions`` sessions of ``--turns`` turns each (``previous_response_id``, a short answer a
   turn, side by side): CPU of each process per turn.

CPU is ``utime + stime`` of each process from ``/proc/PID/stat`` before and after a phase (its own threads,
not its render worker: ``--render_workers 1``, idle at these prompt sizes); in-process, the engine's work is
in the ``serve`` process and the engine column is empty. The two configurations run ``--runs`` times,
alternated; each figure is the least of its runs (CPU time is steady on a shared machine where wall-clock
throughput is not). The client is this process (httpx, threads), not measured.

    python benchmarks/grpc_path.py [--tokens 2000] [--streams 8] [--requests 24] [--sessions 4] [--turns 40]
                                   [--runs 2] [--json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FAKE = ROOT / "tests" / "fake_trtllm"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from _server import free_port, report  # noqa: E402
from support.checkpoints import make_checkpoint  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of one process (its own threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _wait(
    process: subprocess.Popen[bytes], ready: Callable[[], bool], what: str, timeout: float = 1800
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start (exit {process.poll()})")
        time.sleep(0.1)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _serve(flags: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "trtllm_responses.cli", "serve", *flags, "--port", str(port)]
    command += ["--log_level", "warning", "--render_workers", "1"]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(process, lambda: _answers(url), "serve")
    except RuntimeError:
        process.kill()
        raise
    return process, url


@contextmanager
def deployment(kind: str, folder: Path) -> Iterator[tuple[str, int, int | None]]:
    """``(url, serve pid, engine pid or None)`` of ``kind``: ``grpc`` or ``in-process``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started: list[subprocess.Popen[bytes]] = []
    try:
        engine_pid = None
        if kind == "grpc":
            port, log = free_port(), folder / "engine.log"
            with log.open("ab") as out:
                engine = subprocess.Popen(
                    [sys.executable, "-u", str(FAKE / "grpc_server.py"), "--port", str(port)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=ROOT,
                )
            started.append(engine)
            _wait(engine, lambda: "ready to accept" in log.read_text(), "the fake gRPC engine")
            flags = ["--engine_url", f"grpc://127.0.0.1:{port}"]
            engine_pid = engine.pid
        else:
            flags = [str(make_checkpoint(folder)), "--engine", "trtllm"]
            env["PYTHONPATH"] = f"{FAKE}:{ROOT}"
        serve, url = _serve([*flags, "--served_model_name", "m"], env, folder / f"serve-{kind}.log")
        started.append(serve)
        yield url, serve.pid, engine_pid
    finally:
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def _stream(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed response to its terminal event: the final response."""
    final: dict[str, Any] = {}
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: ") and '"response.completed"' in line[:40]:
                final = httpx.Response(200, content=line[6:]).json()["response"]
    assert final.get("status") == "completed", final
    return final


def _measured(pids: tuple[int, int | None], phase: Callable[[], int]) -> tuple[int, float, float | None]:
    """Run ``phase`` (it returns its count: tokens or turns); ``(count, serve CPU s, engine CPU s)``."""
    serve, engine = pids
    before = cpu_seconds(serve), cpu_seconds(engine) if engine else None
    count = phase()
    serve_cpu = cpu_seconds(serve) - before[0]
    engine_cpu = cpu_seconds(engine) - before[1] if engine and before[1] is not None else None
    return count, serve_cpu, engine_cpu


def streams_phase(url: str, tokens: int, streams: int, requests: int) -> int:
    """``requests`` streams of ``#lorem tokens``, ``streams`` at a time: output tokens."""
    body = {"model": "m", "input": f"#lorem {tokens}", "store": False}
    with httpx.Client(base_url=url, timeout=600, limits=httpx.Limits(max_connections=streams)) as http:
        with ThreadPoolExecutor(streams) as pool:
            finals = list(pool.map(lambda _: _stream(http, body), range(requests)))
    return sum(final["usage"]["output_tokens"] for final in finals)


def sessions_phase(url: str, sessions: int, turns: int) -> int:
    """``sessions`` sessions of ``turns`` short turns side by side: turns run."""

    def session(n: int) -> int:
        previous = None
        with httpx.Client(base_url=url, timeout=600, headers={"x-session-id": f"s{n}"}) as http:
            for turn in range(turns):
                body: dict[str, Any] = {"model": "m", "input": f"Session {n}, turn {turn}: go on."}
                if previous is not None:
                    body["previous_response_id"] = previous
                previous = _stream(http, body)["id"]
        return turns

    with ThreadPoolExecutor(sessions) as pool:
        return sum(pool.map(session, range(sessions)))


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """One run of both phases on a fresh deployment of ``kind``."""
    with (
        tempfile.TemporaryDirectory(prefix="grpc-path-") as folder,
        deployment(kind, Path(folder)) as (
            url,
            serve,
            engine,
        ),
    ):
        _stream(httpx.Client(base_url=url, timeout=600), {"model": "m", "input": "#lorem 50", "store": False})
        pids = (serve, engine)
        tokens, s_cpu, e_cpu = _measured(
            pids, lambda: streams_phase(url, args.tokens, args.streams, args.requests)
        )
        turns, s_turn, e_turn = _measured(pids, lambda: sessions_phase(url, args.sessions, args.turns))
    return {
        "serve_us_per_token": s_cpu / tokens * 1e6,
        "engine_us_per_token": None if e_cpu is None else e_cpu / tokens * 1e6,
        "serve_ms_per_turn": s_turn / turns * 1e3,
        "engine_ms_per_turn": None if e_turn is None else e_turn / turns * 1e3,
        "tokens": tokens,
        "turns": turns,
    }


def _least(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in runs[0]:
        values = [run[key] for run in runs if run[key] is not None]
        out[key] = round(min(values), 3) if values else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"in-process": [], "grpc": []}
    for _ in range(args.runs):
        for kind in runs:
            runs[kind].append(measure(kind, args))
            print(f"{kind}: {runs[kind][-1]}", file=sys.stderr, flush=True)
    inproc, grpc = _least(runs["in-process"]), _least(runs["grpc"])
    result: dict[str, Any] = {f"in_process_{k}": v for k, v in inproc.items() if k not in ("tokens", "turns")}
    result |= {f"grpc_{k}": v for k, v in grpc.items()}
    both = grpc["serve_us_per_token"] + (grpc["engine_us_per_token"] or 0.0)
    result["grpc_total_over_in_process_per_token"] = round(both / inproc["serve_us_per_token"], 2)
    turn = grpc["serve_ms_per_turn"] + (grpc["engine_ms_per_turn"] or 0.0)
    result["grpc_total_over_in_process_per_turn"] = round(turn / inproc["serve_ms_per_turn"], 2)
    report(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
