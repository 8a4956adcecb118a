"""Fair share under a flood: a paced agent session's time to first token while another tenant floods.

Tenant ``A`` floods: ``10 x`` its concurrency share of streams, each a long answer (``#lorem WORDS``),
sent again as soon as one ends (after a 429, after its ``retry-after``, as the SDKs do). Tenant ``B`` runs a
paced agent session: TURNS tool-call turns over ``previous_response_id`` (each turn brings the output of the
call the last one made and asks for the next call), GAP ms apart. One server (the echo executor at
``--echo_tokens_per_second``, like an engine's decode pace), tenants from a file of equal weights, the
engine's slots ``--max_running_responses SLOTS``; B's turns are timed alone (after a warm-up of two), then under the flood, then alone again (the
alone figures are of both, so that the machine's drift during a run does not read as the flood's effect).

Two configurations of A, each its own server:

- ``capped``: A's ``max_concurrent_responses`` is its share (SLOTS / 2): its excess is refused (429 with
  ``retry-after``), B's share of the slots is always free;
- ``queued``: A has no limit of its own: it takes every slot while B is idle (the engine is
  work-conserving), its excess waits in the queue, and a turn of B waits for the next slot A frees
  (never behind A's queue: fair share) -- on average a turn of A divided by SLOTS.

Reported per configuration: B's TTFT (request sent -> its first ``*.delta`` event) p50 and p99 alone and
under the flood, their ratio (target: within 1.25x in the ``capped`` configuration), A's turns completed,
refused (429) and how long its waiting turns waited (``/stats`` ``tenants``).

    python benchmarks/tenants.py [--slots 8] [--turns 60] [--gap-ms 100] [--words 100]
                                 [--tokens-per-second 100] [--configs capped,queued] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _server import pin_this_process, report, start_server, stop  # noqa: E402

TOOLS = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
TARGET = 1.25


def digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def tenants_file(folder: Path, a_concurrent: int | None) -> str:
    a: dict[str, Any] = {"keys": [digest("key-a")]}
    if a_concurrent is not None:
        a["max_concurrent_responses"] = a_concurrent
    path = folder / "tenants.json"
    path.write_text(
        json.dumps(
            {
                "tenants": {
                    "a": a,
                    "b": {"keys": [digest("key-b")]},
                    "ops": {"keys": [digest("key-ops")], "admin": True},
                }
            }
        )
    )
    return str(path)


async def stream(
    client: httpx.AsyncClient, key: str, body: dict[str, Any]
) -> tuple[int, float | None, dict[str, Any] | None, float]:
    """One streamed turn: its status, seconds to its first delta, its final response, its retry-after."""
    started = time.perf_counter()
    first = None
    final = None
    async with client.stream(
        "POST", "/v1/responses", json={**body, "stream": True}, headers={"Authorization": f"Bearer {key}"}
    ) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, None, None, float(response.headers.get("retry-after", "1"))
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if first is None and event["type"].endswith(".delta"):
                first = time.perf_counter() - started
            if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                final = event["response"]
    return 200, first, final, 0.0


async def session(base_url: str, turns: int, gap: float) -> list[float]:
    """B's paced agent session: each turn answers the last call and asks for the next; its TTFTs (s)."""
    ttfts = []
    previous = None
    call_id = None
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        for turn in range(turns):
            items: list[dict[str, Any]] = []
            if call_id is not None:
                items.append(
                    {"type": "function_call_output", "call_id": call_id, "output": f"file{turn}.py\n" * 20}
                )
            items.append({"role": "user", "content": f'call shell {{"cmd": "ls src/{turn}"}}'})
            body: dict[str, Any] = {"model": "m", "input": items, "tools": TOOLS, "store": True}
            if previous is not None:
                body["previous_response_id"] = previous
            status, first, final, _ = await stream(client, "key-b", body)
            assert status == 200 and first is not None and final is not None, status
            ttfts.append(first)
            previous = final["id"]
            call_id = next(item["call_id"] for item in final["output"] if item["type"] == "function_call")
            await asyncio.sleep(gap)
    return ttfts


async def flood(
    base_url: str, streams: int, words: int, stop_at: asyncio.Event, counts: dict[str, int]
) -> None:
    """A's flood: ``streams`` loops, each sending its next long turn as soon as the last ended."""

    async def loop(client: httpx.AsyncClient) -> None:
        while not stop_at.is_set():
            status, _, _, retry = await stream(client, "key-a", {"model": "m", "input": f"#lorem {words}"})
            counts["completed" if status == 200 else f"refused_{status}"] = (
                counts.get("completed" if status == 200 else f"refused_{status}", 0) + 1
            )
            if status != 200:
                await asyncio.sleep(retry)

    limits = httpx.Limits(max_connections=streams + 8)
    async with httpx.AsyncClient(base_url=base_url, timeout=300, limits=limits) as client:
        await asyncio.gather(*(loop(client) for _ in range(streams)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


async def measure(base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    gap = args.gap_ms / 1000
    await session(base_url, 2, gap)  # warm-up: the server's first turns pay its lazy starts
    alone = await session(base_url, args.turns, gap)
    stop_at = asyncio.Event()
    counts: dict[str, int] = {}
    flooding = asyncio.ensure_future(flood(base_url, 10 * args.slots // 2, args.words, stop_at, counts))
    await asyncio.sleep(2.0)  # the flood fills the engine first
    crowded = await session(base_url, args.turns, gap)
    stop_at.set()
    await flooding
    await asyncio.sleep(2.0)  # A's last turns end
    alone += await session(
        base_url, args.turns, gap
    )  # B alone again: the flood bracketed, not the machine's drift
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        stats = (await client.get("/stats", headers={"Authorization": "Bearer key-ops"})).json()
    a = stats.get("tenants", {}).get("a", {})
    row = {
        "b_alone_p50_ms": round(statistics.median(alone) * 1e3, 2),
        "b_alone_p99_ms": round(percentile(alone, 0.99) * 1e3, 2),
        "b_flood_p50_ms": round(statistics.median(crowded) * 1e3, 2),
        "b_flood_p99_ms": round(percentile(crowded, 0.99) * 1e3, 2),
        "a_completed": counts.get("completed", 0),
        "a_refused": sum(v for k, v in counts.items() if k.startswith("refused")),
        "a_queued": a.get("queued", 0),
        "a_queue_seconds": a.get("queue_seconds", 0),
    }
    row["p50_ratio"] = round(row["b_flood_p50_ms"] / row["b_alone_p50_ms"], 3)
    row["p99_ratio"] = round(row["b_flood_p99_ms"] / row["b_alone_p99_ms"], 3)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, default=8, help="--max_running_responses of the server")
    parser.add_argument("--turns", type=int, default=60, help="turns of B's session, each measured")
    parser.add_argument(
        "--gap-ms", type=float, default=100, help="B's pause between turns (its tool running)"
    )
    parser.add_argument("--words", type=int, default=100, help="length of each of A's answers")
    parser.add_argument("--tokens-per-second", type=float, default=100, help="the echo's pace per stream")
    parser.add_argument("--configs", default="capped,queued")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pin_this_process()
    result: dict[str, Any] = {"slots": args.slots, "a_streams": 10 * args.slots // 2, "turns": args.turns}
    for config in args.configs.split(","):
        with tempfile.TemporaryDirectory() as folder:
            tenants = tenants_file(Path(folder), args.slots // 2 if config == "capped" else None)
            extra = ["--engine", "echo", "--echo_tokens_per_second", str(args.tokens_per_second)]
            extra += [
                "--tenants",
                tenants,
                "--max_running_responses",
                str(args.slots),
                "--max_wait_seconds",
                "120",
            ]
            process, url = start_server(extra)
            try:
                result[config] = asyncio.run(measure(url, args))
            finally:
                stop(process)
    if "capped" in result:
        capped = result["capped"]
        met = capped["p50_ratio"] <= TARGET and capped["p99_ratio"] <= TARGET
        result["target"] = {
            "target": f"B's TTFT p50 and p99 under A's flood within {TARGET}x of B alone (capped)",
            "value": f"{capped['p50_ratio']}x / {capped['p99_ratio']}x",
            "met": met,
        }
    if args.json:
        report(result, True)
        return 0
    print(
        f"{'config':<8} {'B alone p50/p99 ms':>20} {'B flood p50/p99 ms':>20} {'ratio p50/p99':>14} {'A done':>7} {'A 429':>6} {'A queued':>9}"
    )
    for config in args.configs.split(","):
        r = result[config]
        print(
            f"{config:<8} {r['b_alone_p50_ms']:>9} / {r['b_alone_p99_ms']:<8} {r['b_flood_p50_ms']:>9} / {r['b_flood_p99_ms']:<8}"
            f" {r['p50_ratio']:>6} / {r['p99_ratio']:<5} {r['a_completed']:>7} {r['a_refused']:>6} {r['a_queued']:>9}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
