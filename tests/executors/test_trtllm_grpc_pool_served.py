"""``serve`` in front of a pool of fake TensorRT-LLM gRPC engines (``tests/fake_trtllm/grpc_server.py``, three
processes), driven as a client would: a session's 40 turns on one engine, an engine added to the file and
SIGHUP taking new sessions, an engine removed draining its turn, an engine SIGKILLed mid-session (the turn
in flight ends ``response.failed`` with ``server_error``, the next turn runs on another engine, nothing stored
is lost). Which engine ran what: each engine's ``FAKE_TRTLLM_LOG`` (a ``generate`` record per request).

The server is a group of :data:`FRONTENDS` frontends (``--num_serve_frontends``), each with a pool of its own:
the session's turns, each on a connection of its own (the kernel spreads them over the frontends), still
land on one engine (rendezvous hashing needs no shared state), and SIGHUP to the launcher reaches every
frontend's pool.

The tests run in order over one server and one set of engines (each leaves the pool as the next expects).
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.process_harness import ServeProcess
from support.trtllm_grpc_harness import GrpcEngine, grpc_engines
from test_trtllm_grpc_fake_engine import _until

from trtllm_responses.executors.trtllm_grpc.pool import rendezvous_order

MODEL = "gpt-oss-pool"
#: Frontends of the server (each holds its own pool of the engines).
FRONTENDS = 2
#: A request header that makes each request a connection of its own (spread over the frontends).
CLOSE = {"connection": "close"}


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[GrpcEngine, ...]]:
    made = [GrpcEngine(env={"FAKE_TRTLLM_STEP_DELAY": "0.002"}) for _ in range(3)]
    with grpc_engines(*made) as running:
        yield running


@pytest.fixture(scope="module")
def listed(engines: tuple[GrpcEngine, ...], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pool") / "engines.txt"
    path.write_text(f"# the pool\n{url(engines[0])}\n{url(engines[1])}\n")
    return path


@pytest.fixture(scope="module")
def served(listed: Path) -> Iterator[ServeProcess]:
    store = f"sqlite:///{listed.parent / 'responses.db'}"  # every frontend's
    server = ServeProcess(
        "--store",
        store,
        "--engine",
        "trtllm-grpc",
        "--engine_urls_file",
        str(listed),
        "--served_model_name",
        MODEL,
        "--num_serve_frontends",
        str(FRONTENDS),
        "--log_level",
        "info",
    ).start(timeout=600)  # three engines start beside it (minutes on a loaded machine)
    yield server
    assert server.terminate() == 0
    output = server.output()  # the one failure logged: the turn whose engine was killed mid-stream
    raised = set(re.findall(r"^([\w.]+(?:Error|Exception)):", output, re.M))
    assert raised <= {"grpc.aio._call.AioRpcError", "trtllm_responses.executors.base.ExecutorError"}, output[
        -4000:
    ]
    assert output.count("Executor failed on") <= 1, output[-4000:]


@pytest.fixture(scope="module")
def client(served: ServeProcess) -> Iterator[openai.OpenAI]:
    with served.sdk() as c:
        yield c


def url(engine: GrpcEngine) -> str:
    return f"grpc://{engine.target}"


def generated(engine: GrpcEngine) -> int:
    """Requests the engine was given (its fake's ``generate`` records)."""
    if not engine.fake_log.exists():
        return 0
    lines = engine.fake_log.read_text().splitlines()
    return sum(1 for line in lines if line.strip() and json.loads(line).get("event") == "generate")


def started_per_frontend(client: openai.OpenAI) -> dict[str, float]:
    """``trtllm_frontend_responses_total`` of each frontend of the group (its ``/metrics``)."""
    text = httpx.get(str(client.base_url).removesuffix("/v1/") + "/metrics").text
    found = re.findall(r'^trtllm_frontend_responses_total\{frontend="(\d+)"\} (\S+)$', text, re.M)
    return {frontend: float(value) for frontend, value in found}


def key_on(engine: GrpcEngine, pool: list[GrpcEngine]) -> str:
    """A session key whose rendezvous order over ``pool`` starts with ``engine``."""
    urls = [url(e) for e in pool]
    return next(f"s-{i}" for i in range(10_000) if rendezvous_order(f"s-{i}", urls)[0] == url(engine))


def reload(
    served: ServeProcess, listed: Path, pool: list[GrpcEngine], says: str, times: int = FRONTENDS
) -> None:
    """Write ``pool`` into the file, SIGHUP the server (its launcher), wait until its log says ``says`` ``times``
    more (once per frontend: each reloads its own pool)."""
    before = served.output().count(says)
    listed.write_text("".join(f"{url(e)}\n" for e in pool))
    assert served.process is not None
    served.process.send_signal(signal.SIGHUP)
    assert _until(lambda: served.output().count(says) >= before + times, 60), served.output()[-3000:]


def test_a_sessions_40_turns_run_on_one_engine(
    client: openai.OpenAI, engines: tuple[GrpcEngine, ...]
) -> None:
    before = [generated(e) for e in engines]
    previous: str | None = None
    for turn in range(
        40
    ):  # each turn a connection of its own: the frontends take turns, as the kernel spreads
        response = client.responses.create(
            model=MODEL, input=f"turn {turn}", previous_response_id=previous, extra_headers=CLOSE
        )
        assert response.status == "completed" and response.output_text == f"turn {turn}"
        previous = response.id
    grew = sorted(generated(e) - b for e, b in zip(engines, before, strict=True))
    assert grew == [0, 0, 40]
    served_by = started_per_frontend(client)
    assert len(served_by) == FRONTENDS and min(served_by.values()) > 0, served_by  # both frontends took turns
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens > 0


def test_an_engine_added_to_the_file_takes_new_sessions(
    client: openai.OpenAI, served: ServeProcess, listed: Path, engines: tuple[GrpcEngine, ...]
) -> None:
    a, b, c = engines
    reload(served, listed, [a, b, c], f"Engine {url(c)} is healthy: back in placement")
    before = [generated(e) for e in engines]
    for engine in engines:  # a session whose home is each engine, the new one among them, lands there
        key = key_on(engine, [a, b, c])
        response = client.responses.create(model=MODEL, input="hello", extra_headers={"x-session-id": key})
        assert response.status == "completed"
    assert [generated(e) - n for e, n in zip(engines, before, strict=True)] == [1, 1, 1]


def test_an_engine_removed_drains_its_turn_then_closes(
    served: ServeProcess, listed: Path, engines: tuple[GrpcEngine, ...]
) -> None:
    a, b, c = engines
    key = key_on(b, [a, b, c])
    body = {"model": MODEL, "input": "#lorem 400", "stream": True}
    events = []
    with httpx.Client(base_url=served.base_url, timeout=60) as http:
        with http.stream("POST", "/v1/responses", json=body, headers={"x-session-id": key}) as stream:
            lines = stream.iter_lines()
            for line in lines:
                if "response.output_text.delta" in line:
                    break
            # The frontend running the turn drains it; the other has nothing on b.
            reload(served, listed, [a, c], f"Engine {url(b)} removed: draining 1", times=1)
            events = [json.loads(line[6:])["type"] for line in lines if line.startswith("data: ")]
    assert events[-1] == "response.completed"
    assert _until(lambda: f"Engine {url(b)} drained: closed" in served.output(), 60)
    before = generated(b)
    with httpx.Client(base_url=served.base_url, timeout=60) as http:
        reply = http.post(
            "/v1/responses", json={"model": MODEL, "input": "again"}, headers={"x-session-id": key}
        )
    assert reply.json()["status"] == "completed" and generated(b) == before  # the session moved


def test_an_engine_killed_mid_session(
    client: openai.OpenAI, served: ServeProcess, engines: tuple[GrpcEngine, ...]
) -> None:
    a, _, c = engines  # the pool now: a and c
    key = key_on(c, [a, c])
    headers = {"x-session-id": key}
    first = client.responses.create(model=MODEL, input="the first turn", extra_headers=headers)
    second = client.responses.create(
        model=MODEL, input="the second turn", previous_response_id=first.id, extra_headers=headers
    )
    body = {"model": MODEL, "input": "#lorem 20000", "previous_response_id": second.id, "stream": True}
    events: list[dict[str, Any]] = []
    with httpx.Client(base_url=served.base_url, timeout=60) as http:
        with http.stream("POST", "/v1/responses", json=body, headers=headers) as stream:
            lines = stream.iter_lines()
            for line in lines:
                if "response.output_text.delta" in line:
                    break
            c.kill()  # the session's engine dies mid-stream
            events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert events[-1]["type"] == "response.failed"
    error = events[-1]["response"]["error"]
    assert error["code"] == "server_error" and "retry" in error["message"]
    before = generated(a)
    third = client.responses.create(
        model=MODEL, input="after the engine died", previous_response_id=second.id, extra_headers=headers
    )
    assert third.status == "completed" and third.output_text == "after the engine died"
    assert generated(a) == before + 1  # the next turn ran on the engine left
    for earlier, text in ((first, "the first turn"), (second, "the second turn")):
        stored = client.responses.retrieve(earlier.id)
        assert stored.status == "completed" and stored.output_text == text
    assert third.usage is not None and second.usage is not None
    assert third.usage.input_tokens > second.usage.input_tokens  # the history came from the store
    assert httpx.get(served.base_url + "/health").status_code == 200  # one engine is still healthy

    def out_of_placement() -> bool:  # as the frontend answering the scrape sees it (each its next check)
        metrics = httpx.get(served.base_url + "/metrics").text
        return (
            f'trtllm_engine_healthy{{engine="{url(c)}"}} 0.0' in metrics
            and f'trtllm_engine_healthy{{engine="{url(a)}"}} 1.0' in metrics
        )

    assert _until(out_of_placement, 30)
