"""CPU a `serve` process and its render worker spend to start, per tree (A/B).

Every `serve` (and each frontend of a group) loads the Harmony encoding and starts render workers that load it
too; the test suite starts hundreds of them, and an operator's restarts pay it once a process. This starts
`serve --render_workers 1` from each tree in turn (alternating, ``--rounds`` times), waits for `/health`, and
reads the CPU time (user + system, /proc) of the server and of its worker at that moment.

    python benchmarks/process_start.py --tree /work/main --tree /tmp/base --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _server import free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def start_once(tree: Path) -> tuple[float, float]:
    """(server CPU s, render worker CPU s) once `serve` answers /health."""
    port = free_port()
    python = tree / ".venv" / "bin" / "python"
    command = [str(python), "-m", "trtllm_responses", "serve", "--port", str(port), "--render_workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    server = subprocess.Popen(
        command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"{tree}: serve did not start") from None
                time.sleep(0.1)
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        workers = [_cpu(int(pid)) for pid in children]
        return _cpu(server.pid), sum(workers)
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, required=True, help="a checkout with its .venv")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in args.tree}
    for _ in range(args.rounds):
        for tree in args.tree:
            results[tree].append(start_once(tree))
    for tree, runs in results.items():
        server = statistics.median(r[0] for r in runs)
        worker = statistics.median(r[1] for r in runs)
        print(f"{tree}: server {server:.2f} s, render worker {worker:.2f} s of CPU (medians of {len(runs)})")


if __name__ == "__main__":
    main()
