"""Charts the benchmarks draw from their own figures: SVG files under ``benchmarks/charts/``.

``agent_session.py`` draws the server-added latency of each turn, one line per way (replay,
``previous_response_id``, WebSocket), one panel per session count; ``http_stream.py`` draws streamed
tokens/s and the server's CPU per token against the number of concurrent streams. benchmarks/RESULTS.md
links them. Each chart's title says what produced it: the benchmark's configuration, the date and the
commit; ``BENCH_CHART_NOTE`` (an environment variable) adds a line under it, e.g. "smoke run, not a
measurement".

matplotlib comes with the ``bench`` extra (``make bench`` installs it). Without it a benchmark still runs
and reports; it says on stderr that it drew nothing.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("benchmarks.charts")

#: Where the charts go (benchmarks/charts/, beside RESULTS.md).
CHARTS = Path(__file__).resolve().parent / "charts"
#: One colour per way, the same in every chart.
WAY_COLOURS = {"replay": "#1f77b4", "previous_response_id": "#ff7f0e", "websocket": "#2ca02c"}


def _pyplot() -> Any | None:
    """matplotlib's pyplot on the file-only backend, or None (and a line on stderr) when not installed."""
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install -e '.[bench]'): no chart drawn")
        return None
    plt.rcParams["svg.hashsalt"] = "trtllm-responses"  # the same figures draw the same file
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    return plt


def provenance(configuration: str) -> str:
    """The chart's subtitle: its configuration, today's date (UTC), the commit, and ``BENCH_CHART_NOTE``."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=CHARTS.parent,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    line = f"{configuration}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {commit or 'no commit'}"
    note = os.environ.get("BENCH_CHART_NOTE", "").strip()
    return f"{line}\n{note}" if note else line


def _save(plt: Any, figure: Any, name: str, folder: Path | None) -> Path:
    folder = folder or CHARTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    figure.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    log.info("chart: %s", path)
    return path


def agent_session_chart(
    runs: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]],
    configuration: str,
    folder: Path | None = None,
) -> Path | None:
    """Server-added latency by turn, p50 (solid) and p99 (dotted), a line per way, a panel per session count.

    ``runs`` is ``agent_session.py``'s ``result["runs"]``: way -> session count -> turn rows (``turn``,
    ``server_added_ms_p50``, ``server_added_ms_p99``; a ``fresh`` row, the control, is left out).
    Returns the SVG's path, or None without matplotlib.
    """
    plt = _pyplot()
    if plt is None:
        return None
    counts = sorted({count for by_count in runs.values() for count in by_count}, key=int)
    figure, axes = plt.subplots(
        1, len(counts), figsize=(5.5 * len(counts), 4.6), squeeze=False, layout="constrained"
    )
    for axis, count in zip(axes[0], counts, strict=True):
        for way, by_count in runs.items():
            rows = [row for row in by_count.get(count, []) if not row.get("fresh")]
            if not rows:
                continue
            turns = [row["turn"] for row in rows]
            colour = WAY_COLOURS.get(way)
            axis.plot(turns, [row["server_added_ms_p50"] for row in rows], color=colour, label=way)
            axis.plot(turns, [row["server_added_ms_p99"] for row in rows], color=colour, linestyle=":")
        axis.set_title(f"{count} session(s) at once (solid: p50, dotted: p99)", fontsize="medium")
        axis.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        axis.set_xlabel("turn")
        axis.set_ylabel("server-added latency, ms")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    figure.suptitle(
        f"agent_session.py: server-added latency by turn\n{provenance(configuration)}", fontsize="medium"
    )
    return _save(plt, figure, "agent_session.svg", folder)


def http_stream_chart(
    points: Sequence[Mapping[str, Any]],
    floors: Mapping[str, float],
    configuration: str,
    folder: Path | None = None,
) -> Path | None:
    """Streamed tokens/s and server CPU per token against concurrent streams (``http_stream.py``).

    ``points``: one per concurrency (``concurrency``, ``output_tokens_per_s``, ``server_us_per_token``).
    ``floors``: the same run's references (``bare_starlette_tokens_per_s`` and
    ``bare_starlette_us_per_token`` at the main concurrency, ``parser_only_us_per_token``), drawn as marks.
    Returns the SVG's path, or None without matplotlib.
    """
    plt = _pyplot()
    if plt is None:
        return None
    points = sorted(points, key=lambda p: p["concurrency"])
    streams = [p["concurrency"] for p in points]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    left.plot(streams, [p["output_tokens_per_s"] for p in points], marker="o", label="trtllm-responses")
    right.plot(streams, [p["server_us_per_token"] for p in points], marker="o", label="trtllm-responses")
    main = floors.get("concurrency")
    if main and floors.get("bare_starlette_tokens_per_s"):
        left.plot(
            [main], [floors["bare_starlette_tokens_per_s"]], marker="s", linestyle="", label="bare Starlette"
        )
    if main and floors.get("bare_starlette_us_per_token"):
        right.plot(
            [main], [floors["bare_starlette_us_per_token"]], marker="s", linestyle="", label="bare Starlette"
        )
    if floors.get("parser_only_us_per_token"):
        right.axhline(floors["parser_only_us_per_token"], color="grey", linestyle=":", label="parser only")
    for axis, label in ((left, "streamed output tokens/s"), (right, "server CPU per token, µs")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(streams, [str(s) for s in streams])
        axis.set_xlabel("concurrent streams")
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    figure.suptitle(
        f"http_stream.py: throughput and CPU against concurrency\n{provenance(configuration)}",
        fontsize="medium",
    )
    return _save(plt, figure, "http_stream.svg", folder)
