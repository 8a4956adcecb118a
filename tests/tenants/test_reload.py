"""SIGHUP reloads the tenants file in every frontend of a group (docs/tenants.md#the-tenants-file): a key
added works, a key removed is refused, and a stream already running under a removed key finishes."""

from __future__ import annotations

import json
import signal
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
from support.process_harness import ServeProcess

from trtllm_responses.tenants import hash_key

KEY_A, KEY_B, KEY_C = "sk-a-reload", "sk-b-reload", "sk-c-reload"


def write_tenants(path: Path, **keys: str) -> None:
    path.write_text(json.dumps({"tenants": {name: {"keys": [hash_key(key)]} for name, key in keys.items()}}))


def statuses(server: ServeProcess, key: str, connections: int = 12) -> set[int]:
    """The statuses of ``GET /v1/models`` with ``key`` over new connections (the kernel spreads them over the
    group's frontends) and which frontends answered."""
    seen = set()
    for _ in range(connections):
        with closing(httpx.Client(base_url=server.base_url, timeout=10)) as client:
            seen.add(client.get("/v1/models", headers={"authorization": f"Bearer {key}"}).status_code)
    return seen


def frontends_reached(server: ServeProcess, tries: int = 60) -> set[int]:
    reached = set()
    for _ in range(tries):
        with closing(httpx.Client(base_url=server.base_url, timeout=10)) as client:
            reached.add(client.get("/health").json()["frontend"])
    return reached


def test_sighup_reloads_every_frontend_and_open_streams_finish(tmp_path: Path) -> None:
    tenants = tmp_path / "tenants.json"
    write_tenants(tenants, a=KEY_A, b=KEY_B)
    store = f"sqlite:///{tmp_path / 'reload.db'}"
    server = ServeProcess(
        "--num_serve_frontends",
        "2",
        "--store",
        store,
        "--tenants",
        str(tenants),
        "--echo_tokens_per_second",
        "40",
    ).start()
    try:
        assert frontends_reached(server) == {0, 1}  # the connections below reach both
        assert statuses(server, KEY_A) == {200} and statuses(server, KEY_C) == {401}
        events: list[str] = []
        started = threading.Event()

        def stream_as_a() -> None:
            body: dict[str, Any] = {"model": "m", "input": "#lorem 120", "stream": True}
            headers = {"authorization": f"Bearer {KEY_A}"}
            with httpx.stream(
                "POST", server.base_url + "/v1/responses", json=body, headers=headers, timeout=60
            ) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line[6:])["type"])
                        started.set()

        streaming = threading.Thread(target=stream_as_a)
        streaming.start()
        assert started.wait(30), "the stream began"
        write_tenants(tenants, b=KEY_B, c=KEY_C)  # a removed, c added
        assert server.process is not None
        server.process.send_signal(signal.SIGHUP)  # to the launcher: it tells the other frontend
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            statuses(server, KEY_C) != {200} or statuses(server, KEY_A) != {401}
        ):
            time.sleep(0.2)
        assert statuses(server, KEY_C, 24) == {200}, "a key added works on every frontend"
        assert statuses(server, KEY_A, 24) == {401}, "a key removed is refused on every frontend"
        assert statuses(server, KEY_B, 24) == {200}
        streaming.join(60)
        assert events[-1] == "response.completed", events[-3:]  # the stream begun under a finished
        assert server.process.poll() is None  # SIGHUP reloads, never stops the server
    finally:
        server.terminate()


def test_a_tenants_file_with_a_plain_key_refuses_to_start_without_echoing_it(tmp_path: Path) -> None:
    tenants = tmp_path / "tenants.json"
    tenants.write_text(json.dumps({"tenants": {"a": {"keys": [KEY_A]}}}))
    server = ServeProcess("--tenants", str(tenants))
    try:
        server.start(timeout=60)
    except RuntimeError as refused:
        said = str(refused)
        assert "serve exited with 2" in said and "hash-key" in said and KEY_A not in said
    else:
        server.terminate()
        raise AssertionError("serve started with a plain key in its tenants file")


def test_a_websocket_whose_key_was_removed_takes_no_more_messages(serve: Any, tmp_path: Path) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    tenants = tmp_path / "tenants.json"
    write_tenants(tenants, a=KEY_A, b=KEY_B)
    with serve(tenants_file=str(tenants)) as running:
        url = running.base_url.replace("http://", "ws://") + "/v1/responses"
        create = json.dumps({"type": "response.create", "model": "m", "input": "hello", "store": False})
        with connect(url, additional_headers={"authorization": f"Bearer {KEY_A}"}) as socket:
            socket.send(create)
            while json.loads(socket.recv(timeout=30))["type"] != "response.completed":
                pass
            write_tenants(tenants, b=KEY_B)
            assert running.app.tenants.reload()
            socket.send(create)
            error = json.loads(socket.recv(timeout=30))
            assert error["type"] == "error" and error["error"]["code"] == "invalid_api_key", error
            try:
                socket.recv(timeout=10)
            except ConnectionClosed as closed:
                assert closed.rcvd is not None and closed.rcvd.code == 1008
            else:
                raise AssertionError("the connection stays open")
