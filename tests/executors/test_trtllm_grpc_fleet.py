"""A fleet over real processes (issue 43, "Done when"): fake TensorRT-LLM gRPC engines
(``tests/fake_trtllm/grpc_server.py``, each ``trtllm-serve MODEL --grpc`` as the fake plays it) and two ``serve
--engine_url`` frontends on one shared redis-server in front of the same engines, driven
as clients drive them: the openai SDK over HTTP and in WebSocket mode, httpx for raw SSE
(docs/a-fleet-of-engines.md#deploying-a-fleet).

``test_trtllm_grpc_fake_engine.py`` already covers one frontend's streamed turn with a cached prefix, the
function tool loop, structured outputs under the adversarial sampler, cancel and an HTTP client that leaves;
here is what needs the fleet: background responses, WebSocket turns and compaction across frontends, cancel
reaching the engine's abort within :data:`CANCEL_TO_ABORT_S`, a WebSocket client that leaves, and a 40-turn
session on one engine. What ran where is read from each engine's own log (``FAKE_TRTLLM_LOG``).

The processes are started once for the module (an engine, Redis and two ``serve`` processes: tens of seconds of
CPU on the 2-core machine); each test has responses and session keys of its own, and none stops a process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from support.process_harness import ServeProcess
from support.redis_harness import RedisServer, redis_binary
from support.server_harness import parse_sse, plain_event, until_terminal
from support.stream_grammar import check_stream
from support.trtllm_grpc_harness import GrpcEngine, grpc_engines
from websockets.sync.client import connect as ws_connect

from trtllm_responses.responses.sealing import SUMMARY_PREFIX

MODEL = "gpt-oss-fleet"
#: Engine processes the fleet starts; every frontend is given every engine (:func:`engine_flags`). One while
#: ``serve`` takes a single ``--engine_url``; 3 once it takes several (a pool of engines): nothing else changes.
ENGINES = 3
#: Issue 43's bound from a client's cancel (the moment before it sends ``POST /v1/responses/{id}/cancel``) to
#: the engine's abort record (its ``GenerationResult.abort``, wall clock, same host); the path itself takes a few
#: milliseconds (docs/a-fleet-of-engines.md#what-the-grpc-path-costs), the margin is for a loaded machine.
CANCEL_TO_ABORT_S = 0.050
#: Cancels timed per test (the least must be within the bound): 3 were all over it (73-101 ms) once, through
#: Redis, when this machine's host ran at 60% of its speed.
CANCELS = 5
#: Each engine step 2 ms: a ``#lorem 20000`` turn runs ~40 s unless cancelled, a short turn ~60 ms.
ENGINE_ENV = {"FAKE_TRTLLM_STEP_DELAY": "0.002"}


def engine_flags(engines: tuple[GrpcEngine, ...]) -> list[str]:
    """``--engine trtllm-grpc`` and ``--engine_url grpc://…`` for each engine (repeated for a pool)."""
    urls = [part for engine in engines for part in ("--engine_url", f"grpc://{engine.target}")]
    return ["--engine", "trtllm-grpc", *urls]


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[GrpcEngine, ...]]:
    started = [
        GrpcEngine(options={"guided_decoding_backend": "xgrammar"}, env=ENGINE_ENV) for _ in range(ENGINES)
    ]
    with grpc_engines(*started) as running:
        yield running


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    if redis_binary() is None:
        pytest.fail("redis-server is needed: run `make test` (it installs it with apt-get)")
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def frontends(
    engines: tuple[GrpcEngine, ...], redis: RedisServer
) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    """Two ``serve`` processes on the shared Redis, each in front of every engine; started side by side (each
    loads the vocabulary and connects to the engines)."""
    common = ("--store", redis.url, "--served_model_name", MODEL, *engine_flags(engines))
    a = ServeProcess(*common)
    b = ServeProcess(*common)
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda s: s.start(timeout=600), (a, b)))  # a loaded machine: minutes
        yield a, b
        for server in (a, b):
            assert server.terminate() == 0
            assert "Traceback" not in server.output(), server.output()
    finally:
        a.kill()
        b.kill()


def records(engine: GrpcEngine, event: str) -> list[dict[str, Any]]:
    """The engine's ``FAKE_TRTLLM_LOG`` records of one kind (``generate``, ``abort``, …), oldest first."""
    if not engine.fake_log.exists():
        return []
    lines = engine.fake_log.read_text().splitlines()
    return [r for r in map(json.loads, filter(None, lines)) if r.get("event") == event]


def counts(engines: tuple[GrpcEngine, ...], event: str) -> list[int]:
    return [len(records(engine, event)) for engine in engines]


def until(condition: Callable[[], Any], seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.005)
    return None


def sdk(server: ServeProcess, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=60, default_headers=headers
    )


def replay(server: ServeProcess, response_id: str) -> list[dict[str, Any]]:
    """``GET /v1/responses/{id}?stream=true``: the response's events from the start, as SSE."""
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        with http.stream("GET", f"/v1/responses/{response_id}", params={"stream": "true"}) as reply:
            assert reply.status_code == 200, reply.read()
            return parse_sse(reply.iter_lines())


def test_a_background_response_runs_on_the_engine_and_is_polled_and_replayed_through_the_other_frontend(
    frontends: tuple[ServeProcess, ServeProcess], engines: tuple[GrpcEngine, ...]
) -> None:
    a, b = frontends
    before = sum(counts(engines, "generate"))
    with sdk(a) as on_a, sdk(b) as on_b:
        started = on_a.responses.create(model=MODEL, input="#lorem 300", background=True)
        assert started.status in ("queued", "in_progress") and started.background
        done = until(lambda: (r := on_b.responses.retrieve(started.id)).status == "completed" and r)
        assert done, on_b.responses.retrieve(started.id)
        events = replay(b, started.id)
        final = check_stream(events)
        assert final["id"] == started.id and final["status"] == "completed"
        assert final["output"][-1]["content"][0]["text"] == done.output_text
        assert len(done.output_text.split()) == 300
        assert replay(a, started.id) == events  # the same events, from the process that ran it
    assert sum(counts(engines, "generate")) == before + 1


def cancel_to_abort(on: openai.OpenAI, canceller: openai.OpenAI, engines: tuple[GrpcEngine, ...]) -> float:
    """Start a long background response through ``on``, cancel it through ``canceller`` once the engine
    generates it; seconds from the cancel being sent to the engine's abort record."""
    aborts = counts(engines, "abort")
    started = on.responses.create(model=MODEL, input="#lorem 20000", background=True)
    assert until(lambda: canceller.responses.retrieve(started.id).status == "in_progress")
    time.sleep(0.2)  # the engine is generating
    asked = time.time()
    assert canceller.responses.cancel(started.id).status == "cancelled"
    assert until(lambda: counts(engines, "abort") != aborts)
    [abort] = [
        records(e, "abort")[n] for e, n in zip(engines, aborts, strict=True) if len(records(e, "abort")) > n
    ]
    assert on.responses.retrieve(started.id).status == "cancelled"
    return float(abort["at"]) - asked


@pytest.mark.parametrize("cancelled_on", ["the frontend running it", "the other frontend"])
def test_cancel_reaches_the_engines_abort_within_the_bound(
    frontends: tuple[ServeProcess, ServeProcess], engines: tuple[GrpcEngine, ...], cancelled_on: str
) -> None:
    """The least of :data:`CANCELS` cancels is within :data:`CANCEL_TO_ABORT_S`: a delay in the path itself
    (a poll, a batch interval, an abort left to the next token) fails all of them; the scheduler of a loaded
    machine, one. From the other frontend the cancel crosses Redis (``trtllm:cancel``)."""
    a, b = frontends
    with sdk(a) as on_a, sdk(a if cancelled_on == "the frontend running it" else b) as canceller:
        took = [cancel_to_abort(on_a, canceller, engines) for _ in range(CANCELS)]
    assert min(took) < CANCEL_TO_ABORT_S, f"the engine aborted {[round(t * 1000, 1) for t in took]} ms after"


def test_websocket_turns_continue_across_frontends_on_the_engines_prefix(
    frontends: tuple[ServeProcess, ServeProcess],
) -> None:
    a, b = frontends
    with sdk(a) as on_a, sdk(b) as on_b:
        with on_a.responses.connect() as socket:
            socket.response.create(model=MODEL, input="First over a socket")
            first = check_stream(until_terminal(socket))
        with on_b.responses.connect() as socket:
            socket.response.create(
                model=MODEL, input="Second over a socket", previous_response_id=first["id"]
            )
            second = check_stream(until_terminal(socket))
            socket.response.create(model=MODEL, input="#prompt", previous_response_id=second["id"])
            shown = check_stream(until_terminal(socket))
    assert first["output"][-1]["content"][0]["text"] == "First over a socket"
    assert second["output"][-1]["content"][0]["text"] == "Second over a socket"
    assert second["usage"]["input_tokens_details"]["cached_tokens"] > 0  # the first turn's prefix, one engine
    prompt = shown["output"][-1]["content"][0]["text"]
    for text in ("First over a socket", "Second over a socket"):
        assert f"<|start|>user<|message|>{text}<|end|>" in prompt


def test_a_websocket_client_that_leaves_aborts_the_engines_request(
    frontends: tuple[ServeProcess, ServeProcess], engines: tuple[GrpcEngine, ...]
) -> None:
    _, b = frontends
    aborts = sum(counts(engines, "abort"))
    url = b.base_url.replace("http://", "ws://") + "/v1/responses"
    with ws_connect(url) as socket:
        socket.send(json.dumps({"type": "response.create", "model": MODEL, "input": "#lorem 20000"}))
        while json.loads(socket.recv(timeout=30))["type"] != "response.output_text.delta":
            pass
    # The socket closed mid-response: the frontend aborts the generation on the engine.
    assert until(lambda: sum(counts(engines, "abort")) > aborts)


def test_compaction_runs_on_the_engine_and_its_window_continues_on_the_other_frontend(
    frontends: tuple[ServeProcess, ServeProcess], engines: tuple[GrpcEngine, ...]
) -> None:
    a, b = frontends
    with sdk(a) as on_a, sdk(b) as on_b:
        first = on_a.responses.create(model=MODEL, input="Fix the parser in src/parse.py")
        second = on_b.responses.create(model=MODEL, previous_response_id=first.id, input="Also add tests")
        before = sum(counts(engines, "generate"))
        compacted = on_b.responses.compact(model=MODEL, previous_response_id=second.id)
        assert sum(counts(engines, "generate")) == before + 1  # the summarization ran on the engine
        assert [item.type for item in compacted.output] == ["message", "message", "compaction"]
        assert compacted.usage.output_tokens > 0
        window = [plain_event(item) for item in compacted.output]
        shown = on_a.responses.create(
            model=MODEL, store=False, input=[*window, {"role": "user", "content": "#prompt"}]
        )
        assert SUMMARY_PREFIX.strip() in shown.output_text  # sealed on b, opened on a
        # The server's own compaction path: a create whose prompt passes the threshold compacts first.
        body = {
            "model": MODEL,
            "previous_response_id": second.id,
            "input": "#prompt",
            "context_management": [{"type": "compaction", "compact_threshold": 50}],
            "stream": True,
        }
        with httpx.Client(base_url=a.base_url, timeout=60) as http:
            with http.stream("POST", "/v1/responses", json=body) as reply:
                final = check_stream(parse_sse(reply.iter_lines()))
    assert final["status"] == "completed" and final["output"][0]["type"] == "compaction"
    assert SUMMARY_PREFIX.strip() in final["output"][-1]["content"][0]["text"]


def test_a_40_turn_session_runs_on_one_engine_through_both_frontends(
    frontends: tuple[ServeProcess, ServeProcess], engines: tuple[GrpcEngine, ...]
) -> None:
    before = counts(engines, "generate")
    clients = [sdk(server, **{"x-session-id": "fleet-40"}) for server in frontends]
    previous: str | None = None
    cached: list[int] = []
    try:
        for n in range(40):
            response = clients[n % 2].responses.create(
                model=MODEL, input=f"Turn {n} of the session", previous_response_id=previous
            )
            assert response.status == "completed" and response.output_text == f"Turn {n} of the session"
            assert response.usage is not None
            cached.append(response.usage.input_tokens_details.cached_tokens)
            previous = response.id
    finally:
        for client in clients:
            client.close()
    ran = [after - was for after, was in zip(counts(engines, "generate"), before, strict=True)]
    assert sorted(ran)[-1] == 40 and sum(ran) == 40, f"the session's turns per engine: {ran}"
    # Each turn after the first reuses the prefix the previous ones left (both frontends render alike).
    assert all(c > 0 for c in cached[1:]), cached
    assert cached[-1] > cached[1] and cached == sorted(cached), cached
