"""HTTP-level limits (``HTTPLimits``), each crossed on a real uvicorn over raw loopback sockets.

Deadlines are short here (about a second) so the tests stay fast; the benchmark
(``benchmarks/hostile_input.py``) measures 200 slowloris connections at the defaults.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.server_harness import RunningServer

from trtllm_responses.cli.command import build_parser
from trtllm_responses.cli.serve_options import HTTP_LIMIT_FLAGS, server_config
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.server.http_limits import HTTPLimits

LIMITS = HTTPLimits(
    max_head_bytes=8192,
    max_header_count=20,
    timeout_request_head=1.0,
    timeout_request_body=1.0,
    timeout_keep_alive=0.5,
    limit_concurrency=200,
)


@pytest.fixture(scope="module")
def server_options() -> dict[str, Any]:
    return {"http": LIMITS}


def _address(server: RunningServer) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _connect(server: RunningServer) -> socket.socket:
    return socket.create_connection(_address(server), timeout=10)


def _read_all(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection (or ``timeout``)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return data


def _parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def _assert_envelope(raw: bytes, status: int, code: str) -> dict[str, str]:
    got, headers, body = _parse(raw)
    assert got == status, raw[:300]
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    assert error["message"].endswith(".")
    return headers


def _send_until_answered(sock: socket.socket, data: bytes, chunk: int = 4096) -> tuple[int, bytes]:
    """Send ``data`` in chunks until the server answers; return (bytes sent, the answer)."""
    sent = 0
    while sent < len(data):
        try:
            sock.sendall(data[sent : sent + chunk])
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += chunk
        if select.select([sock], [], [], 0.02)[0]:
            break
    return sent, _read_all(sock)


def test_slowloris_connections_are_closed_by_the_head_deadline(server: RunningServer) -> None:
    # 30 clients send one byte of a request head every 0.2 s; the head deadline is 1 s.
    request = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    socks = [_connect(server) for _ in range(30)]
    answers: dict[int, bytes] = {}
    started = time.monotonic()
    for i in range(len(request)):
        for n, sock in enumerate(socks):
            if n in answers:
                continue
            if select.select([sock], [], [], 0)[0]:
                answers[n] = _read_all(sock, 2)
                continue
            try:
                sock.sendall(request[i : i + 1])
            except (BrokenPipeError, ConnectionResetError):
                answers[n] = _read_all(sock, 2)
        # A normal request is served meanwhile.
        if i == 2:
            with httpx.Client(base_url=server.base_url, timeout=10) as client:
                assert client.post("/v1/responses", json={"input": "hi"}).status_code == 200
        if len(answers) == len(socks):
            break
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    for sock in socks:
        sock.close()
    assert len(answers) == len(socks), f"{len(socks) - len(answers)} slow connections still open"
    assert elapsed < 8, elapsed  # cut at ~1 s; the margin is for a loaded machine
    for raw in answers.values():
        _assert_envelope(raw, 408, "request_timeout")


def test_a_silent_connection_is_closed_by_the_head_deadline(server: RunningServer) -> None:
    with _connect(server) as sock:
        started = time.monotonic()
        raw = _read_all(sock)
        assert time.monotonic() - started < 8
    _assert_envelope(raw, 408, "request_timeout")


def test_a_stalled_body_is_cut_by_the_body_deadline(server: RunningServer) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"input": '
        )
        raw = _read_all(sock)
    headers = _assert_envelope(raw, 408, "request_timeout")
    assert "body" in json.loads(_parse(raw)[2])["error"]["message"]
    assert int(headers["content-length"]) == len(_parse(raw)[2])


def test_an_unterminated_huge_header_is_cut_at_the_head_limit(server: RunningServer) -> None:
    data = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (50 << 20)
    with _connect(server) as sock:
        sent, raw = _send_until_answered(sock, data)
    _assert_envelope(raw, 431, "headers_too_large")
    assert sent < 1 << 20  # answered long before 50 MB


def test_too_many_headers_are_431(server: RunningServer) -> None:
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(LIMITS.max_header_count + 1))
    with _connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
        raw = _read_all(sock)
    _assert_envelope(raw, 431, "too_many_headers")


def test_headers_at_the_limit_are_served(server: RunningServer) -> None:
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(LIMITS.max_header_count - 2))
    with _connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"\r\n")
        raw = _read_all(sock)
    assert _parse(raw)[0] == 200, raw


def test_a_100_kb_url_is_414(server: RunningServer) -> None:
    with _connect(server) as sock:
        _, raw = _send_until_answered(sock, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    _assert_envelope(raw, 414, "url_too_long")


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
        b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello on the plain port
    ],
    ids=["bad-chunk-size", "content-length-with-chunked", "space-in-header-name", "tls-hello"],
)
def test_malformed_http_gets_the_error_envelope(server: RunningServer, request_bytes: bytes) -> None:
    with _connect(server) as sock:
        sock.sendall(request_bytes)
        raw = _read_all(sock)
    headers = _assert_envelope(raw, 400, "invalid_http")
    body = json.loads(_parse(raw)[2])
    assert body["error"]["type"] == "invalid_request_error"
    assert int(headers["content-length"]) == len(_parse(raw)[2])


def test_an_idle_keep_alive_connection_is_closed(server: RunningServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        raw = _read_all(sock)
        waited = time.monotonic() - started
    assert _parse(raw)[0] == 200
    assert waited < 8  # closed after ~0.5 s idle, not held open


#: How long common clients keep an idle pooled connection (seconds): httpx and openai-python (``keepalive_expiry``),
#: Node's undici (``keepAliveTimeout``), aiohttp (``keepalive_timeout``), nginx's upstream ``keepalive_timeout``,
#: Go's ``http.DefaultTransport`` (``IdleConnTimeout``). docs/limits.md#http-limits.
CLIENT_POOLS = {"httpx": 5.0, "undici": 4.0, "aiohttp": 15.0, "nginx upstream": 60.0, "go net/http": 90.0}


def test_the_server_keeps_an_idle_connection_longer_than_any_common_clients_pool(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    """Whichever side closes an idle connection first races the other's reuse of it: the server must not.
    Before: uvicorn's 5 s against httpx's 5 s; a POST sent as the server closed failed (8 in a soak)."""
    with serve(EchoExecutor(encoding)) as running:  # the default limits
        pool = httpx.Limits(max_connections=1, keepalive_expiry=60)  # a client that pools longer than httpx
        with httpx.Client(base_url=running.base_url, timeout=10, limits=pool) as client:
            first = client.get("/health")
            before = first.extensions["network_stream"].get_extra_info("client_addr")
            time.sleep(6)  # idle past httpx's 5 s (and uvicorn's own default)
            again = client.post("/v1/responses", json={"input": "hi"})
            after = again.extensions["network_stream"].get_extra_info("client_addr")
    assert again.status_code == 200 and again.json()["status"] == "completed"
    assert after == before, "the server closed the idle connection: the client had to open another"
    assert HTTPLimits().timeout_keep_alive > max(CLIENT_POOLS.values())


def test_a_keep_alive_connection_serves_several_requests(server: RunningServer) -> None:
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        for _ in range(3):
            assert client.get("/health").status_code == 200
            time.sleep(0.1)


def test_a_long_stream_outlives_the_deadlines(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    # 40 tokens at 20/s take 2 s: longer than both deadlines, which apply to receiving, not answering.
    running = serve(EchoExecutor(encoding, tokens_per_second=20), http=LIMITS)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            with client.stream("POST", "/v1/responses", json={"input": "#lorem 40", "stream": True}) as r:
                assert r.status_code == 200
                body = b"".join(r.iter_bytes())
        assert b"response.completed" in body
    finally:
        running.stop()


def test_a_pipelined_request_waits_for_a_long_stream(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    # The second request is read while the first streams for ~2 s (both deadlines are 1 s): the deadlines
    # wait for the earlier response rather than cutting the connection under it.
    running = serve(EchoExecutor(encoding, tokens_per_second=20), http=LIMITS)
    try:
        body = json.dumps({"input": "#lorem 40", "stream": True}).encode()
        first = (
            b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        with _connect(running) as sock:
            # The second head is incomplete for 1.5 s, past the head deadline, while the first streams.
            sock.sendall(first + b"GET /health HTTP/1.1\r\nHost: x\r\n")
            time.sleep(1.5)
            sock.sendall(b"Connection: close\r\n\r\n")
            raw = _read_all(sock, 30)
        assert raw.startswith(b"HTTP/1.1 200 OK"), raw[:200]
        assert b"response.completed" in raw
        assert raw.count(b"HTTP/1.1 200 OK") == 2
        assert raw.endswith(b'{"status":"ok","executor":"echo","frontend":0}')
    finally:
        running.stop()


def test_over_limit_concurrency_is_503_with_retry_after(serve) -> None:  # type: ignore[no-untyped-def]
    limits = HTTPLimits(limit_concurrency=3, timeout_request_head=30)
    running = serve(http=limits)
    try:
        idle = [_connect(running) for _ in range(3)]
        with _connect(running) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            raw = _read_all(sock)
        headers = _assert_envelope(raw, 503, "server_overloaded")
        assert headers["retry-after"] == "1"
        assert json.loads(_parse(raw)[2])["error"]["type"] == "server_error"
        for sock in idle:
            sock.close()
        deadline = time.monotonic() + 10
        while True:  # the server notices the closed connections, then serves again
            with httpx.Client(base_url=running.base_url, timeout=10) as client:
                if client.get("/health").status_code == 200:
                    break
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        running.stop()


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v1/responses", "POST"),
        ("PUT", "/v1/responses", "POST"),
        ("POST", "/health", "GET"),
        ("PUT", "/v1/responses/resp_1", "GET, DELETE"),
        ("POST", "/v1/responses/resp_1/input_items", "GET"),
        ("DELETE", "/v1/models", "GET"),
    ],
)
def test_405_carries_allow(server: RunningServer, method: str, path: str, allow: str) -> None:
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        response = client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    error = response.json()["error"]
    assert error["code"] == "method_not_allowed"
    assert error["message"].endswith(f"use {allow.replace(', ', ' or ')}.")


def test_serve_flags_fill_http_limits() -> None:
    values: dict[str, Any] = {
        "max_head_bytes": 1000,
        "max_header_count": 7,
        "timeout_request_head": 2.5,
        "timeout_request_body": 3.5,
        "timeout_keep_alive": 1.5,
        "limit_concurrency": 9,
        "max_connections_per_client": 5,
    }
    assert set(values) == set(HTTP_LIMIT_FLAGS) == set(HTTPLimits.__dataclass_fields__)
    argv = ["serve"] + [f"--{name}={value}" for name, value in values.items()]
    config = server_config(build_parser().parse_args(argv))
    assert config.http == HTTPLimits(**values)
    assert server_config(build_parser().parse_args(["serve"])).http == HTTPLimits()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--timeout_request_head=0"])


def test_the_serve_command_enforces_its_flags(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    err = (tmp_path / "stderr").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "trtllm_responses.cli", "serve", "--port", str(port), "--log_level", "warning"]
        + ["--timeout_request_head", "0.5", "--max_header_count", "5"],
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    err.close()  # the child holds its own copy
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "stderr"
                ).read_text()
                time.sleep(0.1)
        with sock:
            raw = _read_all(sock)
        _assert_envelope(raw, 408, "request_timeout")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(6)) + b"\r\n"
            )
            _assert_envelope(_read_all(sock), 431, "too_many_headers")
    finally:
        process.terminate()
        process.wait(timeout=20)


class _Transport:
    """A transport stand-in: ``is_closing`` is all the per-client table reads."""

    def __init__(self, closing: bool) -> None:
        self.closing = closing

    def is_closing(self) -> bool:
        return self.closing


def test_the_per_client_table_forgets_idle_addresses_and_sweeps_amortized() -> None:
    from trtllm_responses.server.http_protocol import protocol_class

    cls = protocol_class(HTTPLimits(max_connections_per_client=4))
    held = []  # the table holds transports weakly: keep them alive here
    for i in range(1024):
        transport = _Transport(closing=i % 2 == 0)  # half the addresses have nothing open any more
        held.append(transport)
        protocol = object.__new__(cls)
        protocol.client = (f"10.0.{i // 256}.{i % 256}", 1)
        assert protocol._admit_client(transport)  # type: ignore[arg-type]
    assert len(cls.clients) == 1024
    newcomer = object.__new__(cls)
    newcomer.client = ("10.9.9.9", 1)
    live = _Transport(closing=False)
    assert newcomer._admit_client(live)  # type: ignore[arg-type]
    assert len(cls.clients) == 513  # the 512 idle addresses forgotten, the live ones and the newcomer kept
    assert cls.sweep_at == 1024  # twice the 512 kept would be 1024: the floor
    for i in range(600):  # live addresses only: the table grows past the floor...
        transport = _Transport(closing=False)
        held.append(transport)
        protocol = object.__new__(cls)
        protocol.client = (f"10.1.{i // 256}.{i % 256}", 1)
        assert protocol._admit_client(transport)  # type: ignore[arg-type]
    # ...and the sweep at 1024 kept all of them, so the next waits for the table to double.
    assert cls.sweep_at == 2 * 1024 and len(cls.clients) == 1113
