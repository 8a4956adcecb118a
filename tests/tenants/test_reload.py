"""Reloading the tenants file (docs/tenants.md#the-tenants-file): a file with a plain key refuses the start
without echoing it; an open WebSocket whose key was removed takes no more messages. SIGHUP across a group of
frontends (a key added works on both, a removed one is refused, a running stream finishes) is
``tests/cli/test_frontend_tenants.py``, on the group its other tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.process_harness import ServeProcess

from trtllm_responses.tenants import hash_key

KEY_A, KEY_B = "sk-a-reload", "sk-b-reload"


def write_tenants(path: Path, **keys: str) -> None:
    path.write_text(json.dumps({"tenants": {name: {"keys": [hash_key(key)]} for name, key in keys.items()}}))


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
