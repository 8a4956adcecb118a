"""``serve --engine_url grpc://…`` as a client sees it: a real ``serve`` process in front of a gRPC engine,
driven with the openai SDK. The engine here is the scripted service of ``support/grpc_client_double.py`` (its
tokens are the model's, scripted per test; what the server sent it is recorded); the fake TensorRT-LLM gRPC
engine (tests/fake_trtllm/) drives the same tests with a model that samples.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.grpc_client_double import DoubleInThread, Script, ScriptedEngine, pb2
from support.process_harness import ServeProcess

from trtllm_responses.harmony import HarmonyEncoding

LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Look a number up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}, "required": ["q"]},
}


@pytest.fixture(scope="module")
def double() -> Iterator[DoubleInThread]:
    running = DoubleInThread(ScriptedEngine())
    yield running
    running.stop()


@pytest.fixture(scope="module")
def served(double: DoubleInThread) -> Iterator[ServeProcess]:
    server = ServeProcess(
        "--engine", "trtllm-grpc", "--engine_url", double.url, "--served_model_name", "gpt-oss-grpc"
    )
    server.start()
    yield server
    assert server.terminate() == 0
    assert "Traceback" not in server.output(), server.output()


@pytest.fixture
def engine(double: DoubleInThread) -> Iterator[ScriptedEngine]:
    engine = double.engine
    engine.requests.clear()
    engine.aborts.clear()
    engine.cancelled.clear()
    engine.scripts.clear()
    engine.script = Script()
    engine.health = "OK"
    yield engine


@pytest.fixture
def client(served: ServeProcess) -> Iterator[openai.OpenAI]:
    with served.sdk() as c:
        yield c


def _final(encoding: HarmonyEncoding, text: str, **kwargs: Any) -> Script:
    return Script.of(encoding.encode(f"<|channel|>final<|message|>{text}"), **kwargs)


def test_a_streamed_turn_reaches_the_engine_and_comes_back(
    client: openai.OpenAI, engine: ScriptedEngine, encoding: HarmonyEncoding
) -> None:
    engine.script = _final(encoding, "Hello from the engine.", cached_tokens=3)
    with client.responses.stream(model="gpt-oss-grpc", input="Say hello") as stream:
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert response.output_text == "Hello from the engine."
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens == 3
    [sent] = engine.requests
    prompt = list(sent.tokenized.input_token_ids)
    assert prompt[0] == encoding.start and "Say hello" in encoding.decode(prompt)
    assert list(sent.stop_token_ids) == list(encoding.assistant_action_stops) and sent.streaming


def test_a_function_tool_loop_runs_over_the_engine(
    client: openai.OpenAI, engine: ScriptedEngine, encoding: HarmonyEncoding
) -> None:
    call = '<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{"q": 7}'
    engine.scripts = [Script.of(encoding.encode(call)), _final(encoding, "It is 49.")]
    first = client.responses.create(model="gpt-oss-grpc", input="Look up 7", tools=[LOOKUP])  # type: ignore[list-item]
    [function_call] = [item for item in first.output if item.type == "function_call"]
    assert function_call.name == "lookup" and json.loads(function_call.arguments) == {"q": 7}
    output = {"type": "function_call_output", "call_id": function_call.call_id, "output": "forty-nine"}
    second = client.responses.create(
        model="gpt-oss-grpc",
        previous_response_id=first.id,
        input=[output],  # type: ignore[list-item]
        tools=[LOOKUP],  # type: ignore[list-item]
    )
    assert second.output_text == "It is 49."
    assert len(engine.requests) == 2
    assert "forty-nine" in encoding.decode(list(engine.requests[1].tokenized.input_token_ids))


def test_structured_output_goes_to_the_engine_as_a_structural_tag(
    client: openai.OpenAI, engine: ScriptedEngine, encoding: HarmonyEncoding
) -> None:
    engine.script = _final(encoding, '{"answer": 42}')
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    response = client.responses.create(
        model="gpt-oss-grpc",
        input="The answer?",
        text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}},
    )
    assert json.loads(response.output_text) == {"answer": 42}
    guided = engine.requests[0].guided_decoding
    assert guided.guide_type == pb2.GuidedDecodingParams.GUIDE_TYPE_STRUCTURAL_TAG
    assert json.loads(guided.guide)["type"] == "structural_tag" and "answer" in guided.guide


def test_cancel_reaches_the_engines_abort(
    client: openai.OpenAI, engine: ScriptedEngine, encoding: HarmonyEncoding
) -> None:
    engine.script = _final(encoding, "This will not be finished", hold=True)
    response = client.responses.create(model="gpt-oss-grpc", input="Take your time", background=True)
    assert _until(lambda: engine.requests and not engine.aborts)
    asked = time.monotonic()
    cancelled = client.responses.cancel(response.id)
    assert _until(lambda: engine.aborts)
    [(request_id, when)] = engine.aborts
    assert request_id == engine.requests[0].request_id
    assert when - asked < 0.5, f"Abort reached the engine {when - asked:.3f} s after the cancel was asked"
    assert cancelled.status == "cancelled"


def test_a_client_that_leaves_aborts_the_engines_request(
    served: ServeProcess, engine: ScriptedEngine, encoding: HarmonyEncoding
) -> None:
    engine.script = _final(encoding, "This stream loses its reader", hold=True)
    body = {"model": "gpt-oss-grpc", "input": "Stream to nobody", "stream": True}
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        with http.stream("POST", "/v1/responses", json=body) as stream:
            for line in stream.iter_lines():
                if "response.output_text.delta" in line:
                    break  # the client leaves mid-stream
    assert _until(lambda: engine.aborts)
    assert [rid for rid, _ in engine.aborts] == [engine.requests[0].request_id]


def test_health_follows_the_engines_health_check(served: ServeProcess, engine: ScriptedEngine) -> None:
    assert httpx.get(served.base_url + "/health").status_code == 200
    engine.health = "Executor is shutdown"
    assert _until(lambda: httpx.get(served.base_url + "/health").status_code == 503, seconds=15)
    engine.health = "OK"
    assert _until(lambda: httpx.get(served.base_url + "/health").status_code == 200, seconds=15)


def _until(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False
