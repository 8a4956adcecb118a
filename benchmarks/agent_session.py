"""Coding-agent sessions shaped like Codex CLI's, sent three ways: per-turn server cost as the prompt grows.

A session (``_codex_session.py``) is TURNS requests (default 40) growing the prompt to ~120k tokens: each
turn the model (the echo executor) calls ``shell`` and the next turn brings the call's output, ~2.4-3.5k
tokens; every ANSWER_EVERY-th turn (default 10) it gives a final answer instead (after which Harmony drops
the finished turns' reasoning) and the next turn brings a new user request. Requests carry what Codex
sends: ``instructions``, function ``tools``, ``reasoning.summary: auto``, ``include:
["reasoning.encrypted_content"]`` (the servers get an encryption key), ``prompt_cache_key``, streaming.
Three ways, each on a fresh server:

- ``replay``: ``store: false``, the whole history every turn (every earlier item as the server returned
  it, encrypted reasoning included), no ``previous_response_id``: Codex's own way;
- ``previous_response_id``: ``store: true``, only the new items, over HTTP;
- ``websocket``: one socket per session, ``store: false``, ``previous_response_id`` from the
  connection's local state, only the new items.

SESSIONS sessions run at once (``--sessions 1,8``) in lock-step: turn t of every session is sent
together, so at 8 or 64 sessions a turn's figures include queueing behind the other sessions' turn t (a
burst, the worst case for that many sessions); ``--gap-ms G`` sends session i's request i x G ms after the
first instead (arrivals spread as sessions busy with generation and tools would be). A warm-up session of two turns precedes each run. Per turn,
across sessions:

- server-added latency: the server's own measurement (``ServerMetrics.record_handoff``), request
  received (HTTP: body read; WebSocket: message parsed) to prompt handed to the executor, read from
  ``GET /stats`` (reset before each turn): its p50 and p99 over that turn's requests;
- TTFT, client side: request sent to the first generated-token event (the first ``*.delta``); also to
  ``response.created`` and to the terminal event (JSON only);
- RSS of the server process (``/proc/PID/status``) after the turn;
- prefix reuse: the share of the turn's prompt tokens that begin as the previous turn's prompt followed by
  what the model wrote (what an engine's prefix cache could reuse). The echo reports no ``cached_tokens``,
  so it comes from the prompts themselves: one session per way on a server whose echo executor writes
  each generation's prompt and output tokens to a tape (``_recording_server.py``). The prompts are
  deterministic, so this holds for every session and concurrency.

    python benchmarks/agent_session.py [--sessions 1,8[,64]] [--turns 40] [--answer-every 10] [--gap-ms 0]
                                       [--ways replay,previous_response_id,websocket] [--no-reuse] [--json]
                                       [--no-charts]

``--kv`` is the KV mode (``_kv_sessions.py``): no server; Codex-shaped sessions (64 and 256 by default, 40
turns, tool pauses and users' pauses drawn from a Codex trace's shape) in simulated time against the fake
TensorRT-LLM's KV pool (``tests/fake_trtllm/tensorrt_llm/_kv_pool.py``) holding a quarter of their working
set, with the retention the TensorRT-LLM executor sends before issue 41 (``main``: none) and after it
(``paused``, ``ended``), with and without a host tier: prefill tokens recomputed per turn and turns that
missed their prefix (docs/sessions-and-kv-cache.md#retention).

    python benchmarks/agent_session.py --kv [--kv-sessions 64,256] [--kv-pool-share 0.25]
                                            [--kv-host-shares 0,0.5] [--kv-scale 4] [--json]

Unless ``--no-charts``, it draws the per-turn server-added latency of each way and session count into
``benchmarks/charts/agent_session.svg`` (``charts.py``; matplotlib, the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from trtllm_responses.executors.trtllm_kv import DEFAULT_TOOL_PAUSE_SECONDS

sys.path.insert(0, str(Path(__file__).resolve().parent))
import charts  # noqa: E402
from _codex_session import WAYS, Session, is_answer_turn, request_body  # noqa: E402
from _kv_sessions import kv_main, table  # noqa: E402
from _server import pin_this_process, start_server, stop  # noqa: E402

HERE = Path(__file__).resolve().parent
TABLE_TURNS = (1, 5, 10, 20, 30, 40)
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
WARMUP_TURNS = 2
FRESH_INDEX = 100_000  # the control sessions' indices: other texts than any measured session's

# -- one turn over the wire -----------------------------------------------------------------------------


@dataclass
class Turn:
    """What the client saw of one response: its id, output, prompt size and times (ms from sending)."""

    response_id: str
    output: list[dict[str, Any]]
    prompt_tokens: int
    created_ms: float
    ttft_ms: float | None
    total_ms: float


class EventClock:
    """Times a response's events from the moment its request was sent."""

    def __init__(self) -> None:
        self.sent = time.perf_counter()
        self.created: float | None = None
        self.first_token: float | None = None

    def see(self, event: dict[str, Any]) -> Turn | None:
        """Note one event; the Turn once the terminal event arrives."""
        kind = event["type"]
        now = time.perf_counter()
        if kind == "response.created":
            self.created = now
        elif self.first_token is None and kind.endswith(".delta"):
            self.first_token = now
        elif kind == "error":
            raise RuntimeError(f"error event: {event}")
        elif kind in TERMINAL:
            response = event["response"]
            if kind != "response.completed" or self.created is None:
                raise RuntimeError(f"turn ended {kind}: {response.get('error') or response.get('status')}")
            ms = lambda t: (t - self.sent) * 1e3  # noqa: E731
            return Turn(
                response["id"],
                response["output"],
                response["usage"]["input_tokens"],
                ms(self.created),
                ms(self.first_token) if self.first_token is not None else None,
                ms(now),
            )
        return None


async def http_turn(client: httpx.AsyncClient, payload: bytes) -> Turn:
    """POST one streaming create (``payload``: the JSON body) and read its SSE events."""
    clock = EventClock()
    headers = {"Content-Type": "application/json"}
    async with client.stream("POST", "/v1/responses", content=payload, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                turn = clock.see(json.loads(line[6:]))
                if turn is not None:
                    return turn
    raise RuntimeError("the stream ended without a terminal event")


async def ws_turn(socket: ClientConnection, payload: str) -> Turn:
    """Send one ``response.create`` on ``socket`` and read its events."""
    clock = EventClock()
    await socket.send(payload)
    while True:
        turn = clock.see(json.loads(await socket.recv()))
        if turn is not None:
            return turn


# -- a run: one way, N sessions in lock-step, one server -------------------------------------------------


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid``, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-100), as /stats computes its own."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * (len(ordered) - 1) + 0.5))]


@dataclass
class Run:
    """A way's sessions on one server: the client, and each session's socket (websocket way)."""

    way: str
    client: httpx.AsyncClient
    sessions: list[Session]
    gap: float = 0.0  # seconds between sessions' requests of a turn (0: all at once)
    sockets: list[ClientConnection] = field(default_factory=list)

    async def turn(self, number: int) -> list[Turn]:
        """Turn ``number`` of every session: session i's request sent i x ``gap`` after the first."""
        for session in self.sessions:
            session.begin_turn(number)
        turns = await self.send_all()
        for session, turn in zip(self.sessions, turns, strict=True):
            session.end_turn(turn.response_id, turn.output)
        return turns

    async def send_all(self) -> list[Turn]:
        """Each session's current request (``request_body``), session i's sent i x ``gap`` after the first."""
        # Written as the clients write them: compact, non-ASCII as is (the openai SDK's ``openapi_dumps``,
        # httpx's ``json=``; Codex's serde_json writes the same).
        payloads = [
            json.dumps(request_body(self.way, s), ensure_ascii=False, separators=(",", ":"))
            for s in self.sessions
        ]
        return list(await asyncio.gather(*(self._send(i, payload) for i, payload in enumerate(payloads))))

    async def _send(self, i: int, payload: str) -> Turn:
        if self.gap:
            await asyncio.sleep(i * self.gap)
        if self.way == "websocket":
            return await ws_turn(self.sockets[i], payload)
        return await http_turn(self.client, payload.encode())


async def open_run(
    way: str, base_url: str, client: httpx.AsyncClient, sessions: list[Session], gap: float = 0.0
) -> Run:
    run = Run(way, client, sessions, gap)
    if way == "websocket":
        url = base_url.replace("http://", "ws://") + "/v1/responses"
        run.sockets = [await connect(url, max_size=None) for _ in sessions]
    return run


async def close_run(run: Run) -> None:
    for socket in run.sockets:
        await socket.close()


def new_sessions(count: int, answer_every: int, prefix: str) -> list[Session]:
    return [Session(i, f"{prefix}-{i}", answer_every) for i in range(count)]


@dataclass(frozen=True)
class Plan:
    """How the sessions run: their length, how often the model answers, the gap between sessions' requests."""

    turns: int
    answer_every: int
    gap: float  # seconds
    frontends: int = 1  # serve --num_serve_frontends (on a SQLite store beside the key when > 1)
    server_cpus: str | None = None  # taskset's CPU list for the server (default: _server.SERVER_CPU)


async def measure_way(way: str, base_url: str, pid: int, sessions: int, plan: Plan) -> list[dict[str, Any]]:
    """Run ``sessions`` sessions ``way``; one row of figures per turn.

    A warm-up session of WARMUP_TURNS turns goes first (the server's first requests pay one-time costs).
    """
    limits = httpx.Limits(max_connections=sessions + 4, max_keepalive_connections=sessions + 4)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as client:
        warm = await open_run(way, base_url, client, new_sessions(1, plan.answer_every, "warmup"))
        for number in range(1, WARMUP_TURNS + 1):
            await warm.turn(number)
        await close_run(warm)
        measured = new_sessions(sessions, plan.answer_every, f"{way}-{sessions}")
        run = await open_run(way, base_url, client, measured, plan.gap)
        rows = []
        try:
            hits = 0
            for number in range(1, plan.turns + 1):
                (await client.get("/stats", params={"reset": "1"})).raise_for_status()
                results = await run.turn(number)
                stats = (await client.get("/stats")).json()
                rows.append(turn_row(number, results, stats["server_added_latency"], rss_mib(pid)))
                # replays decoded from their last turn's bytes this turn (request/replay_prefix.py)
                prefixes = (stats.get("caches") or {}).get("replay_prefixes")
                if prefixes is not None:
                    rows[-1]["prefix_hits"], hits = prefixes["hits"] - hits, prefixes["hits"]
            # The control: each session's first turn again (new sessions), bringing what the last turn
            # brought new: the same server, the same moment, no history. Its row is last, marked "fresh".
            for session in measured:
                session.index += FRESH_INDEX
                session.first_turn_like(plan.turns)
            (await client.get("/stats", params={"reset": "1"})).raise_for_status()
            results = await run.send_all()
            added = (await client.get("/stats")).json()["server_added_latency"]
            rows.append({**turn_row(plan.turns, results, added, rss_mib(pid)), "fresh": True})
        finally:
            await close_run(run)
    return rows


def turn_row(number: int, turns: list[Turn], added: dict[str, Any], rss: float) -> dict[str, Any]:
    """One turn's figures across sessions."""
    if added["count"] != len(turns):
        raise RuntimeError(f"turn {number}: /stats has {added['count']} handoffs for {len(turns)} requests")
    ttft = [t.ttft_ms for t in turns if t.ttft_ms is not None]
    return {
        "turn": number,
        "prompt_tokens": int(statistics.median(t.prompt_tokens for t in turns)),
        "server_added_ms_p50": added["p50_ms"],
        "server_added_ms_p99": added["p99_ms"],
        "ttft_ms_p50": round(percentile(ttft, 50), 3),
        "ttft_ms_p99": round(percentile(ttft, 99), 3),
        "created_ms_p50": round(percentile([t.created_ms for t in turns], 50), 3),
        "total_ms_p50": round(percentile([t.total_ms for t in turns], 50), 3),
        "rss_mib": round(rss, 1),
    }


def encryption_key_file(folder: str) -> str:
    """A fresh AES-256 key for the servers (so reasoning items carry ``encrypted_content``)."""
    path = os.path.join(folder, "encryption.key")
    with open(path, "w") as f:
        f.write(base64.b64encode(os.urandom(32)).decode())
    return path


def timed_run(way: str, sessions: int, plan: Plan, key_file: str) -> list[dict[str, Any]]:
    """``measure_way`` on a fresh plain server (``serve --engine echo``), or group of ``plan.frontends``."""
    flags = ["--encryption_key_file", key_file]
    if plan.frontends > 1:
        store = os.path.join(os.path.dirname(key_file), f"store-{time.monotonic_ns()}.db")
        flags += ["--num_serve_frontends", str(plan.frontends), "--store", f"sqlite:///{store}"]
    process, url = start_server(flags, cpus=plan.server_cpus)
    try:
        return asyncio.run(measure_way(way, url, process.pid, sessions, plan))
    finally:
        stop(process)


def repeated_runs(way: str, sessions: int, plan: Plan, key_file: str, repeat: int) -> list[dict[str, Any]]:
    """``timed_run`` ``repeat`` times, each on a fresh server; per turn, each figure's median over the runs.

    One session's p50 for a turn is one request: a single descheduling of the server (this is a shared
    2-core VM) moves it by 5-10 ms. The median of a few runs is what the server costs, not what the
    machine did to one request."""
    runs = [timed_run(way, sessions, plan, key_file) for _ in range(repeat)]
    if repeat == 1:
        return runs[0]
    rows = []
    for turn_rows in zip(*runs, strict=True):
        row = dict(turn_rows[0])
        for key, value in row.items():
            if key != "turn" and isinstance(value, (int, float)):
                row[key] = round(statistics.median(r[key] for r in turn_rows), 3)
        row["runs"] = repeat
        rows.append(row)
    return rows


# -- prefix reuse ------------------------------------------------------------------------------------


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    step = 4096
    while i < n and a[i : i + step] == b[i : i + step]:  # whole chunks compare in C
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return min(i, n)


async def record_session(way: str, base_url: str, turns: int, answer_every: int) -> list[str]:
    """One session ``way``; its response ids, turn by turn (the prompts do not depend on timing)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        run = await open_run(way, base_url, client, new_sessions(1, answer_every, f"reuse-{way}"))
        try:
            return [(await run.turn(number))[0].response_id for number in range(1, turns + 1)]
        finally:
            await close_run(run)


def prefix_reuse(way: str, plan: Plan, key_file: str, folder: str) -> list[dict[str, Any]]:
    """One session ``way`` on the recording server; per turn from the second: its prompt's length, the
    previous turn's prompt and output lengths, and how many tokens of this prompt begin as those two."""
    tape = os.path.join(folder, f"tape-{way}.jsonl")
    command = [sys.executable, str(HERE / "_recording_server.py"), tape, "--encryption_key_file", key_file]
    process, url = start_server(command=command)
    try:
        ids = asyncio.run(record_session(way, url, plan.turns, plan.answer_every))
    finally:
        stop(process)
    generations = {}
    with open(tape, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            generations[record["id"]] = record
    turns_out = []
    for number, (previous, current) in enumerate(zip(ids, ids[1:], strict=False), start=2):
        before, prompt = generations[previous], generations[current]["prompt"]
        turns_out.append(
            {
                "turn": number,
                "prompt_tokens": len(prompt),
                "previous_prompt_tokens": len(before["prompt"]),
                "previous_output_tokens": len(before["output"]),
                "reused_tokens": common_prefix(prompt, before["prompt"] + before["output"]),
                "after_answer": is_answer_turn(number - 1, plan.answer_every),
            }
        )
    return turns_out


def reuse_share(turn: dict[str, Any]) -> float:
    """The share of the turn's prompt that is the previous prompt + output."""
    return turn["reused_tokens"] / turn["prompt_tokens"]


def reuse_bound(turn: dict[str, Any]) -> float:
    """The share a pure extension of the previous prompt + output would reuse."""
    before = turn["previous_prompt_tokens"] + turn["previous_output_tokens"]
    return min(before, turn["prompt_tokens"]) / turn["prompt_tokens"]


# -- report --------------------------------------------------------------------------------------------


def turn_table(rows: list[dict[str, Any]], reuse: list[dict[str, Any]]) -> list[str]:
    """The human table of one run: the TABLE_TURNS rows."""
    shares = {turn["turn"]: reuse_share(turn) for turn in reuse}
    lines = ["  turn  prompt tokens  server-added p50 / p99 ms  TTFT p50 ms  RSS MiB  prefix reuse"]
    for row in rows:
        if row.get("fresh"):
            lines.append(
                f"  {'1*':>4}  {row['prompt_tokens']:13,}  "
                f"{row['server_added_ms_p50']:11.2f} / {row['server_added_ms_p99']:<11.2f}  "
                f"{row['ttft_ms_p50']:11.2f}  {row['rss_mib']:7.0f}  "
                f"(* a new session's turn 1 with turn {row['turn']}'s new input)"
            )
            continue
        if row["turn"] not in TABLE_TURNS:
            continue
        share = shares.get(row["turn"])
        lines.append(
            f"  {row['turn']:4}  {row['prompt_tokens']:13,}  "
            f"{row['server_added_ms_p50']:11.2f} / {row['server_added_ms_p99']:<11.2f}  "
            f"{row['ttft_ms_p50']:11.2f}  {row['rss_mib']:7.0f}  "
            + ("           -" if share is None else f"{share:12.1%}")
        )
    return lines


def against_targets(
    runs: dict[str, dict[str, list[dict[str, Any]]]], reuse: dict[str, Any]
) -> list[dict[str, Any]]:
    """Where the figures stand against issue 27's targets (context for its A/B, not a claim): one check
    per target, its value naming each way (and session count)."""
    checks = []
    ends = {
        f"{way}/{n}": (
            rows[0]["server_added_ms_p50"],
            [r for r in rows if not r.get("fresh")][-1]["server_added_ms_p50"],
            [r["server_added_ms_p50"] for r in rows if r.get("fresh")],
        )
        for way, by_sessions in runs.items()
        for n, rows in by_sessions.items()
    }
    if ends:
        checks.append(
            {
                "target": "agent sessions: last turn's server-added p50 <= 5 ms and <= 1.5x turn 1's, every way",
                "value": ", ".join(f"{k} {a:.1f} -> {b:.1f} ms" for k, (a, b, _) in ends.items()),
                "met": all(b <= 5 and b <= 1.5 * a for a, b, _ in ends.values()),
            }
        )
        checks.append(
            {
                "target": "agent sessions: last turn's server-added p50 <= 1.5x a new session's turn 1 "
                "bringing the same new input (what the history adds), every way",
                "value": ", ".join(f"{k} {f[0]:.1f} vs {b:.1f} ms" for k, (_, b, f) in ends.items() if f),
                "met": all(f and b <= 1.5 * f[0] for _, b, f in ends.values()),
            }
        )
    worst = {
        way: max(r["server_added_ms_p99"] for r in by_sessions[n])
        for way, by_sessions in runs.items()
        for n in by_sessions
        if int(n) >= 64
    }
    if worst:
        checks.append(
            {
                "target": "agent sessions: server-added p99 <= 25 ms at 64 sessions, every turn",
                "value": ", ".join(f"{way} worst {ms:.1f} ms" for way, ms in worst.items()),
                "met": all(ms <= 25 for ms in worst.values()),
            }
        )
    # Only turns whose new input is under 10% of the prompt can reach 90%, whatever the server does; and
    # after a final answer Harmony drops the finished turns' reasoning (the one break it forces).
    lowest = {
        way: min(
            (reuse_share(t), t["turn"]) for t in turns if reuse_bound(t) >= 0.9 and not t["after_answer"]
        )
        for way, turns in reuse.items()
        if any(reuse_bound(t) >= 0.9 and not t["after_answer"] for t in turns)
    }
    if lowest:
        checks.append(
            {
                "target": "agent sessions: prefix reuse >= 90% on every turn whose new input is < 10% of it "
                "and that Harmony lets extend (not the turn after a final answer)",
                "value": ", ".join(
                    f"{way} lowest {share:.1%} (turn {at}); whole session {session_reuse(reuse[way]):.1%}"
                    for way, (share, at) in lowest.items()
                ),
                "met": all(share >= 0.9 for share, _ in lowest.values()),
            }
        )
    return checks


def session_reuse(turns: list[dict[str, Any]]) -> float:
    """The share of all the session's prompt tokens (turn 2 on) that an engine's prefix cache could reuse."""
    return sum(t["reused_tokens"] for t in turns) / sum(t["prompt_tokens"] for t in turns)


def reuse_breaks(turns: list[dict[str, Any]]) -> str:
    """Where prompts stop being the previous prompt + output: in the model's last output, or earlier."""
    lost_output = [
        t["previous_prompt_tokens"] + t["previous_output_tokens"] - t["reused_tokens"]
        for t in turns
        if t["reused_tokens"] >= t["previous_prompt_tokens"]
    ]
    history = [
        f"turn {t['turn']} ({reuse_share(t):.1%})"
        for t in turns
        if t["reused_tokens"] < t["previous_prompt_tokens"]
    ]
    parts = []
    if lost_output:
        parts.append(
            f"of the previous output's tokens, median {statistics.median(lost_output):.0f} "
            f"of {statistics.median(t['previous_output_tokens'] for t in turns):.0f} are not reused"
        )
    if history:
        parts.append("the previous prompt itself is not reused at " + ", ".join(history))
    return "; ".join(parts) or "every prompt extends the previous prompt + output"


def print_report(result: dict[str, Any]) -> None:
    print(
        f"{result['turns']} turns, a final answer every {result['answer_every']} turns; "
        f"{result['gap_ms']} ms between sessions' requests of a turn; "
        f"server pinned: {result['pinned']}; {result['date']}, load average {result['load_average']}"
    )
    for way, by_sessions in result["runs"].items():
        for sessions, rows in by_sessions.items():
            print(f"\n{way}, {sessions} session(s) at once")
            for line in turn_table(rows, result["prefix_reuse"].get(way, [])):
                print(line)
    for way, turns in result["prefix_reuse"].items():
        print(f"\n{way} prefix reuse: {reuse_breaks(turns)}; whole session {session_reuse(turns):.1%}")
    print()
    for check in result["targets"]:
        print(f"{'MET ' if check['met'] else 'MISS'}  {check['target']}  {check['value']}")


def draw_chart(result: dict[str, Any]) -> None:
    """Server-added latency by turn, per way and session count: benchmarks/charts/agent_session.svg."""
    configuration = (
        f"sessions {','.join(map(str, result['sessions']))}, {result['turns']} turns, "
        f"repeat {result['repeat']}, gap {result['gap_ms']:g} ms, frontends {result['frontends']}"
    )
    path = charts.agent_session_chart(result["runs"], configuration)
    if path is not None:
        print(f"chart: {path}", file=sys.stderr)


def kv_mode(args: argparse.Namespace) -> int:
    """``--kv``: every policy of ``_kv_sessions.py`` at each session count and host tier, printed as a table."""
    rows = kv_main(
        [int(n) for n in args.kv_sessions.split(",") if n],
        [float(x) for x in args.kv_host_shares.split(",") if x],
        pool_share=args.kv_pool_share,
        seed=args.kv_seed,
        tool_pause=DEFAULT_TOOL_PAUSE_SECONDS,
        scale=args.kv_scale,
    )
    if args.json:
        print(json.dumps(rows))
    else:
        print("\n".join(table(rows)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sessions", default="1,8", help="session counts to run, comma-separated (e.g. 1,8,64)"
    )
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument(
        "--answer-every", type=int, default=10, help="a final answer every N turns (0: tool calls only)"
    )
    parser.add_argument(
        "--gap-ms",
        type=float,
        default=0.0,
        help="ms between the sessions' requests of a turn (default 0: a turn's requests all at once)",
    )
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated subset of " + ", ".join(WAYS))
    parser.add_argument("--no-reuse", action="store_true", help="skip the prefix-reuse pass")
    parser.add_argument(
        "--frontends", type=int, default=1, help="serve --num_serve_frontends (a SQLite store when > 1)"
    )
    parser.add_argument("--server-cpus", help="taskset's CPU list for the server (default: CPU 0)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each way and session count, each on a fresh server; per turn, the median of the runs",
    )
    parser.add_argument(
        "--kv",
        action="store_true",
        help="the KV mode (_kv_sessions.py): sessions against the fake TensorRT-LLM's KV pool in simulated time",
    )
    parser.add_argument("--kv-sessions", default="64,256", help="--kv: session counts, comma-separated")
    parser.add_argument("--kv-pool-share", type=float, default=0.25, help="--kv: device pool / working set")
    parser.add_argument(
        "--kv-host-shares", default="0,0.5", help="--kv: host tiers / working set, comma-separated"
    )
    parser.add_argument("--kv-scale", type=int, default=4, help="--kv: token counts divided by this (speed)")
    parser.add_argument("--kv-seed", type=int, default=41)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--no-charts",
        action="store_true",
        help="draw no chart (default: benchmarks/charts/agent_session.svg)",
    )
    args = parser.parse_args()
    if args.kv:
        return kv_mode(args)
    ways = [w for w in args.ways.split(",") if w]
    unknown = set(ways) - set(WAYS)
    if unknown:
        parser.error(f"unknown ways: {', '.join(sorted(unknown))}")
    counts = [int(n) for n in args.sessions.split(",") if n]
    plan = Plan(args.turns, args.answer_every, args.gap_ms / 1000, args.frontends, args.server_cpus)
    pinned = pin_this_process()
    result: dict[str, Any] = {
        "pinned": pinned,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "turns": args.turns,
        "answer_every": args.answer_every,
        "gap_ms": args.gap_ms,
        "repeat": args.repeat,
        "frontends": args.frontends,
        "server_cpus": args.server_cpus,
        "sessions": counts,
        "runs": {},
        "prefix_reuse": {},
    }
    with tempfile.TemporaryDirectory(prefix="agent-session-") as folder:
        key_file = encryption_key_file(folder)
        for way in ways:
            if not args.no_reuse:
                result["prefix_reuse"][way] = prefix_reuse(way, plan, key_file, folder)
            result["runs"][way] = {str(n): repeated_runs(way, n, plan, key_file, args.repeat) for n in counts}
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["targets"] = against_targets(result["runs"], result["prefix_reuse"])
    if not args.no_charts:
        draw_chart(result)
    if args.json:
        print(json.dumps(result))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
