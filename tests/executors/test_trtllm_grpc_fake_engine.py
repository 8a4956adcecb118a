"""``serve --engine_url grpc://…`` in front of the fake TensorRT-LLM gRPC engine (``tests/fake_trtllm/grpc_server.py``,
a process serving ``trtllm.TrtllmService`` over the fake LLM: its echo plan, xgrammar under structural tags with
the adversarial sampler, its KV pool), driven with the openai SDK as a client would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.process_harness import ServeProcess
from support.trtllm_grpc_harness import GrpcEngine

LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Look a number up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}, "required": ["q"]},
}
MODEL = "gpt-oss-grpc"


@pytest.fixture(scope="module")
def engine() -> Iterator[GrpcEngine]:
    # Each step 2 ms (a #lorem turn runs for seconds); under structural tags the sampler draws what the mask
    # allows a third of the time. The engine takes structural tags only with xgrammar (as trtllm-serve does).
    engine = GrpcEngine(
        options={"guided_decoding_backend": "xgrammar"},
        env={"FAKE_TRTLLM_STEP_DELAY": "0.002", "FAKE_TRTLLM_NOISE": "0.3"},
    ).start()
    yield engine
    engine.terminate()


@pytest.fixture(scope="module")
def served(engine: GrpcEngine) -> Iterator[ServeProcess]:
    url = f"grpc://{engine.target}"
    server = ServeProcess(
        "--engine", "trtllm-grpc", "--engine_url", url, "--served_model_name", MODEL
    ).start()
    yield server
    assert server.terminate() == 0
    assert "Traceback" not in server.output(), server.output()
    # Its render workers forked with the channel open: grpcio's fork handlers are off (engine.import_stubs), so
    # no "Other threads are currently calling into gRPC, skipping fork() handlers" at each start.
    assert "fork() handlers" not in server.output(), server.output()


@pytest.fixture
def client(served: ServeProcess) -> Iterator[openai.OpenAI]:
    with served.sdk() as c:
        yield c


def _aborts(engine: GrpcEngine) -> list[dict[str, Any]]:
    if not engine.fake_log.exists():
        return []
    records = [json.loads(line) for line in engine.fake_log.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("event") == "abort"]


def test_a_streamed_turn_and_the_next_one_reuses_the_prefix(client: openai.OpenAI) -> None:
    with client.responses.stream(model=MODEL, input="Over the wire, end to end") as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert first.output_text == "Over the wire, end to end"
    second = client.responses.create(model=MODEL, previous_response_id=first.id, input="And once more")
    assert second.output_text == "And once more"
    assert second.usage is not None and second.usage.input_tokens_details.cached_tokens > 0


def test_a_function_tool_loop(client: openai.OpenAI) -> None:
    tool_loop(client, MODEL)


def tool_loop(client: openai.OpenAI, model: str) -> None:
    """A function call, its output, and the answer that reads it (every served gRPC test's)."""
    first = client.responses.create(model=model, input='call lookup {"q": 7}', tools=[LOOKUP])  # type: ignore[list-item]
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "lookup" and json.loads(call.arguments) == {"q": 7}
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "forty-nine"}
    second = client.responses.create(
        model=model,
        previous_response_id=first.id,
        input=[output],  # type: ignore[list-item]
        tools=[LOOKUP],  # type: ignore[list-item]
    )
    assert second.output_text == "lookup returned: forty-nine"


def test_structured_output_under_the_adversarial_sampler(client: openai.OpenAI) -> None:
    structured_outputs(client, MODEL, takes=3)


def structured_outputs(client: openai.OpenAI, model: str, takes: int) -> None:
    """``takes`` structured outputs of one schema, each completed and valid (every served gRPC test's)."""
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 12},
            "days": {"type": "integer", "minimum": 1},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    text = {"format": {"type": "json_schema", "name": "trip", "schema": schema, "strict": True}}
    for attempt in range(takes):
        response = client.responses.create(
            model=model, input=f"Plan a trip, take {attempt}", text=text, temperature=1.0
        )
        assert response.status == "completed", response
        value = json.loads(response.output_text)
        assert set(value) == {"city", "days"} and isinstance(value["days"], int) and value["days"] >= 1
        assert isinstance(value["city"], str) and len(value["city"]) <= 12


def test_cancel_reaches_the_engines_abort(client: openai.OpenAI, engine: GrpcEngine) -> None:
    before = len(_aborts(engine))
    response = client.responses.create(model=MODEL, input="#lorem 20000", background=True)
    assert _until(lambda: client.responses.retrieve(response.id).status == "in_progress")
    time.sleep(0.2)  # the engine is generating
    asked = time.monotonic()
    cancelled = client.responses.cancel(response.id)
    assert _until(lambda: len(_aborts(engine)) > before)
    took = time.monotonic() - asked
    assert cancelled.status == "cancelled"
    assert took < 2.0, f"the engine's abort was logged {took:.3f} s after the cancel was asked"


def test_a_client_that_leaves_aborts_the_engines_request(served: ServeProcess, engine: GrpcEngine) -> None:
    before = len(_aborts(engine))
    leave_mid_stream(served, MODEL)
    assert _until(lambda: len(_aborts(engine)) > before), engine.fake_log.read_text()[-3000:]


def leave_mid_stream(served: ServeProcess, model: str) -> None:
    """Stream a long turn and leave (close the connection) at its first text delta."""
    body = {"model": model, "input": "#lorem 20000", "stream": True}
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        with http.stream("POST", "/v1/responses", json=body) as stream:
            for line in stream.iter_lines():
                if "response.output_text.delta" in line:
                    break  # the client leaves mid-stream


def _until(condition: Any, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False
