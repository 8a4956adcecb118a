"""Background runs' memory: RSS against what the budgets count (issue 30, point 4), in-process.

A server (the tests' ``start_server``: uvicorn in a thread, echo unpaced, memory store) runs ``--runs``
background responses of ``#lorem --tokens`` at once (``store: true``) under a ``--budget_mib`` budget for
recorded events. Once all ended and a reaper pass gave freed memory back (6 s), it reports the process's
RSS growth beside what is counted: the recorded events (``Runs.recorded_bytes``), the
stored responses (``store.stats().bytes``, their histories included) and the remembered histories
(``chain_histories.bytes``, the same objects while the responses are stored),
and where the memory is: glibc's heap in use and free (``mallinfo2``), CPython's small-object arenas
(``sys._debugmallocstats``). Then every run is deleted (its events and its stored response) and the
same is read again.

    python benchmarks/background_rss.py [--runs 20] [--tokens 100000] [--budget_mib 512] [--json]

Run it from the tree to measure (``PYTHONPATH=<tree>``): the tests' harness comes from that tree.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from support.harmony_helpers import FIXED_DATE  # noqa: E402
from support.server_harness import RunningServer, resident_bytes, start_server  # noqa: E402

from trtllm_responses.adapter import HarmonyAdapter  # noqa: E402
from trtllm_responses.executors import EchoExecutor  # noqa: E402
from trtllm_responses.harmony import load_encoding  # noqa: E402
from trtllm_responses.responses import BackgroundLimits, Runs  # noqa: E402

MIB = 1 << 20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


def _libc() -> Any:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    return libc


def _pymalloc_arenas() -> int:
    """Bytes of CPython's small-object arenas (each freed only once all of its blocks are)."""
    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write)
    text = b""
    while chunk := os.read(read, 1 << 16):
        text += chunk
    os.close(read)
    match = re.search(r"# arenas allocated current\s*=\s*([\d,]+)", text.decode())
    arenas = int(match.group(1).replace(",", "")) if match else 0
    return arenas << 20  # 1 MiB each (CPython 3.10+)


def _reading(server: RunningServer, background: Runs, libc: Any) -> dict[str, float]:
    info = libc.mallinfo2()
    return {
        "rss": resident_bytes() / MIB,
        "events_counted": background.recorded_bytes / MIB,
        "runs_kept": len(background.kept),
        "stored_responses": asyncio.run(server.store.stats()).bytes / MIB,
        "histories": server.app.state.service.chain_histories.bytes / MIB,
        "malloc_in_use": info.uordblks / MIB,
        "malloc_free": info.fordblks / MIB,
        "pymalloc_arenas": _pymalloc_arenas() / MIB,
    }


def _growth(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    grown = {key: round(after[key] - before[key], 1) for key in before if key != "runs_kept"}
    grown["runs_kept"] = after["runs_kept"]
    # The memory store's bytes include each response's history: the same objects the history cache
    # keeps, so what both hold is the larger of the two.
    counted = grown["events_counted"] + max(grown["stored_responses"], grown["histories"])
    grown["rss_beyond_counted"] = round(grown["rss"] - counted, 1)
    return grown


def _ended(background: Runs, ids: list[str]) -> bool:
    """Whether the runs of ``ids`` have ended (read from this thread: by key, never iterating the
    server's dict; a run forgotten past the budget had ended)."""
    return all(run.done for response_id in ids if (run := background.kept.get(response_id)) is not None)


def measure(runs: int, tokens: int, budget: int) -> dict[str, Any]:
    libc = _libc()
    encoding = load_encoding()
    server = start_server(EchoExecutor(encoding), HarmonyAdapter(encoding, today=lambda: FIXED_DATE))
    background: Runs = server.app.state.service.runs
    background.limits = BackgroundLimits(max_total_bytes=budget)
    try:
        with httpx.Client(base_url=server.base_url, timeout=600) as http:
            warm_up = http.post("/v1/responses", json={"input": "#lorem 2000", "background": True}).json()[
                "id"
            ]
            while not _ended(background, [warm_up]):
                time.sleep(0.05)
            gc.collect()
            libc.malloc_trim(0)
            before = _reading(server, background, libc)
            started = time.monotonic()
            ids = [
                http.post("/v1/responses", json={"input": f"#lorem {tokens}", "background": True}).json()[
                    "id"
                ]
                for _ in range(runs)
            ]
            peak = 0
            while not _ended(background, ids):
                peak = max(peak, resident_bytes())
                time.sleep(0.05)
            seconds = time.monotonic() - started
            time.sleep(6)  # a reaper pass: forgotten runs' memory goes back to the system
            ended = _reading(server, background, libc)
            for response_id in ids:  # its events and its stored response
                http.delete(f"/v1/responses/{response_id}")
            time.sleep(6)
            deleted = _reading(server, background, libc)
            return {
                "runs": runs,
                "tokens": tokens,
                "budget_mib": budget // MIB,
                "seconds": round(seconds, 1),
                "peak_rss_growth": round((peak - before["rss"] * MIB) / MIB, 1),
                "after_reaper": _growth(before, ended),
                "after_delete": _growth(before, deleted),
            }
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--budget_mib", type=int, default=512)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = measure(args.runs, args.tokens, args.budget_mib * MIB)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['runs']} x #lorem {result['tokens']}, budget {result['budget_mib']} MiB, {result['seconds']} s"
    )
    print(f"peak RSS growth {result['peak_rss_growth']} MiB")
    for phase in ("after_reaper", "after_delete"):
        print(phase, "(growth, MiB)")
        for key, value in result[phase].items():
            print(f"  {key:20} {value}")


if __name__ == "__main__":
    main()
