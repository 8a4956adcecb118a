"""The store's put and get per turn, in process: a 40-turn ``previous_response_id`` chain of ~12 KB turns.

Per backend (memory, SQLite in a temporary file, Redis on a redis-server started here): the chain's entries
(built as ``responses/keeping.py`` builds them, each naming the response it continues where the tree's
``StoredResponse`` has ``parent``) are put one by one, then the head is read cold 5 times; the median put of
turns 31-40 and the median get, each the median of ``--runs`` fresh stores. Runs on any tree (put it first on
``PYTHONPATH``): a tree without ``Parent`` stores every entry whole.

    python benchmarks/store_putget.py [--turns 40] [--words 2400] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from support.redis_harness import RedisServer  # noqa: E402

from trtllm_responses.adapter import EMPTY_HISTORY, HarmonyAdapter  # noqa: E402
from trtllm_responses.harmony import load_encoding  # noqa: E402
from trtllm_responses.request.protocol import parse_request  # noqa: E402
from trtllm_responses.store import StoredResponse, open_store  # noqa: E402

try:
    from trtllm_responses.store import Parent  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # a tree from before deltas
    Parent = None

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing".split()


def chain(adapter: HarmonyAdapter, turns: int, words: int) -> list[StoredResponse]:
    out: list[StoredResponse] = []
    for n in range(turns):
        text = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(words))
        previous = out[-1] if out else None
        prompt = adapter.build_prompt(
            parse_request({"input": text}), previous.history if previous else EMPTY_HISTORY
        )
        output = [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"answer {n}"}],
            }
        ]
        extra: dict[str, Any] = {}
        if Parent is not None and previous is not None:
            extra["parent"] = Parent(previous.id, previous.history)
        item = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
        out.append(
            StoredResponse(
                id=f"resp_{n}",
                response_json=json.dumps({"id": f"resp_{n}", "output": output}).encode(),
                input_item_ids=(f"msg_{n}",),
                input_items_json=(json.dumps(item).encode(),),
                history=adapter.continue_history(prompt, output),
                **extra,
            )
        )
    return out


async def measure(url: str, entries: list[StoredResponse]) -> tuple[float, float]:
    store = open_store(url, max_responses=10_000, max_bytes=1 << 30)
    puts = []
    for entry in entries:
        started = time.perf_counter()
        await store.put(entry)
        puts.append((time.perf_counter() - started) * 1000)
    gets = []
    for _ in range(5):
        started = time.perf_counter()
        await store.get(entries[-1].id)
        gets.append((time.perf_counter() - started) * 1000)
    await store.close()
    return statistics.median(puts[-10:]), statistics.median(gets)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--words", type=int, default=2400)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    entries = chain(HarmonyAdapter(load_encoding()), args.turns, args.words)
    redis = RedisServer().start()
    result: dict[str, Any] = {"deltas": Parent is not None}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for name in ("memory", "sqlite", "redis"):
                figures = []
                for run in range(args.runs):
                    if name == "redis":
                        redis.flush()
                    url = {"memory": "memory", "sqlite": f"sqlite:///{folder}/s{run}.db", "redis": redis.url}[
                        name
                    ]
                    figures.append(await measure(url, entries))
                result[f"{name}.put_ms_last10"] = round(statistics.median(f[0] for f in figures), 3)
                result[f"{name}.get_ms_head"] = round(statistics.median(f[1] for f in figures), 3)
    finally:
        redis.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
