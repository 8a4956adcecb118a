"""Many frontends (``serve --num_serve_frontends K``): streams per second and TTFT at 64, 256 and 1,024
concurrent streams, K = 1 and 2, on this 2-core machine.

Each stream is an agent-like request: a ~2 KB input (parsed, validated, rendered: the per-request work
one frontend's event loop does for every client) answered with 64 tokens by the unpaced echo, so what is
measured is the frontends' request handling, not generation. Three layouts, each on fresh servers sharing
one SQLite store (``--store`` is required with K > 1; K = 1 gets the same store, for a fair comparison):

- ``K=1 core0``: one frontend on CPU 0, the load generator (this process) on CPU 1;
- ``K=2 core0``: two frontends both on CPU 0 (what multi-frontend costs with no more CPU);
- ``K=2 cores0,1``: two frontends spread over both CPUs, the load generator sharing CPU 1 with one.

The server's CPU time is the launcher's and its frontends' (children) together.

    python benchmarks/frontends.py [--concurrency 64,256,1024] [--duration 8] [--json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _server import pin_this_process, report, start_server  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, run_bench  # noqa: E402

LAYOUTS = (("K=1 core0", 1, "0"), ("K=2 core0", 2, "0"), ("K=2 cores0,1", 2, "0,1"))
PROMPT = "Review the change below and say what it breaks.\n" + "\n".join(
    f"{i:4d}  def handler_{i}(request):  return render(request, 'page_{i}.html')" for i in range(28)
)


def group_cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its children still running (the frontends)."""
    pids = [pid] + [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == pid]
    total = 0.0
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _ppid(entry: Path) -> int:
    try:
        return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def start_group(count: int, cpus: str, folder: str) -> tuple[subprocess.Popen[bytes], str]:
    flags = ["--num_serve_frontends", str(count), "--max_connections_per_client", "0"]
    return start_server([*flags, "--store", f"sqlite:///{folder}/store-{count}-{cpus}.db"], cpus=cpus)


def measure(count: int, cpus: str, concurrency: int, duration: float, folder: str) -> dict[str, Any]:
    process, url = start_group(count, cpus, folder)
    try:
        config = BenchConfig(
            base_url=url,
            concurrency=concurrency,
            prompt=PROMPT,
            lorem=None,
            max_output_tokens=64,
            duration=duration,
            warmup=concurrency,
            progress=False,
        )
        run_bench(BenchConfig(**{**config.__dict__, "duration": 2.0}))  # connections and caches warm
        before = group_cpu_seconds(process.pid)
        summary = run_bench(config).summary
        cpu = group_cpu_seconds(process.pid) - before
    finally:
        process.terminate()
        process.wait(timeout=120)
    done = summary["requests"] - summary["errors"]
    return {
        "streams_per_s": summary["requests_per_s"],
        "ttft_ms_p50": summary["ttft_ms"]["p50"],
        "ttft_ms_p99": summary["ttft_ms"]["p99"],
        "errors": summary["errors"],
        "server_cpu_ms_per_stream": round(cpu / max(1, done) * 1e3, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", default="64,256,1024")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        print("needs taskset and 2 CPUs", file=sys.stderr)
        return 2
    pin_this_process()
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="frontends-bench-") as folder:
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            for name, count, cpus in LAYOUTS:
                row = {"layout": name, "concurrency": concurrency}
                row.update(measure(count, cpus, concurrency, args.duration, folder))
                result["rows"].append(row)
                if not args.json:
                    print(row, flush=True)
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    report(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
