"""Issue 19's attacks on the newer surfaces, run by ``hostile_input.py`` beside its normal streams.

Each attack is ``url -> answer`` (one line saying what the attacker got back). The MCP server is
the tests' (``tests/support/mcp_server.py``, its ``big`` tool), served in this process on loopback.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

MCP_URL = ""


def start_mcp() -> tuple[str, Callable[[], None]]:
    """The tests' MCP server on a free loopback port; its URL and how to stop it."""
    global MCP_URL
    from support.mcp_server import start_mcp_server

    running = start_mcp_server()
    MCP_URL = running.url
    return running.url, running.stop


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _request(url: str, method: str, path: str, body: Any = None, timeout: float = 300) -> tuple[int, Any]:
    host, port = _host_port(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read()
    finally:
        conn.close()
    try:
        return response.status, json.loads(payload)
    except ValueError:
        return response.status, payload[:80]


def _ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/v1/responses"


def _tally(answers: list[str]) -> str:
    counts: dict[str, int] = {}
    for answer in answers:
        counts[answer] = counts.get(answer, 0) + 1
    return ", ".join(f"{n} x {a}" for a, n in counts.items())


# -- WebSocket -------------------------------------------------------------------------------------------


def ws_compressed_8mb(url: str) -> str:
    """8 MB of JSON that permessage-deflate sends as ~8 KB."""
    message = json.dumps({"type": "response.create", "input": "a" * (8 << 20)})
    wire = len(zlib.compress(message.encode(), 9))
    with ws_connect(_ws_url(url), compression="deflate", max_size=None, open_timeout=30) as ws:
        ws.send(message)
        try:
            answer = ws.recv(timeout=60)
            return f"{str(answer)[:80]} ({wire} bytes on the wire)"
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
            return f"closed {code} ({wire} bytes compressed)"


def ws_queued_lanes(url: str) -> str:
    """16 lanes x 64 queued creates of 1 MB each (1 GiB if all were kept)."""
    pad = "p" * (1 << 20)
    accepted_errors: list[str] = []
    with ws_connect(_ws_url(url), compression=None, max_size=None, open_timeout=30) as ws:
        sent = 0
        for lane in range(16):
            for _ in range(64):
                body = {
                    "type": "response.create",
                    "input": "#lorem 2000",
                    "stream_id": f"l{lane}",
                    "pad": pad,
                }
                try:
                    ws.send(json.dumps(body))
                except ConnectionClosed:
                    break
                sent += 1
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(accepted_errors) < sent:
            try:
                event = json.loads(ws.recv(timeout=2))
            except (TimeoutError, ConnectionClosed):
                break
            if event.get("type") == "error":
                accepted_errors.append(event["error"].get("code") or "error")
    return f"{sent} sent; errors: {_tally(accepted_errors) or 'none'}"


def ws_long_stream_id(url: str) -> str:
    with ws_connect(_ws_url(url), compression=None, max_size=None, open_timeout=30) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "#lorem 100", "stream_id": "s" * (1 << 20)}))
        answer = ws.recv(timeout=60)
    event = json.loads(answer)
    return f"{event.get('type')} {event.get('error', {}).get('param')} ({len(answer)} bytes back)"


def idle_sockets(url: str, count: int = 2048) -> str:
    """``count`` idle connections from another address (127.0.0.2); then /health from a third one."""
    host, port = _host_port(url)
    held: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.2", 0))
            sock.settimeout(5)
            try:
                sock.connect((host, port))
            except OSError:
                refused += 1
                sock.close()
                continue
            held.append(sock)
        closed = 0
        pending = list(held)
        deadline = time.monotonic() + 60  # the server accepts them at its own pace
        while pending and time.monotonic() < deadline:
            still = []
            for sock in pending:
                sock.setblocking(False)
                try:
                    if sock.recv(64).startswith(b"HTTP/1.1 503"):
                        closed += 1
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    continue
                still.append(sock)
            pending = still
            if len(pending) <= 256:
                break
            time.sleep(0.2)
        probe = socket.socket()
        probe.bind(("127.0.0.3", 0))
        probe.settimeout(10)
        probe.connect((host, port))
        probe.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        health = probe.recv(64).split(b"\r\n", 1)[0].decode()
        probe.close()
    finally:
        for sock in held:
            sock.close()
    return f"{len(held)} connected, {closed} answered 503 at once, {refused} refused; /health from another: {health!r}"


# -- background ------------------------------------------------------------------------------------------


def background_large(url: str) -> str:
    ids, answers = [], []
    for _ in range(20):
        status, body = _request(url, "POST", "/v1/responses", {"input": "#lorem 100000", "background": True})
        answers.append(str(status))
        if status == 200:
            ids.append(body["id"])
    time.sleep(3)
    for response_id in ids:
        _request(url, "POST", f"/v1/responses/{response_id}/cancel")
    return _tally(answers)


def background_flood(url: str) -> str:
    ids, answers = [], []
    for _ in range(500):
        status, body = _request(url, "POST", "/v1/responses", {"input": "#lorem 2000", "background": True})
        error = body.get("error") if isinstance(body, dict) else None
        answers.append(f"{status} {error.get('code') if isinstance(error, dict) else ''}".strip())
        if status == 200:
            ids.append(body["id"])
    for response_id in ids:
        _request(url, "POST", f"/v1/responses/{response_id}/cancel")
    return _tally(answers)


# -- conversations ---------------------------------------------------------------------------------------


def conversation_huge_body(url: str) -> str:
    host, port = _host_port(url)
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/conversations HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: 314572800\r\n\r\n{"
        )
        answer = sock.recv(65536)
    return answer.split(b"\r\n", 1)[0].decode() or "no answer"


def conversation_10k_turn(url: str) -> str:
    status, conversation = _request(url, "POST", "/v1/conversations", {"items": []})
    item = {"type": "message", "role": "user", "content": "lorem ipsum dolor sit amet " * 40}
    for _ in range(500):
        _request(url, "POST", f"/v1/conversations/{conversation['id']}/items", {"items": [item] * 20})
    began = time.monotonic()
    status, body = _request(
        url, "POST", "/v1/responses", {"input": "and?", "conversation": conversation["id"]}
    )
    took = time.monotonic() - began
    code = (
        body.get("error", {}).get("code")
        if isinstance(body, dict) and body.get("error")
        else body.get("status")
    )
    status_page, page = _request(url, "GET", f"/v1/conversations/{conversation['id']}/items?limit=1")
    return f"turn {status} {code} in {took:.2f} s; items?limit=1 {status_page}"


# -- tool output -----------------------------------------------------------------------------------------


def _mcp_body(n: int, **extra: Any) -> dict[str, Any]:
    tool = {"type": "mcp", "server_label": "demo", "server_url": MCP_URL, "require_approval": "never"}
    return {"input": f'call demo.big {{"n": {n}}}', "tools": [tool], "max_output_tokens": 400, **extra}


def mcp_big_result(url: str) -> str:
    answers = []
    status, body = _request(url, "POST", "/v1/responses", _mcp_body(900_000))
    call = next((i for i in body.get("output", []) if i.get("type") == "mcp_call"), {})
    answers.append(f"non-streamed {status} {body.get('status')} (call {call.get('status')})")
    status, created = _request(url, "POST", "/v1/responses", _mcp_body(900_000, background=True))
    deadline = time.monotonic() + 120
    final: Any = {}
    while time.monotonic() < deadline:
        status, final = _request(url, "GET", f"/v1/responses/{created['id']}")
        if final.get("status") not in ("queued", "in_progress"):
            break
        time.sleep(0.2)
    answers.append(f"background {status} {final.get('status')}")
    with ws_connect(_ws_url(url), max_size=None, open_timeout=30) as ws:
        ws.send(json.dumps({"type": "response.create", **_mcp_body(900_000)}))
        while True:
            event = json.loads(ws.recv(timeout=120))
            if event["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
                answers.append(f"websocket {event['type']}")
                break
    return "; ".join(answers)


SURFACE_ATTACKS: dict[str, Callable[[str], str]] = {
    "ws: 8 KB compressed into 8 MB": ws_compressed_8mb,
    "ws: 16 lanes x 64 queued 1 MB creates": ws_queued_lanes,
    "ws: 1 MB stream_id": ws_long_stream_id,
    "2048 idle sockets from one address": idle_sockets,
    "background: 20 x #lorem 100000": background_large,
    "background: 500 creates": background_flood,
    "conversation: 300 MiB Content-Length": conversation_huge_body,
    "conversation: turn over 10,000 items": conversation_10k_turn,
    "tool output: 900 KB MCP result": mcp_big_result,
}
