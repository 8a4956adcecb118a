"""Contract test against the real TensorRT-LLM, for users on GPU machines. Skipped where it cannot run.

Run it with a gpt-oss checkpoint (or bundle, or Hugging Face id):

    TRTLLM_RESPONSES_TEST_MODEL=/models/gpt-oss-20b pytest tests/executors/test_trtllm_contract.py

It checks what only a real engine can: the model loads with our LLM arguments,
real gpt-oss output parses as Harmony and passes the stream grammar, a function
tool gets a real call, max_output_tokens ends in response.incomplete, abort
stops a running request, a continued conversation reports cached tokens, and a
forced built-in tool (``tool_choice: {"type": "code_interpreter"}``) is called even
for a question that needs no code (guided decoding's structural tag at work).

Below those, one test per behaviour tests/fake_trtllm/ copies (its README lists them): greedy when
sampling is unset, the argument model, the max_num_tokens check, asynchronous abort, logprobs, cached
tokens and tokens per step, the tokenizer-info convention for gpt-oss, guided JSON without control tokens, the
tracing arguments (``trace_headers``, ``otlp_traces_endpoint``) where the release table puts them.
Where one fails, the fake is wrong there.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import httpx
import pytest
from support.paths import DATA
from support.server_harness import stream_events
from support.stream_grammar import check_stream

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
def real_server(adapter, serve):  # type: ignore[no-untyped-def]
    from trtllm_responses.cli.launch import resolve_launch
    from trtllm_responses.executors.trtllm import TrtllmExecutor, check_llm_arguments

    plan = resolve_launch(
        MODEL or "",
        {"max_batch_size": 8, "max_num_tokens": 8192},
        os.environ.get("TRTLLM_RESPONSES_TEST_OPTIONS"),
    )
    check_llm_arguments(plan.llm_kwargs, plan.backend)
    from trtllm_responses.tools.settings import ToolSettings

    running = serve(
        TrtllmExecutor(plan.llm_kwargs, end_id=adapter.encoding.return_, backend=plan.backend),
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


# -- What tests/fake_trtllm/ copies, checked against the real TensorRT-LLM (one test per behaviour) ----


def _llm(real_server):  # type: ignore[no-untyped-def]
    return real_server.executor._llm


def _prompt(text: str) -> list[int]:
    from trtllm_responses.adapter import HarmonyAdapter
    from trtllm_responses.harmony import load_encoding
    from trtllm_responses.request.protocol import parse_request

    return HarmonyAdapter(load_encoding()).build_prompt(parse_request({"input": text})).token_ids


def _params(**kwargs):  # type: ignore[no-untyped-def]
    import tensorrt_llm

    from trtllm_responses.harmony import load_encoding

    encoding = load_encoding()
    stops = [encoding.return_, encoding.call]
    return tensorrt_llm.SamplingParams(
        end_id=encoding.return_, stop_token_ids=stops, detokenize=False, **kwargs
    )


def test_release_is_supported_and_unset_sampling_is_greedy() -> None:
    import tensorrt_llm

    from trtllm_responses.executors.trtllm import check_trtllm_version

    check_trtllm_version(tensorrt_llm.__version__)
    assert tensorrt_llm.SamplingParams()._greedy_decoding
    assert not tensorrt_llm.SamplingParams(temperature=1.0, top_p=1.0)._greedy_decoding


def test_tracing_arguments_are_where_the_release_table_says() -> None:
    """No GPU work, signatures only: ``generate_async(trace_headers=...)`` and the LLM argument
    ``otlp_traces_endpoint`` exist exactly where ``Release.otlp_traces_endpoint`` says (1.2.0 on, PR #5897), as the
    fake plays them (docs/tracing-and-dashboards.md#into-the-engine)."""
    import inspect

    import tensorrt_llm
    from tensorrt_llm.llmapi.llm_args import TorchLlmArgs

    from trtllm_responses.executors.trtllm_releases import Release

    traced = Release(str(tensorrt_llm.__version__)).otlp_traces_endpoint
    assert ("trace_headers" in inspect.signature(tensorrt_llm.LLM.generate_async).parameters) is traced
    assert ("otlp_traces_endpoint" in TorchLlmArgs.model_fields) is traced


def test_argument_model_takes_the_curated_gpt_oss_configs(tmp_path) -> None:  # type: ignore[no-untyped-def]

    from trtllm_responses.cli.launch import resolve_launch
    from trtllm_responses.executors.trtllm import check_llm_arguments

    for name in ("gpt-oss-120b-latency.yaml", "gpt-oss-120b-throughput.yaml"):
        plan = resolve_launch(MODEL or "", {}, str(DATA / "trtllm" / name))
        check_llm_arguments(plan.llm_kwargs, plan.backend)
    check_llm_arguments(
        {"model": "m", "num_postprocess_workers": 4, "orchestrator_type": "ray", "moe_config": {"backend": "AUTO"},
         "scheduler_config": {}, "attention_dp_config": {"enable_balance": True}},
        "pytorch",
    )  # fmt: skip


def test_max_num_tokens_check_raises_request_error(real_server) -> None:  # type: ignore[no-untyped-def]
    from tensorrt_llm.executor.utils import RequestError

    llm = _llm(real_server)
    chunked = llm.args.enable_chunked_prefill
    try:
        llm.args.enable_chunked_prefill = False  # _check_arguments only reads the arguments
        with pytest.raises(RequestError, match="should not exceed max_num_tokens"):
            llm._check_arguments(llm.args.max_num_tokens + 1, 0, _params(max_tokens=4), False)
    finally:
        llm.args.enable_chunked_prefill = chunked


async def test_abort_is_asynchronous_and_ends_cancelled(real_server) -> None:  # type: ignore[no-untyped-def]
    result = _llm(real_server).generate_async(
        _prompt("Count to one thousand."),
        _params(max_tokens=2000, temperature=1.0, top_p=1.0),
        streaming=True,
    )
    steps = 0
    async for _output in result:
        steps += 1
        if steps == 2:
            result.abort()
    assert result.outputs[0].finish_reason == "cancelled"


async def test_logprobs_shape_and_the_stop_tokens_entry(real_server) -> None:  # type: ignore[no-untyped-def]
    result = _llm(real_server).generate_async(
        _prompt("Say hi."), _params(max_tokens=400, logprobs=2, temperature=1.0, top_p=1.0), streaming=True
    )
    async for _ in result:
        pass
    out = result.outputs[0]
    assert all(isinstance(entry, dict) and 1 <= len(entry) <= 3 for entry in out.logprobs)
    if out.finish_reason == "stop":
        assert len(out.logprobs) in (len(out.token_ids), len(out.token_ids) + 1)


async def test_cached_tokens_and_tokens_per_step(real_server) -> None:  # type: ignore[no-untyped-def]
    llm = _llm(real_server)
    prompt = _prompt("word " * 600)
    for _ in range(2):
        result = llm.generate_async(prompt, _params(max_tokens=8, temperature=1.0, top_p=1.0), streaming=True)
        sizes = []
        async for output in result:
            sizes.append(len(output.outputs[0].token_ids_diff))
    block = llm.args.kv_cache_config.tokens_per_block
    assert 0 < result.cached_tokens < len(prompt) and result.cached_tokens % block == 0
    assert all(size <= llm.args.stream_interval * 8 for size in sizes)


def test_tokenizer_info_convention_for_gpt_oss() -> None:
    """The fake's xgrammar vocabulary is what TensorRT-LLM derives from gpt-oss's tokenizer."""
    import sys

    from support.paths import FAKE_TRTLLM
    from tensorrt_llm.llmapi.tokenizer import TransformersTokenizer, _xgrammar_tokenizer_info

    from trtllm_responses.harmony import load_encoding

    info = _xgrammar_tokenizer_info(TransformersTokenizer.from_pretrained(MODEL))
    sys.path.insert(0, FAKE_TRTLLM)
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "fake_grammar_matcher", f"{FAKE_TRTLLM}/tensorrt_llm/_torch/pyexecutor/grammar_matcher.py"
        )
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:
        sys.path.remove(FAKE_TRTLLM)
    encoding = load_encoding()
    expected = module.gpt_oss_encoded_vocab(encoding)
    assert list(info["encoded_vocab"])[: len(expected)] == expected
    assert list(info["stop_token_ids"]) == [encoding.return_]


def test_guided_json_holds_no_control_token(real_server) -> None:  # type: ignore[no-untyped-def]
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    body = {"input": "Where is the Eiffel tower? Answer in JSON.", "reasoning": {"effort": "low"},
            "text": {"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}}}  # fmt: skip
    import json as _json

    with httpx.Client(base_url=real_server.base_url, timeout=600) as client:
        answer = check_stream(stream_events(client, body))
    assert answer["status"] == "completed"
    text = answer["output"][-1]["content"][0]["text"]
    assert "<|" not in text and set(_json.loads(text)) == {"city"}


def test_two_frontends_attach_to_one_engine_and_answer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`serve --num_serve_frontends 2 --engine trtllm` on the real TensorRT-LLM: where it has multi-frontend
    serving (PR #16523), the attached frontend attaches to the launcher's engine (one model in GPU memory)
    and both answer; elsewhere serve refuses at start, naming what is needed."""
    import subprocess
    import sys

    import httpx
    import tensorrt_llm.llmapi.llm_args as llm_args
    from support.process_harness import ServeProcess

    if "num_serve_frontends" not in llm_args.TorchLlmArgs.model_fields:
        command = [sys.executable, "-m", "trtllm_responses.cli", "serve", MODEL or "", "--engine", "trtllm"]
        command += ["--num_serve_frontends", "2", "--store", f"sqlite:///{tmp_path / 'c.db'}", "--port", "0"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert result.returncode == 2 and "PR #16523" in result.stderr
        return
    server = ServeProcess(MODEL or "", "--engine", "trtllm", "--num_serve_frontends", "2",
                          "--store", f"sqlite:///{tmp_path / 'c.db'}")  # fmt: skip
    server.flags = tuple(
        f for f in server.flags
    )  # ServeProcess adds --engine echo first; trtllm is last, wins
    server.start(timeout=1800)
    try:
        seen = set()
        for _ in range(60):
            with httpx.Client(base_url=server.base_url, timeout=120) as client:
                seen.add(client.get("/health").json()["frontend"])
                answer = client.post(
                    "/v1/responses", json={"model": "m", "input": "Say hi.", "max_output_tokens": 64}
                )
                assert answer.status_code == 200 and answer.json()["status"] in ("completed", "incomplete")
            if seen == {0, 1}:
                break
        assert seen == {0, 1}
    finally:
        server.terminate(timeout=300)
