"""Contract test against the real TensorRT-LLM, for users on GPU machines. Skipped where it cannot run.

Run it with a gpt-oss checkpoint (or bundle, or Hugging Face id):

    TRTLLM_RESPONSES_TEST_MODEL=/models/gpt-oss-20b pytest tests/test_trtllm_contract.py

It checks what only a real engine can: the model loads with our LLM arguments,
real gpt-oss output parses as Harmony and passes the stream grammar, a function
tool gets a real call, max_output_tokens ends in response.incomplete, abort
stops a running request, a continued conversation reports cached tokens, and a
forced built-in tool (``tool_choice: {"type": "code_interpreter"}``) is called even
for a question that needs no code (guided decoding's structural tag at work).
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import httpx
import pytest
from server_harness import start_server, stream_events
from stream_grammar import check_stream

MODEL = os.environ.get("TRTLLM_RESPONSES_TEST_MODEL")


def _gpu_visible() -> bool:
    return shutil.which("nvidia-smi") is not None or os.path.exists("/dev/nvidia0")


def _real_tensorrt_llm() -> bool:
    spec = importlib.util.find_spec("tensorrt_llm")
    return spec is not None and "fake_trtllm" not in str(spec.origin)


pytestmark = pytest.mark.skipif(
    not (MODEL and _real_tensorrt_llm() and _gpu_visible()),
    reason="needs TensorRT-LLM, a GPU and TRTLLM_RESPONSES_TEST_MODEL (a gpt-oss checkpoint, bundle or HF id)",
)


@pytest.fixture(scope="module")
def real_server(adapter):  # type: ignore[no-untyped-def]
    from trtllm_responses.executors.trtllm import TrtllmExecutor, check_llm_arguments
    from trtllm_responses.launch import resolve_launch

    plan = resolve_launch(
        MODEL or "",
        {"max_batch_size": 8, "max_num_tokens": 8192},
        os.environ.get("TRTLLM_RESPONSES_TEST_OPTIONS"),
    )
    check_llm_arguments(plan.llm_kwargs, plan.backend)
    from trtllm_responses.tools.settings import ToolSettings

    running = start_server(
        TrtllmExecutor(plan.llm_kwargs, end_id=adapter.encoding.return_, backend=plan.backend),
        adapter,
        tools=ToolSettings(python_tool="local"),
    )
    yield running
    running.stop()


def test_real_model_streams_valid_responses(real_server) -> None:  # type: ignore[no-untyped-def]
    weather = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
    with httpx.Client(base_url=real_server.base_url, timeout=600) as client:
        answer = check_stream(
            stream_events(client, {"input": "Say hello in five words.", "reasoning": {"effort": "low"}})
        )
        assert answer["status"] == "completed" and answer["output"][-1]["type"] == "message"
        call = check_stream(
            stream_events(
                client, {"input": "What is the weather in Paris? Use the tool.", "tools": [weather]}
            )
        )
        assert call["output"][-1]["type"] == "function_call" and call["output"][-1]["name"] == "get_weather"
        cut = check_stream(stream_events(client, {"input": "Count to one hundred.", "max_output_tokens": 16}))
        assert cut["status"] == "incomplete"
        follow = client.post(
            "/v1/responses", json={"input": "And in French?", "previous_response_id": answer["id"]}
        ).json()
        assert follow["usage"]["input_tokens_details"]["cached_tokens"] > 0


def test_real_model_obeys_a_forced_built_in_tool(real_server) -> None:  # type: ignore[no-untyped-def]
    body = {
        "input": "Say hello in five words.",
        "reasoning": {"effort": "low"},
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
        "tool_choice": {"type": "code_interpreter"},
        "include": ["code_interpreter_call.outputs"],
    }
    with httpx.Client(base_url=real_server.base_url, timeout=600) as client:
        forced = check_stream(stream_events(client, body))
    calls = [item for item in forced["output"] if item["type"] == "code_interpreter_call"]
    assert calls and calls[0]["code"], "the model must call python when tool_choice forces it"
    assert forced["status"] == "completed" and forced["output"][-1]["type"] == "message"
