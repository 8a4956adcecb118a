"""``serve --grpc_protocol openengine --prefill_engine_url A --decode_engine_url B`` in front of two fake
TensorRT-LLM engines serving OpenEngine (``tests/fake_trtllm/grpc_server.py --grpc-protocol openengine``,
processes), driven with the openai SDK: a turn's context runs ``context_only`` on A and its generation on B from
A's ``KvSessionRef`` (each engine's ``FAKE_TRTLLM_LOG``: a ``generate`` record per leg, B's naming A's context
request), the session's next turn reuses A's prefix, a cancel during each leg reaches that leg's engine, a
decode engine that dies leaves a held context that is logged and counted in ``/metrics``, and the decode engines'
file (``--decode_engine_urls_file``, listing B) rewritten to list C, then SIGHUP: a new session's generation leg
runs on C.

The tests run in order over one server and its engines (the last but one kills B).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from support.process_harness import ServeProcess
from support.trtllm_grpc_harness import GrpcEngine, grpc_engines
from test_trtllm_grpc_fake_engine import _until, tool_loop
from test_trtllm_grpc_openengine_served import records

MODEL = "gpt-oss-disagg"
OPTIONS = {
    "guided_decoding_backend": "xgrammar",
    "kv_cache_config": {"enable_block_reuse": True},
    "cache_transceiver_config": {"backend": "UCX", "kv_transfer_timeout_ms": 30000},
}


@pytest.fixture(scope="module")
def started() -> Iterator[tuple[GrpcEngine, ...]]:
    # The prefill engine's steps are slow (0.3 s) so that a cancel can land in a context leg (one or two steps);
    # the decode engines' are 2 ms. C, the decode engine that joins on SIGHUP, starts beside them (in parallel).
    prefill = GrpcEngine(options=OPTIONS, env={"FAKE_TRTLLM_STEP_DELAY": "0.3"}, protocol="openengine")
    decode = GrpcEngine(options=OPTIONS, env={"FAKE_TRTLLM_STEP_DELAY": "0.002"}, protocol="openengine")
    joins = GrpcEngine(options=OPTIONS, env={"FAKE_TRTLLM_STEP_DELAY": "0.002"}, protocol="openengine")
    with grpc_engines(prefill, decode, joins) as running:
        yield running


@pytest.fixture(scope="module")
def engines(started: tuple[GrpcEngine, ...]) -> tuple[GrpcEngine, GrpcEngine]:
    """A (prefill) and B (decode), which serve starts with."""
    return started[0], started[1]


@pytest.fixture(scope="module")
def decode_file(engines: tuple[GrpcEngine, GrpcEngine], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("disagg") / "decode-engines.txt"
    path.write_text(f"# the decode engines\ngrpc://{engines[1].target}\n")
    return path


@pytest.fixture(scope="module")
def served(engines: tuple[GrpcEngine, GrpcEngine], decode_file: Path) -> Iterator[ServeProcess]:
    prefill, _ = engines
    server = ServeProcess(
        "--engine",
        "trtllm-grpc",
        "--grpc_protocol",
        "openengine",
        "--prefill_engine_url",
        f"grpc://{prefill.target}",
        "--decode_engine_urls_file",
        str(decode_file),
        "--served_model_name",
        MODEL,
        "--log_level",
        "info",
    ).start()
    yield server
    server.terminate()


@pytest.fixture
def client(served: ServeProcess) -> Iterator[openai.OpenAI]:
    with served.sdk() as c:
        yield c


def test_a_turn_runs_its_context_on_the_prefill_engine_and_its_generation_on_the_decode_engine(
    client: openai.OpenAI, engines: tuple[GrpcEngine, GrpcEngine], served: ServeProcess
) -> None:
    prefill, decode = engines
    assert "cannot free a context whose generation leg never runs" in served.output()  # warned at start
    with client.responses.stream(model=MODEL, input="Split this turn in two") as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert kinds[-1] == "response.completed" and first.output_text == "Split this turn in two"
    [context] = records(prefill, "generate")
    [generation] = records(decode, "generate")
    assert context["request_type"] == "context_only"
    # The decode engine continued the prefill engine's context: the KvSessionRef came back unchanged.
    assert generation["request_type"] == "generation_only"
    assert generation["ctx_request_id"] == context["request_id"]
    assert context["conversation_id"] == generation["conversation_id"] is not None
    # The session's next turn prefills on the same engine and reuses its prefix there.
    second = client.responses.create(model=MODEL, previous_response_id=first.id, input="And the next turn")
    assert second.output_text == "And the next turn"
    assert second.usage is not None and second.usage.input_tokens_details.cached_tokens > 0
    assert [r["request_type"] for r in records(prefill, "generate")] == ["context_only"] * 2
    assert [r["request_type"] for r in records(decode, "generate")] == ["generation_only"] * 2


def test_a_tool_loop_across_the_split(client: openai.OpenAI) -> None:
    tool_loop(client, MODEL)


def test_a_cancel_during_the_context_leg_aborts_it_on_the_prefill_engine(
    client: openai.OpenAI, engines: tuple[GrpcEngine, GrpcEngine]
) -> None:
    prefill, decode = engines
    contexts, generations = len(records(prefill, "generate")), len(records(decode, "generate"))
    aborts = len(records(prefill, "abort_rpc"))
    response = client.responses.create(model=MODEL, input="Cancel me while I prefill", background=True)
    assert _until(lambda: len(records(prefill, "generate")) > contexts)
    cancelled = client.responses.cancel(response.id)
    assert cancelled.status == "cancelled"
    assert _until(lambda: len(records(prefill, "abort_rpc")) > aborts)
    assert records(prefill, "abort_rpc")[-1]["status"] == "ABORT_STATUS_ABORTED"
    time.sleep(1.0)  # a generation leg would have started by now
    assert len(records(decode, "generate")) == generations


def test_a_cancel_during_the_generation_leg_aborts_it_on_the_decode_engine(
    client: openai.OpenAI, engines: tuple[GrpcEngine, GrpcEngine]
) -> None:
    _, decode = engines
    aborts = len(records(decode, "abort_rpc"))
    generations = len(records(decode, "generate"))
    response = client.responses.create(model=MODEL, input="#lorem 20000", background=True)
    assert _until(lambda: len(records(decode, "generate")) > generations)
    time.sleep(0.2)  # the decode engine is generating
    cancelled = client.responses.cancel(response.id)
    assert cancelled.status == "cancelled"
    assert _until(lambda: len(records(decode, "abort_rpc")) > aborts)
    assert records(decode, "abort_rpc")[-1]["status"] == "ABORT_STATUS_ABORTED"


def test_a_decode_engine_that_dies_leaves_a_held_context_logged_and_counted(
    client: openai.OpenAI, engines: tuple[GrpcEngine, GrpcEngine], served: ServeProcess
) -> None:
    _, decode = engines
    decode.kill()
    failed = client.responses.create(model=MODEL, input="No decode engine left")
    assert failed.status == "failed" and failed.error is not None
    assert "held on the prefill engine" in served.output() or "stays held" in served.output()
    metrics = httpx.get(served.base_url + "/metrics").text
    [held] = [line for line in metrics.splitlines() if line.startswith("trtllm_disagg_held_contexts_total")]
    assert float(held.rsplit(" ", 1)[1]) == 1.0


def test_the_decode_file_reread_on_sighup_sends_new_sessions_generation_to_the_engine_added(
    client: openai.OpenAI,
    engines: tuple[GrpcEngine, GrpcEngine],
    started: tuple[GrpcEngine, ...],
    decode_file: Path,
    served: ServeProcess,
) -> None:
    prefill, decode = engines
    joins = started[2]
    decode_file.write_text(f"# B is gone: C instead\ngrpc://{joins.target}\n")
    assert served.process is not None
    served.process.send_signal(signal.SIGHUP)
    assert _until(
        lambda: f"Engine grpc://{joins.target} is healthy: back in placement" in served.output(), 60
    )
    assert f"Engine grpc://{decode.target} removed: draining 0 generation(s)" in served.output()
    response = client.responses.create(model=MODEL, input="A new session after the reload")
    assert response.status == "completed" and response.output_text == "A new session after the reload"
    [generation] = records(joins, "generate")
    assert generation["request_type"] == "generation_only"
    assert generation["ctx_request_id"] == records(prefill, "generate")[-1]["request_id"]
