"""Memory budgets of the WebSocket mode and of connections, each crossed on a real server over loopback.

- a message over ``--max_input_bytes`` is refused before it is parsed (an error event, the socket
  stays usable), and one far over it, even 8 KB compressed on the wire, closes the socket (1009)
  before the server holds it;
- ``response.create`` messages waiting on a connection hold at most MAX_QUEUED_INPUTS x
  ``--max_input_bytes``;
- a ``stream_id`` is at most MAX_STREAM_ID characters, and a refused one is not echoed;
- the depth limit applies to WebSocket messages (a 300-level message was a 500 before);
- one client address holds at most ``max_connections_per_client`` connections, so it cannot make
  every other client's requests (``/health`` included) a 503.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.server_harness import TERMINAL, RunningServer
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.server.http_limits import HTTPLimits
from trtllm_responses.server.websocket import MAX_LANES, MAX_QUEUED_INPUTS, MAX_STREAM_ID

LIMIT = 64 << 10  # --max_input_bytes of these servers


@pytest.fixture(scope="module")
def server_options(encoding) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    # 40 tokens a second: a '#lorem 2000' response runs long enough for messages to queue behind it.
    return {"executor": EchoExecutor(encoding, tokens_per_second=40), "max_input_bytes": LIMIT}


def ws_url(server: RunningServer) -> str:
    return server.base_url.replace("http://", "ws://") + "/v1/responses"


def recv(ws: Any, timeout: float = 30) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(ws.recv(timeout=timeout))
    return event


def next_error(ws: Any) -> dict[str, Any]:
    while True:
        event = recv(ws)
        if event["type"] == "error":
            return event


def finish(ws: Any) -> dict[str, Any]:
    while True:
        event = recv(ws)
        if event["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
            return event


def test_a_message_over_max_input_bytes_is_refused_and_the_socket_stays_usable(server: RunningServer) -> None:
    with ws_connect(ws_url(server), compression=None) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "x" * (LIMIT + 10)}))
        error = recv(ws)
        assert error["type"] == "error" and error["status"] == 400
        assert error["error"]["code"] == "context_length_exceeded"
        assert str(LIMIT) in error["error"]["message"]
        ws.send(json.dumps({"type": "response.create", "input": "still here", "store": False}))
        done = finish(ws)
        assert done["type"] == "response.completed"
        assert done["response"]["output"][-1]["content"][0]["text"] == "still here"


def test_a_compressed_message_expanding_past_the_limit_closes_the_socket_unread(
    server: RunningServer,
) -> None:
    """8 KB of permessage-deflate on the wire that would be 8 MB in the server: closed with 1009."""
    with ws_connect(ws_url(server), compression="deflate", max_size=None) as ws:
        assert ws.protocol.extensions, "the server must have negotiated permessage-deflate for this test"
        ws.send(json.dumps({"type": "response.create", "input": "a" * (8 << 20)}))
        with pytest.raises(ConnectionClosed) as closed:
            recv(ws)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert httpx.get(server.base_url + "/health", timeout=10).status_code == 200


def test_the_bytes_waiting_on_a_connection_are_bounded(server: RunningServer) -> None:
    padding = "p" * (LIMIT - 4096)  # an unknown field: ignored by create, counted by the budget
    with ws_connect(ws_url(server), compression=None) as ws:
        for _ in range(MAX_QUEUED_INPUTS + 3):
            ws.send(
                json.dumps(
                    {"type": "response.create", "input": "#lorem 2000", "store": False, "pad": padding}
                )
            )
        error = next_error(ws)
        assert error["error"]["code"] == "too_many_requests"
        assert "bytes" in error["error"]["message"]
        # Once a waiting response ends, room is made again: the connection is slowed, not broken.


def test_a_long_stream_id_is_refused_without_being_echoed(server: RunningServer) -> None:
    with ws_connect(ws_url(server), compression=None) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "hi", "stream_id": "s" * 60_000}))
        raw = ws.recv(timeout=30)
        assert len(raw) < 1000  # the 60,000-character id is not echoed
        error = json.loads(raw)
        assert error["type"] == "error" and error["error"]["param"] == "stream_id"
        assert "stream_id" not in error
        ok = "s" * MAX_STREAM_ID
        ws.send(json.dumps({"type": "response.create", "input": "hi", "stream_id": ok, "store": False}))
        done = finish(ws)
        assert done["type"] == "response.completed" and done["stream_id"] == ok


def test_nesting_past_the_depth_limit_is_a_400_over_websocket(server: RunningServer) -> None:
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    with ws_connect(ws_url(server), compression=None) as ws:
        for message in (
            {"type": "response.create", "input": deep},
            {"type": "response.steer", "previous_response_id": "resp_x", "input": deep},
        ):
            ws.send(json.dumps(message))
            error = recv(ws)
            assert error["type"] == "error" and error["status"] == 400, error
            assert "64 levels" in error["error"]["message"]
        ws.send(json.dumps({"type": "response.create", "input": "after", "store": False}))
        assert finish(ws)["type"] == "response.completed"


# -- connections per client address ------------------------------------------------------------------


PER_CLIENT = 8


@pytest.fixture(scope="module")
def capped(serve) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    limits = HTTPLimits(limit_concurrency=3 * PER_CLIENT, max_connections_per_client=PER_CLIENT)
    running = serve(http=limits)
    yield running
    running.stop()


def _address(server: RunningServer) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _connect(server: RunningServer, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(_address(server))
    return sock


def _health_from(server: RunningServer, source: str) -> int:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.get(server.base_url + "/health").status_code


def _refused(sock: socket.socket) -> bytes:
    """What the server sent before closing, if it did so within a second (b"" for a socket left open)."""
    sock.settimeout(1.0)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return b""
    return data


def test_one_client_holding_idle_sockets_cannot_make_others_503(capped: RunningServer) -> None:
    """Before: 4 x the per-client number of idle sockets from one address took every slot of the
    connection cap, and every request (``/health`` included) from anyone was a 503."""
    held = [_connect(capped) for _ in range(4 * PER_CLIENT)]
    try:
        answers = [_refused(s) for s in held[PER_CLIENT:]]
        assert all(a.startswith(b"HTTP/1.1 503") and b"too_many_connections" in a for a in answers), answers[
            :2
        ]
        assert all(_refused(s) == b"" for s in held[:PER_CLIENT])  # the first ones stay open
        assert _health_from(capped, "127.0.0.2") == 200  # another client is served
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 10
    while _health_from(capped, "127.0.0.1") != 200:  # the slots come back as the sockets close
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_websocket_connections_count_against_their_client(capped: RunningServer) -> None:
    url = capped.base_url.replace("http://", "ws://") + "/v1/responses"
    sockets = [ws_connect(url) for _ in range(PER_CLIENT)]
    try:
        extra = _connect(capped)
        assert _refused(extra).startswith(b"HTTP/1.1 503")
        extra.close()
        assert _health_from(capped, "127.0.0.3") == 200
    finally:
        for ws in sockets:
            ws.close()
    deadline = time.monotonic() + 10
    while _health_from(capped, "127.0.0.1") != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_the_handshake_says_the_largest_message_taken_and_codex_fields_are_accepted(
    server: RunningServer,
) -> None:
    """Codex 0.171 reads ``x-codex-websocket-max-message-bytes`` from the handshake response (beside
    ``openai-model``): it is ``--max_input_bytes``, which a message one byte over crosses (an error event). A
    client sending the header, and ``request_country`` in ``response.create``, get an ordinary response."""
    headers = {
        "x-codex-websocket-max-message-bytes": "1048576",
        "openai-beta": "responses_websockets=2026-02-06",
    }
    with ws_connect(ws_url(server), compression=None, additional_headers=headers) as ws:
        assert ws.response is not None
        advertised = int(ws.response.headers["x-codex-websocket-max-message-bytes"])
        assert advertised == LIMIT
        ws.send(
            json.dumps(
                {"type": "response.create", "input": "Bonjour", "request_country": "FR", "store": False}
            )
        )
        done = finish(ws)
        assert done["type"] == "response.completed"
        assert done["response"]["output"][-1]["content"][0]["text"] == "Bonjour"
        frame = {"type": "response.create", "input": "", "store": False}
        frame["input"] = "x" * (advertised - len(json.dumps(frame)) + 1)  # one byte over what was advertised
        ws.send(json.dumps(frame))
        assert recv(ws)["error"]["code"] == "context_length_exceeded"


def _terminal(ws: Any) -> dict[str, Any]:
    """The next terminal or error event on ``ws``."""
    while True:
        data = json.loads(ws.recv())
        if data["type"] == "error" or data["type"] in TERMINAL:
            return data  # type: ignore[no-any-return]


def test_remembered_conversations_stay_within_the_connection_budget(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    # Before: each lane's last response (generate: false ones too) kept its rendered history, ~32 MB a
    # connection outside any budget. Now at most MAX_REMEMBERED_INPUTS x --max_input_bytes: the least
    # recently answered lanes are forgotten first, never the lane just answered.
    with serve(EchoExecutor(encoding), max_input_bytes=LIMIT) as running:
        url = running.base_url.replace("http://", "ws://") + "/v1/responses"
        ids: list[str] = []
        with ws_connect(url, max_size=None) as ws:
            for lane in range(MAX_LANES):
                text = f"lane {lane} " + " ".join(f"w{lane}x{i}" for i in range(LIMIT // 16))
                message = {"type": "response.create", "model": "m", "input": text, "store": False}
                ws.send(json.dumps({**message, "generate": False, "stream_id": f"l{lane}"}))
                ended = _terminal(ws)
                assert ended["type"] == "response.completed", ended
                ids.append(ended["response"]["id"])

            def turn(lane: int) -> dict[str, Any]:
                body = {"type": "response.create", "model": "m", "input": "more", "store": False}
                ws.send(json.dumps({**body, "previous_response_id": ids[lane], "stream_id": f"l{lane}"}))
                return _terminal(ws)

            # The last lanes answered are remembered; the first ones were forgotten to stay in budget.
            assert turn(MAX_LANES - 1)["type"] == "response.completed"
            forgotten = turn(0)
            assert forgotten["type"] == "error"
            assert forgotten["error"]["code"] == "previous_response_not_found"
