"""``serve --engine_url grpc://… --grpc_protocol openengine`` in front of the fake TensorRT-LLM engine serving
OpenEngine (``tests/fake_trtllm/grpc_server.py --grpc-protocol openengine``, a process), driven with the openai
SDK as a client would: a streamed turn and the next reusing its prefix, the session key reaching the engine as
``extra["conversation_id"]``, a tool call, structured output under the adversarial sampler, logprobs, cancel
reaching the engine's ``Control.Abort`` before the stream is cancelled, a client that leaves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from support.process_harness import ServeProcess
from support.trtllm_grpc_harness import GrpcEngine
from test_trtllm_grpc_fake_engine import _until, leave_mid_stream, structured_outputs, tool_loop

MODEL = "gpt-oss-openengine"


@pytest.fixture(scope="module")
def engine() -> Iterator[GrpcEngine]:
    # 2 ms a step; under structural tags the sampler draws what the mask allows a third of the time.
    engine = GrpcEngine(
        options={"guided_decoding_backend": "xgrammar", "kv_cache_config": {"enable_block_reuse": True}},
        env={"FAKE_TRTLLM_STEP_DELAY": "0.002", "FAKE_TRTLLM_NOISE": "0.3"},
        protocol="openengine",
    ).start()
    yield engine
    engine.terminate()


@pytest.fixture(scope="module")
def served(engine: GrpcEngine) -> Iterator[ServeProcess]:
    server = ServeProcess(
        "--engine",
        "trtllm-grpc",
        "--engine_url",
        f"grpc://{engine.target}",
        "--grpc_protocol",
        "openengine",
        "--served_model_name",
        MODEL,
    ).start()
    yield server
    assert server.terminate() == 0
    assert "Traceback" not in server.output(), server.output()


@pytest.fixture
def client(served: ServeProcess) -> Iterator[openai.OpenAI]:
    with served.sdk() as c:
        yield c


def records(engine: GrpcEngine, event: str) -> list[dict[str, Any]]:
    """The ``event`` records of the fake engine's ``FAKE_TRTLLM_LOG``."""
    if not engine.fake_log.exists():
        return []
    records = [json.loads(line) for line in engine.fake_log.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("event") == event]


def test_a_streamed_turn_and_the_next_one_reuses_the_prefix(
    client: openai.OpenAI, engine: GrpcEngine
) -> None:
    before = len(records(engine, "generate"))
    headers = {"x-session-id": "oe-session-1"}
    with client.responses.stream(
        model=MODEL, input="Over OpenEngine, end to end", extra_headers=headers
    ) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert first.output_text == "Over OpenEngine, end to end"
    second = client.responses.create(
        model=MODEL, previous_response_id=first.id, input="And once more", extra_headers=headers
    )
    assert second.output_text == "And once more"
    assert second.usage is not None and second.usage.input_tokens_details.cached_tokens > 0
    generated = records(engine, "generate")[before:]
    # The session key is the engine's conversation id (ConversationParams), the same on both turns.
    [conversation] = {g["conversation_id"] for g in generated}
    assert conversation and len(generated) == 2
    assert generated[0]["sampling"]["detokenize"] is False


def test_a_function_tool_loop(client: openai.OpenAI) -> None:
    tool_loop(client, MODEL)


def test_structured_output_under_the_adversarial_sampler(client: openai.OpenAI) -> None:
    structured_outputs(client, MODEL, takes=2)


def test_logprobs_come_back_ranked(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=MODEL, input="Logprobs please", top_logprobs=2, include=["message.output_text.logprobs"]
    )
    [message] = [item for item in response.output if item.type == "message"]
    logprobs = message.content[0].logprobs  # type: ignore[union-attr]
    assert logprobs and all(len(lp.top_logprobs) == 2 for lp in logprobs)
    assert all(lp.top_logprobs[0].logprob >= lp.top_logprobs[1].logprob for lp in logprobs)


def test_cancel_reaches_the_engines_abort(client: openai.OpenAI, engine: GrpcEngine) -> None:
    before = len(records(engine, "abort_rpc"))
    response = client.responses.create(model=MODEL, input="#lorem 20000", background=True)
    assert _until(lambda: client.responses.retrieve(response.id).status == "in_progress")
    time.sleep(0.2)  # the engine is generating
    cancelled = client.responses.cancel(response.id)
    assert cancelled.status == "cancelled"
    assert _until(lambda: len(records(engine, "abort_rpc")) > before)
    # The Abort found the request running: it came before the stream was cancelled (which forgets it).
    assert records(engine, "abort_rpc")[-1]["status"] == "ABORT_STATUS_ABORTED"


def test_a_client_that_leaves_aborts_the_engines_request(served: ServeProcess, engine: GrpcEngine) -> None:
    before = len(records(engine, "abort_rpc"))
    leave_mid_stream(served, MODEL)
    assert _until(lambda: len(records(engine, "abort_rpc")) > before), engine.fake_log.read_text()[-3000:]
    assert records(engine, "abort_rpc")[-1]["status"] == "ABORT_STATUS_ABORTED"
