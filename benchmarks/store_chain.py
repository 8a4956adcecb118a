"""A ``previous_response_id`` chain on a durable store: what the store holds after it, and what a turn costs.

One session of TURNS turns (default 40), each ~INPUT_BYTES (default 12,000) of new user text and stored
(``store: true``), each continuing the one before, on a fresh ``serve --engine echo --store STORE``: as a
user tried issue 41 (a 36.7 MB SQLite file for ~1.5 MB of history). Reported:

- the store's size once the server has stopped (SQLite: the database file with its WAL checkpointed into it;
  Redis: the bytes of its ``trtllm:resp:*`` values, ``STRLEN``), and the last response's history as a
  self-contained entry would hold it (``GET /v1/responses/{id}/input_items`` is not it: the history's
  tokens are not on the API, so it is the store's figure over the chain's last turn's ``usage``);
- per turn, the round trip of the non-streaming request (the echo answers at once: it is the server's cost,
  the store's put and get included): the median of the last ten turns, and of all.

Run it against another tree with that tree first on ``PYTHONPATH`` (the server is ``python -m
trtllm_responses.cli`` of whichever package Python finds).

    python benchmarks/store_chain.py [--turns 40] [--input-bytes 12000] [--store sqlite|redis] [--repeat 1]
                                     [--server-cpus 0,1] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from _server import pin_this_process, post_json, report, start_server, stop  # noqa: E402

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def run_chain(url: str, turns: int, input_bytes: int) -> tuple[list[float], int]:
    """The chain's per-turn round trips (ms) and its last turn's total tokens."""
    previous = None
    times: list[float] = []
    tokens = 0
    for n in range(turns):
        words: list[str] = []
        size = 0
        while size < input_bytes:
            words.append(WORDS[(n + len(words)) % len(WORDS)])
            size += len(words[-1]) + 1
        body: dict[str, Any] = {
            "input": f"Turn {n}: {' '.join(words)}",
            "store": True,
            "max_output_tokens": 64,
        }
        if previous is not None:
            body["previous_response_id"] = previous
        started = time.perf_counter()
        response = post_json(url + "/v1/responses", body)
        times.append((time.perf_counter() - started) * 1000)
        previous = response["id"]
        tokens = response["usage"]["input_tokens"] + response["usage"]["output_tokens"]
    return times, tokens


def redis_bytes(url: str) -> int:
    """The bytes of the stored responses' values in the Redis at ``url``."""
    import redis

    client = redis.Redis.from_url(url)
    total = sum(int(client.strlen(key)) for key in client.scan_iter(match="trtllm:resp:*", count=1000))
    client.close()
    return total


def one_run(store: str, turns: int, input_bytes: int, cpus: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="store-chain-") as folder:
        redis_server = None
        if store == "sqlite":
            flag = f"sqlite:///{folder}/chain.db"
        else:
            from support.redis_harness import RedisServer

            redis_server = RedisServer().start()
            flag = redis_server.url
        server, url = start_server(["--store", flag], cpus=cpus)
        try:
            times, tokens = run_chain(url, turns, input_bytes)
        finally:
            stop(server)  # SQLite: the WAL is checkpointed into the file at shutdown
        try:
            if store == "sqlite":
                size = sum(p.stat().st_size for p in Path(folder).glob("chain.db*"))
            else:
                size = redis_bytes(flag)
        finally:
            if redis_server is not None:
                redis_server.stop()
    return {
        "store_bytes": size,
        "last_turn_tokens": tokens,
        "turn_ms_p50_last10": round(statistics.median(times[-10:]), 2),
        "turn_ms_p50": round(statistics.median(times), 2),
        "turn_ms_max": round(max(times), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--input-bytes", type=int, default=12_000)
    ap.add_argument("--store", choices=["sqlite", "redis"], default="sqlite")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--server-cpus", default="0,1", help="taskset's CPU list for the server")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pinned = pin_this_process() if args.server_cpus == "0" else False  # else it shares the server's CPUs
    runs = [one_run(args.store, args.turns, args.input_bytes, args.server_cpus) for _ in range(args.repeat)]
    result: dict[str, Any] = {
        "pinned": pinned,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "store": args.store,
        "turns": args.turns,
    }
    for key in runs[0]:
        values = [r[key] for r in runs]
        result[key] = values[0] if len(values) == 1 else values
    report(result, args.json)


if __name__ == "__main__":
    main()
