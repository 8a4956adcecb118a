"""Issue 30, points 1, 2 and 6, each crossed on a real server over loopback.

1. A body's JSON shape is budgeted (``request/body.py``: MAX_JSON_VALUES, counted before parsing) on
   every route and over WebSocket; large bodies are parsed off the event loop, once (a queued WebSocket
   message is not parsed again when its turn comes); object-heavy compressed WebSocket traffic does not
   stall ``/health``.
2. ``item_reference`` expansion is measured before it is made: past ``--max_input_bytes`` a 400 naming
   the reference; within it, the expanded size (not the body's) sends the input to the render workers.
6. Prompt templates: a long ``prompt.id``/``version`` is a 400 (it was a 500); a variable used 51 times
   is measured before it is expanded, refused past ``--max_input_bytes``, rendered in the workers within it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.server_harness import RunningServer
from websockets.sync.client import connect as ws_connect

from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.request import body as body_module
from trtllm_responses.request import protocol
from trtllm_responses.request.body import INLINE_PARSE_VALUES, MAX_JSON_VALUES

#: What /health may wait under the attacks here (the server shares this process's GIL with its clients;
#: benchmarks/hostile_input.py measures it in a server of its own). Before: seconds.
HEALTH_BOUND_S = 0.5
#: 1.9 MB of ``[{},{},…]``: 633,000 objects in one message (issue 30's attack).
OBJECT_HEAVY = '{"type":"response.create","input":"hi","x":[' + ",".join(["{}"] * 633_000) + "]}"


def _prompts(folder: Path) -> str:
    """``folder`` holding prompt ``pmpt_many``: one message using the variable ``v`` 51 times."""
    (folder / "pmpt_many").mkdir()
    text = " ".join(["{{v}}"] * 51)
    (folder / "pmpt_many" / "1.json").write_text(json.dumps({"input": [{"role": "user", "content": text}]}))
    return str(folder)


@pytest.fixture(scope="module")
def server(serve, encoding, tmp_path_factory) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    running = serve(
        EchoExecutor(encoding, tokens_per_second=200), prompts=_prompts(tmp_path_factory.mktemp("p"))
    )
    yield running
    running.stop()


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def _worker_started(server: RunningServer) -> bool:
    return any(pid is not None for pid in server.app.state.service.render_pool.pids)


class HealthProbe:
    """Asks ``/health`` every 20 ms in a thread; ``worst`` is the longest answer it waited for."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=60) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                client.get("/health").raise_for_status()
                self.worst = max(self.worst, time.perf_counter() - started)
                time.sleep(0.02)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


# -- 1. JSON shape, parsing off the loop, once ------------------------------------------------------


def test_an_object_heavy_body_is_refused_by_its_shape_on_every_route(http: httpx.Client) -> None:
    objects = ",".join(["{}"] * (MAX_JSON_VALUES // 2 + 1))  # one value over, with its commas
    bodies = {
        "/v1/responses": '{"input":"hi","x":[%s]}',
        "/v1/responses/input_tokens": '{"input":"hi","x":[%s]}',
        "/v1/responses/compact": '{"model":"m","input":"hi","x":[%s]}',
        "/v1/chat/completions": '{"messages":[{"role":"user","content":"hi"}],"x":[%s]}',
        "/v1/messages": '{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"x":[%s]}',
        "/v1/conversations": '{"x":[%s]}',
    }
    for path, shape in bodies.items():
        answer = http.post(path, content=shape % objects, headers={"content-type": "application/json"})
        assert answer.status_code == 400, (path, answer.text)
        assert f"more than the {MAX_JSON_VALUES}" in answer.json()["error"]["message"], path
    # The same bytes in a string are one value: answered.
    same_bytes = http.post(
        "/v1/responses", json={"input": "hi", "x": "[" + objects + "]", "max_output_tokens": 5}
    )
    assert same_bytes.status_code == 200, same_bytes.text


def test_compressed_object_heavy_websocket_messages_do_not_stall_the_loop(server: RunningServer) -> None:
    """Issue 30's attack, scaled to a test: 1.9 MB of ``[{},…]`` a message, ~2 KB on the wire."""
    url = server.base_url.replace("http://", "ws://") + "/v1/responses"
    errors: list[str] = []

    def attacker() -> None:
        with ws_connect(url, compression="deflate", max_size=None, open_timeout=30) as ws:
            for _ in range(3):
                ws.send(OBJECT_HEAVY)
            for _ in range(3):
                errors.append(json.loads(ws.recv(timeout=60))["error"]["code"])

    with HealthProbe(server.base_url) as probe:
        attackers = [threading.Thread(target=attacker) for _ in range(4)]
        for thread in attackers:
            thread.start()
        for thread in attackers:
            thread.join(120)
    assert errors == ["too_many_json_values"] * 12
    assert probe.worst < HEALTH_BOUND_S, f"/health waited {probe.worst * 1000:.0f} ms"


def test_a_queued_websocket_message_is_parsed_once_off_the_loop(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[int] = []
    walked: list[int] = []
    real, walk = body_module.json_object, body_module.check_depth
    monkeypatch.setattr(body_module, "json_object", lambda raw: parsed.append(len(raw)) or real(raw))
    for module in (body_module, protocol):  # decode_body's walk, and parse_request's of an unchecked dict
        monkeypatch.setattr(module, "check_depth", lambda data: walked.append(len(data)) or walk(data))
    decoder = server.app.state.service.decoder
    offloaded = decoder.offloaded
    url = server.base_url.replace("http://", "ws://") + "/v1/responses"
    # Each is decoded in the decoder's thread (more values than a body parsed on the loop), and two such
    # messages fit the queue together (counted as held once parsed: their bytes and 64 bytes a value).
    pad = [0] * (INLINE_PARSE_VALUES + 1)
    with ws_connect(url, compression=None) as ws:
        for i in range(3):  # the first runs while the others wait on the lane
            ws.send(
                json.dumps({"type": "response.create", "input": f"#lorem {200 if i == 0 else 5}", "pad": pad})
            )
        done = 0
        while done < 3:
            event = json.loads(ws.recv(timeout=60))
            assert event["type"] != "error", event
            done += event["type"] == "response.completed"
    assert len(parsed) == 3  # once each: on arrival, not again when its turn came
    assert len(walked) == 3  # nor walked again by create
    assert decoder.offloaded - offloaded == 3


# -- 2. item_reference expansion ---------------------------------------------------------------------


def _stored_big_message(http: httpx.Client, size: int) -> tuple[str, str]:
    """A stored response whose input is one message of ``size`` characters: its id and the message's."""
    stored = http.post("/v1/responses", json={"input": "y" * size, "max_output_tokens": 1})
    assert stored.status_code == 200, stored.text
    response_id = stored.json()["id"]
    items = http.get(f"/v1/responses/{response_id}/input_items").json()["data"]
    return response_id, items[0]["id"]


def test_item_references_past_max_input_bytes_are_refused_before_expanding(
    server: RunningServer, http: httpx.Client
) -> None:
    response_id, message_id = _stored_big_message(http, 100_000)
    refs = [{"type": "item_reference", "id": message_id}] * 150  # 15 MB from a 7 KB body
    with HealthProbe(server.base_url) as probe:
        started = time.perf_counter()
        answer = http.post("/v1/responses", json={"previous_response_id": response_id, "input": refs})
        took = time.perf_counter() - started
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    limit = server.app.state.service.max_input_bytes
    crossing = limit // 100_000  # the first reference past the budget (each stands for ~100 KB)
    assert error["code"] == "context_length_exceeded"
    assert error["param"] in (f"input[{crossing}]", f"input[{crossing - 1}]"), error
    assert took < 1.0 and probe.worst < HEALTH_BOUND_S


def test_the_expanded_input_decides_where_it_is_rendered(serve, encoding) -> None:  # type: ignore[no-untyped-def]
    with serve(EchoExecutor(encoding)) as fresh, httpx.Client(base_url=fresh.base_url, timeout=60) as http:
        response_id, message_id = _stored_big_message(http, 8_000)  # rendered on the loop: under 16 KiB
        assert not _worker_started(fresh)
        refs = [{"type": "item_reference", "id": message_id}] * 3  # a 200-byte body, 24 KB expanded
        answer = http.post(
            "/v1/responses", json={"previous_response_id": response_id, "input": refs, "max_output_tokens": 1}
        )
        assert answer.status_code == 200, answer.text
        assert _worker_started(fresh)


# -- 6. prompt templates ------------------------------------------------------------------------------


def test_a_long_prompt_id_or_version_is_a_400(http: httpx.Client) -> None:
    for prompt, param in (
        ({"id": "p" * 300}, "prompt.id"),
        ({"id": "pmpt_many", "version": "9" * 300}, "prompt.version"),
    ):
        answer = http.post("/v1/responses", json={"prompt": prompt})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["param"] == param


def test_a_template_variable_used_51_times_is_measured_before_it_expands(
    server: RunningServer, http: httpx.Client
) -> None:
    value = "v" * 100_000  # 5.1 MB once expanded, past 2 MiB
    with HealthProbe(server.base_url) as probe:
        started = time.perf_counter()
        answer = http.post("/v1/responses", json={"prompt": {"id": "pmpt_many", "variables": {"v": value}}})
        took = time.perf_counter() - started
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("context_length_exceeded", "prompt.variables")
    assert "5100050 bytes" in error["message"]
    assert took < 1.0 and probe.worst < HEALTH_BOUND_S


def test_a_template_expanding_within_the_budget_is_rendered_in_the_workers(
    serve, encoding, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with serve(EchoExecutor(encoding), prompts=_prompts(tmp_path)) as fresh:
        with httpx.Client(base_url=fresh.base_url, timeout=60) as http:
            body: dict[str, Any] = {"prompt": {"id": "pmpt_many", "variables": {"v": "w" * 1000}}}
            answer = http.post("/v1/responses", json={**body, "max_output_tokens": 1})  # 51 KB expanded
            assert answer.status_code == 200, answer.text
            assert _worker_started(fresh)
