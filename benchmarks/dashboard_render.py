"""Render the Grafana dashboard's own queries over a live server into a PNG (docs/img/dashboard.png).

Grafana is in no package registry this project reaches, so this draws what the dashboard would: it starts
``serve`` on the fake TensorRT-LLM (two frontends, a SQLite store, a tenants file, iteration stats on), a real
Prometheus (Debian's package, ``make prometheus``) scraping it every second with ``examples/prometheus/``,
drives a mixed load (agent sessions of two tenants, background responses, Chat Completions, 400s, a third
tenant's 429s; four turns at once per frontend, so bursts queue), then runs every panel target of ``examples/grafana/trtllm-responses.json`` through
Prometheus's ``query_range`` (``$__rate_interval`` = 15 s, the variables at "All") and lays the panels out
by their ``gridPos`` with matplotlib (the ``bench`` extra). It is not Grafana's rendering: the same queries,
drawn by this script (docs/tracing-and-dashboards.md#dashboard-and-alerts).

    python benchmarks/dashboard_render.py [--seconds 90] [--out docs/img/dashboard.png]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.checkpoints import make_checkpoint  # noqa: E402
from support.paths import FAKE_TRTLLM  # noqa: E402
from support.prometheus_harness import Prometheus  # noqa: E402
from support.redis_harness import free_port  # noqa: E402
from support.tenant_files import write_tenants  # noqa: E402

DASHBOARD = ROOT / "examples" / "grafana" / "trtllm-responses.json"
RATE_INTERVAL = "15s"


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``serve`` on the fake TensorRT-LLM with two frontends; its process and base URL."""
    ckpt = make_checkpoint(folder)
    tenants = write_tenants(folder / "tenants.json", c={"requests_per_minute": 6})
    options = folder / "llm.yaml"
    options.write_text("enable_iter_perf_stats: true\n")
    port = free_port()
    command = [sys.executable, "-m", "trtllm_responses.cli", "serve", str(ckpt), "--engine", "trtllm"]
    command += ["--num_serve_frontends", "2", "--store", f"sqlite:///{folder / 'store.db'}"]
    command += ["--tenants", str(tenants), "--extra_llm_api_options", str(options), "--render_workers", "1"]
    command += [
        "--max_running_responses",
        "4",
    ]  # each frontend runs four turns at once: in bursts turns queue
    command += ["--port", str(port), "--log_level", "warning"]
    env = {**os.environ, "PYTHONPATH": FAKE_TRTLLM, "FAKE_TRTLLM_VERSION": "1.4.0rc1"}
    env["FAKE_TRTLLM_STEP_DELAY"] = "0.004"  # a decode step of 4 ms: latencies shaped like an engine's
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("serve did not start")


def agent(url: str, tenant: str, until: float, seed: int) -> None:
    """One client of ``tenant`` until ``until``: sessions of a few turns, now and then a background response,
    a Chat completion or a bad id; at a rate that rises and falls."""
    rng = random.Random(seed)
    headers = {"authorization": f"Bearer key-{tenant}"}
    while time.monotonic() < until:
        with httpx.Client(
            base_url=url, timeout=60, headers=headers
        ) as client:  # a new connection: any frontend
            previous, session = None, f"{tenant}-{rng.random()}"
            for turn in range(rng.randint(2, 6)):
                body: dict[str, Any] = {
                    "input": f"step {turn}: " + "tool output line " * rng.randint(20, 120)
                }
                body["stream"] = rng.random() < 0.7
                body["background"] = rng.random() < 0.1
                if previous:
                    body["previous_response_id"] = previous
                try:
                    answer = client.post("/v1/responses", json=body, headers={"x-session-id": session})
                    previous = (
                        answer.json()["id"] if not body["stream"] and answer.status_code == 200 else None
                    )
                except (httpx.HTTPError, ValueError, KeyError):
                    previous = None
                extra = rng.random()
                if extra < 0.15:
                    chat = {"model": "m", "messages": [{"role": "user", "content": "hi " * 50}]}
                    client.post("/v1/chat/completions", json=chat)
                elif extra < 0.2:
                    client.get("/v1/responses/resp_missing")
                phase = (time.monotonic() % 60) / 60  # busier in the first half of each minute
                time.sleep(rng.uniform(0.05, 0.4) * (1 if phase < 0.5 else 3))


def drive(url: str, seconds: float) -> None:
    """Four clients each of tenants ``a`` and ``b``, one of ``c`` (a low limit: 429s), for ``seconds``."""
    until = time.monotonic() + seconds
    clients = [(t, i) for t in ("a", "b") for i in range(4)] + [("c", 0)]
    threads = [threading.Thread(target=agent, args=(url, t, until, i * 7 + ord(t))) for t, i in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template) or "value"


def series(prometheus: Prometheus, dashboard: dict[str, Any], start: float, end: float) -> dict[int, Any]:
    """Each panel's ``(legend, times, values)`` lines, from Prometheus's ``query_range``."""
    out: dict[int, Any] = {}
    for panel in dashboard["panels"]:
        lines = []
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", RATE_INTERVAL)
            expr = re.sub(r"\$\{?[A-Za-z_]\w*\}?", ".*", expr)
            for result in prometheus.query_range(expr, start, end, "2s"):
                points = [(float(t) - start, float(v)) for t, v in result["values"]]
                lines.append((legend(target["legendFormat"], result["metric"]), points))
        out[panel["id"]] = lines
    return out


def scale(unit: str) -> tuple[float, str]:
    """The factor and axis label a panel's Grafana unit is drawn with."""
    return {
        "s": (1000.0, "ms"),
        "percentunit": (100.0, "%"),
        "bytes": (1 / 1024, "KiB"),
        "reqps": (1.0, "/s"),
        "ops": (1.0, "/s"),
    }.get(unit, (1.0, ""))


def render(dashboard: dict[str, Any], lines: dict[int, Any], span: float, out: Path) -> None:
    """The panels at their ``gridPos`` (24 columns), rows as headings, stat panels as their last value; time
    axes from 0 to ``span`` seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    unit_h = 0.42  # inches per grid unit of height
    fig = plt.figure(figsize=(18, height * unit_h + 0.6))
    fig.suptitle(
        "trtllm-responses: the dashboard's queries over a live server (rendered from Prometheus, not Grafana)",
        fontsize=11,
    )
    top = 1 - 0.6 / (height * unit_h + 0.6)
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        left, width = g["x"] / 24 + 0.006, g["w"] / 24 - 0.03
        bottom = top * (1 - (g["y"] + g["h"]) / height) + 0.012
        h = top * g["h"] / height - 0.03
        if panel["type"] == "row":
            fig.text(0.005, top * (1 - g["y"] / height) - 0.012, panel["title"], fontsize=10, weight="bold")
            continue
        ax = fig.add_axes((left, bottom, width, max(h, 0.01)))
        factor, label = scale(panel["fieldConfig"]["defaults"].get("unit", ""))
        ax.set_title(panel["title"], fontsize=8, loc="left")
        ax.tick_params(labelsize=6)
        if panel["type"] == "stat":
            values = [p[1] for _, points in lines[panel["id"]] for p in points[-1:]]
            text = f"{values[0] * factor:.3g}{label}" if values else "no data"
            if panel["title"] == "Engine healthy" and values:
                text = "UP" if values[0] >= 1 else "DOWN"
            ax.text(0.5, 0.4, text, ha="center", va="center", fontsize=16, transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        for name, points in lines[panel["id"]]:
            ax.plot([t for t, _ in points], [v * factor for _, v in points], linewidth=0.9, label=name)
        ax.set_ylabel(label, fontsize=6)
        ax.set_xlim(0, span)
        if lines[panel["id"]]:
            ax.legend(fontsize=5, loc="upper left", ncol=2, frameon=False)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=9, transform=ax.transAxes)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=58)
    shrink(out)


def shrink(path: Path) -> None:
    """The PNG at ``path`` in 64 colours (a third of its size; the charts use ten)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.png")
    args = parser.parse_args()
    dashboard = json.loads(DASHBOARD.read_text())
    with tempfile.TemporaryDirectory(prefix="dashboard-render-") as folder:
        process, url = start_server(Path(folder))
        try:
            with Prometheus(url.removeprefix("http://")) as prometheus:
                start = time.time()
                drive(url, args.seconds)
                end = time.time()
                time.sleep(2)  # the last scrape of the load
                render(dashboard, series(prometheus, dashboard, start, end), end - start, args.out)
        finally:
            process.terminate()
            process.wait(timeout=60)
    print(f"{args.out}: {args.out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
