"""A finished response leaves nothing of its own to the cyclic garbage collector.

The server collects cycles itself, rarely and while idle (``ops/gc_schedule.py``); a response kept
alive by a reference cycle held its prompt (100k tokens in an agent's 40th turn) until then, and every
young-generation collection walked it meanwhile (40-56 ms pauses with eight agent sessions). Run in a
process of its own: it reads the interpreter's garbage, which no other test may touch.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from support.paths import ROOT, TESTS

_PROBE = textwrap.dedent(
    """
    import gc, json, sys
    sys.path.insert(0, sys.argv[1])
    import httpx
    from websockets.sync.client import connect
    from support.server_harness import start_server
    from trtllm_responses.adapter import HarmonyAdapter
    from trtllm_responses.executors import EchoExecutor
    from trtllm_responses.harmony import load_encoding

    encoding = load_encoding()
    server = start_server(EchoExecutor(encoding), HarmonyAdapter(encoding))
    tools = [{"type": "function", "name": "shell",
              "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}}]
    call = {"model": "m", "input": 'call shell {"command":["ls"]}', "tools": tools}
    chat = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": True}

    def responses(client):
        client.post("/v1/responses", json={**call, "stream": True})
        client.post("/v1/responses", json={**call, "store": False})
        client.post("/v1/responses", json={"model": "m", "input": "Hi", "stream": True})
        client.post("/v1/chat/completions", json=chat)
        with connect(server.base_url.replace("http", "ws") + "/v1/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **call, "store": False}))
            while json.loads(socket.recv())["type"] != "response.completed":
                pass

    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        responses(client)  # first uses: caches, lazily built modules
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        responses(client)
        gc.collect()
        ours = {type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("trtllm_responses")}
        # A connection's HTTP protocol object (uvicorn's, ours a subclass) and its transport refer to each
        # other: one cycle per connection (the WebSocket's upgraded one here), none per response.
        ours.discard("GuardedHttpToolsProtocol")
        gc.set_debug(0)
    server.stop()
    print(json.dumps(sorted(ours)))
    """
)


def test_a_finished_response_is_freed_by_reference_counting() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(TESTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
