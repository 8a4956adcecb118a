"""WebSocket permessage-deflate: what compressing the server's events costs its event loop (issue 44.6).

Starts ``trtllm-responses serve`` (echo executor, paced at ``--tokens_per_second``) and measures, with and
without permessage-deflate (``websockets``' client, as Codex offers it):

- ``large``: one WebSocket session streams the largest answer the logprobs cap allows (``#lorem 12480``,
  ``top_logprobs`` 20: four events of ~17 MiB at its end) while ``/health`` is asked every 50 ms from a
  process of its own (``hostile_input.HealthProbe``). Per session: the worst ``/health`` wait, the
  server's worst loop lag (``/stats``), its CPU time, the bytes of the data frames received (what
  deflate saves on the wire) and the session's wall time. ``--runs`` sessions each, the worst and the
  median reported.
- ``small``: ``--sessions`` sessions at once, each streaming ``--responses`` answers of ``#lorem 2000``
  without logprobs: the server's CPU time per delta event, the per-token cost of ordinary streaming.
- ``send_us``: in this process, µs per ``send`` of a 150-byte delta event on a compressed connection, by
  uvicorn's own protocol class and by the server's (``uvicorn_config``'s), over a transport that keeps
  nothing (``tests/support/ws_sansio.py``): what the server's protocol adds to an ordinary delta, free of the machine's noise.

    python benchmarks/ws_compression.py [--runs 3] [--sessions 16] [--responses 2] [--server_cpus 0] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame
from websockets.sync.client import connect as ws_connect

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from _server import get_json, pin_this_process, report, start_server, stop  # noqa: E402
from hostile_input import HealthProbe, _cpu_seconds  # noqa: E402
from support.ws_sansio import open_compressed  # noqa: E402

from trtllm_responses.server.websocket_drain import draining_websocket_protocol  # noqa: E402

TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")
#: The Responses request at the logprobs cap (1 x 21 x 12,480 entries: ~17 MiB of JSON an event).
CAPPED = {
    "type": "response.create",
    "model": "m",
    "input": "#lorem 12480",
    "top_logprobs": 20,
    "include": ["message.output_text.logprobs"],
    "max_output_tokens": 12_480,
    "store": False,
}


def _session(url: str, compression: str | None, creates: list[dict[str, Any]]) -> tuple[int, int]:
    """Send each of ``creates`` in turn on one WebSocket and read its events to the terminal one; return
    (delta events, bytes of the data frames received: compressed where deflate was negotiated)."""
    wire = 0
    deltas = 0
    with ws_connect(url, compression=compression, max_size=None, open_timeout=60) as ws:
        compressed = bool(ws.protocol.extensions)
        if compressed:
            (deflate,) = ws.protocol.extensions
            decode = deflate.decode

            def counted(frame: Frame, *, max_size: int | None = None) -> Frame:
                nonlocal wire
                wire += len(frame.data)
                return decode(frame, max_size=max_size)

            deflate.decode = counted  # type: ignore[method-assign]
        for create in creates:
            ws.send(json.dumps(create))
            while True:
                message = ws.recv(timeout=300)
                if not compressed:
                    wire += len(message)
                ends = message[:200] + message[-200:]  # an event's "type" is at its start or its end
                if '"type":"response.output_text.delta"' in ends:
                    deltas += 1
                if any(f'"type":"{kind}"' in ends for kind in TERMINAL):
                    break
    return deltas, wire


def large(url: str, pid: int, compression: str | None) -> dict[str, Any]:
    """One session of the capped logprobs answer, ``/health`` probed beside it."""
    get_json(url + "/stats?reset=1")
    probe = HealthProbe(url, pid)
    probe.start()
    cpu = _cpu_seconds(pid)
    started = time.monotonic()
    _, wire = _session(url.replace("http://", "ws://") + "/v1/responses", compression, [CAPPED])
    wall = time.monotonic() - started
    time.sleep(0.3)  # what the session left running ends inside the window
    probe.stop()
    return {
        "health_worst_ms": round(probe.worst * 1000, 1),
        "loop_lag_max_ms": get_json(url + "/stats")["event_loop_lag"]["max_since_reset_ms"],
        "server_cpu_s": round(_cpu_seconds(pid) - cpu, 2),
        "wire_mib": round(wire / (1 << 20), 1),
        "wall_s": round(wall, 2),
    }


def small(url: str, pid: int, compression: str | None, sessions: int, responses: int) -> dict[str, Any]:
    """``sessions`` sockets at once, each streaming ``responses`` ordinary answers: CPU per delta."""
    create = {"type": "response.create", "model": "m", "input": "#lorem 2000", "store": False}
    ws_url = url.replace("http://", "ws://") + "/v1/responses"
    counts: list[int] = []
    cpu = _cpu_seconds(pid)
    started = time.monotonic()
    threads = [
        threading.Thread(target=lambda: counts.append(_session(ws_url, compression, [create] * responses)[0]))
        for _ in range(sessions)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = _cpu_seconds(pid) - cpu
    deltas = sum(counts)
    return {
        "deltas": deltas,
        "server_cpu_us_per_delta": round(spent / max(deltas, 1) * 1e6, 2),
        "wall_s": round(time.monotonic() - started, 2),
    }


def send_us(protocol_class: type[WebSocketsSansIOProtocol], sends: int = 200_000) -> float:
    """µs per ``send`` of a delta event on a compressed connection of ``protocol_class``."""
    delta = json.dumps(
        {
            "type": "response.output_text.delta",
            "sequence_number": 1234,
            "item_id": "msg_0123456789abcdef0123456789abcdef",
            "output_index": 0,
            "content_index": 0,
            "delta": " lorem",
            "logprobs": [],
            "obfuscation": "abcdefghij",
        },
        separators=(",", ":"),
    )
    message = {"type": "websocket.send", "text": delta}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})
        started = time.perf_counter()
        for _ in range(sends):
            await send(message)
        took.append(time.perf_counter() - started)

    took: list[float] = []

    async def go() -> None:
        protocol, _, _ = open_compressed(protocol_class, app, keep=False)
        await asyncio.gather(*protocol.tasks)
        assert protocol.conn.extensions, "permessage-deflate was not negotiated"
        protocol.connection_lost(None)

    asyncio.run(go())
    return took[0] / sends * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="capped sessions per setting")
    ap.add_argument("--sessions", type=int, default=16, help="sockets at once in the small phase")
    ap.add_argument("--responses", type=int, default=2, help="answers per socket in the small phase")
    ap.add_argument("--small_runs", type=int, default=3, help="small phases per setting")
    ap.add_argument("--tokens_per_second", type=float, default=4000.0, help="echo pacing per stream")
    ap.add_argument("--server_cpus", default=None, help="taskset's list for the server (default: CPU 0)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    pin_this_process()
    result: dict[str, Any] = {"tokens_per_second": args.tokens_per_second, "server_cpus": args.server_cpus}
    server_class = draining_websocket_protocol(5.0)
    pairs = [(send_us(WebSocketsSansIOProtocol), send_us(server_class)) for _ in range(5)]
    result["send_us"] = {
        "uvicorn": [round(a, 2) for a, _ in pairs],
        "server": [round(b, 2) for _, b in pairs],
    }
    server, url = start_server(
        ["--echo_tokens_per_second", str(args.tokens_per_second)], cpus=args.server_cpus
    )
    try:
        for compression in (None, "deflate"):
            name = compression or "none"
            runs = [large(url, server.pid, compression) for _ in range(args.runs)]
            result[f"large_{name}"] = {
                key: {"max": max(r[key] for r in runs), "median": statistics.median(r[key] for r in runs)}
                for key in runs[0]
            }
            smalls = [
                small(url, server.pid, compression, args.sessions, args.responses)
                for _ in range(args.small_runs)
            ]
            result[f"small_{name}"] = {
                "deltas": smalls[0]["deltas"],
                "server_cpu_us_per_delta": [s["server_cpu_us_per_delta"] for s in smalls],
            }
    finally:
        stop(server)
    result["load_average"] = list(os.getloadavg())
    report(result, args.json)


if __name__ == "__main__":
    main()
