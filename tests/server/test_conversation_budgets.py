"""Conversations under hostile use: body size, a turn's size, duplicate item ids; and /stats?reset's key.

Before: the routes read a whole 300 MiB body before the 413; a turn in a conversation of any size
was converted and rendered in full before the context check (loop stall, render worker busy for
tens of seconds); the same item id could be stored twice; anyone could clear /stats' windows.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.server_harness import RunningServer

LIMIT = 64 << 10  # --max_input_bytes


@pytest.fixture(scope="module")
def server_options() -> dict[str, Any]:
    return {"max_input_bytes": LIMIT, "api_key": "k"}


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    headers = {"authorization": "Bearer k"}
    with httpx.Client(base_url=server.base_url, timeout=60, headers=headers) as client:
        yield client


def message(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text, **extra}


def test_a_body_declared_too_large_is_refused_before_it_is_read(server: RunningServer) -> None:
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/conversations HTTP/1.1\r\nhost: x\r\nauthorization: Bearer k\r\n"
            b"content-type: application/json\r\ncontent-length: 314572800\r\n\r\n{"
        )
        began = time.monotonic()
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"request_too_large" in answer
    assert time.monotonic() - began < 5  # answered without waiting for the 300 MiB


def test_a_chunked_body_is_refused_as_soon_as_it_grows_too_large(server: RunningServer) -> None:
    """17 MiB of a body that never ends: answered 413 while it is still arriving (before: never answered)."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/conversations HTTP/1.1\r\nhost: x\r\nauthorization: Bearer k\r\n"
            b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * (1 << 20)
        try:
            for _ in range(17):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass  # the server answered and closed while we were still sending
        sock.settimeout(5)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_turn_too_large_for_the_window_is_refused_before_rendering(
    server: RunningServer, http: httpx.Client
) -> None:
    items = [message("word " * 2000) for _ in range(20)]  # 20 x 10 KB > 64 KiB
    conversation = http.post("/v1/conversations", json={"items": items}).json()["id"]
    executor: Any = server.executor
    before = len(getattr(executor, "_running", {}))
    began = time.monotonic()
    reply = http.post("/v1/responses", json={"input": "and now?", "conversation": conversation})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "conversation"
    assert "--max_input_bytes" in error["message"]
    assert time.monotonic() - began < 5
    assert len(getattr(executor, "_running", {})) == before
    # A conversation that fits is answered.
    small = http.post("/v1/conversations", json={"items": [message("hello")]}).json()["id"]
    ok = http.post("/v1/responses", json={"input": "hi", "conversation": small})
    assert ok.status_code == 200 and ok.json()["status"] == "completed"


def test_duplicate_item_ids_are_refused(http: httpx.Client) -> None:
    twice = [message("a", id="msg_same"), message("b", id="msg_same")]
    created = http.post("/v1/conversations", json={"items": twice})
    assert created.status_code == 400
    assert created.json()["error"]["param"] == "items[1].id"
    assert created.json()["error"]["code"] == "duplicate_item_id"
    conversation = http.post("/v1/conversations", json={"items": [message("a", id="msg_one")]}).json()["id"]
    added = http.post(f"/v1/conversations/{conversation}/items", json={"items": [message("b", id="msg_one")]})
    assert added.status_code == 400 and added.json()["error"]["param"] == "items[0].id"
    turn = http.post(
        "/v1/responses", json={"input": [message("c", id="msg_one")], "conversation": conversation}
    )
    assert turn.status_code == 400 and turn.json()["error"]["param"] == "input[0].id"
    listed = http.get(f"/v1/conversations/{conversation}/items").json()["data"]
    assert [item["id"] for item in listed] == ["msg_one"]
    fresh = http.post(f"/v1/conversations/{conversation}/items", json={"items": [message("d", id="msg_two")]})
    assert fresh.status_code == 200


def test_stats_and_their_reset_need_the_api_key(server: RunningServer) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as anonymous:
        # What /stats counts crosses requests (docs/tenants.md#isolation): reading it needs the key too.
        read = anonymous.get("/stats")
        assert read.status_code == 401 and read.json()["error"]["code"] == "invalid_api_key"
        assert anonymous.get("/stats", headers={"authorization": "Bearer k"}).status_code == 200
        refused = anonymous.get("/stats", params={"reset": "1"})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        wrong = anonymous.get("/stats", params={"reset": "1"}, headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        allowed = anonymous.get("/stats", params={"reset": "1"}, headers={"authorization": "Bearer k"})
        assert allowed.status_code == 200
