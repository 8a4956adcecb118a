"""TensorRT-LLM as it really is, over the fake that copies it: sampling, long prompts, versions, curated configs,
errors, multi-token steps.

Each test names the defect of issue 18 it shows fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.checkpoints import make_checkpoint
from support.paths import DATA, FAKE_TRTLLM
from support.server_harness import ServerFactory, stream_events
from support.stream_grammar import check_stream
from support.trtllm_harness import executor_for

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.cli.command import build_parser
from trtllm_responses.cli.launch import resolve_launch
from trtllm_responses.cli.serve_options import server_config
from trtllm_responses.executors.trtllm import (
    TrtllmExecutor,
    TrtllmUnavailableError,
    check_llm_arguments,
    check_trtllm_version,
    import_tensorrt_llm,
)
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.responses.sampling import SamplingDefaults

CURATED = DATA / "trtllm"


def _received(executor: TrtllmExecutor) -> Any:
    return executor._llm.received[-1]


# -- 1. sampling stated and applied ------------------------------------------------------------


def test_omitted_sampling_is_openais_defaults_not_greedy(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        fake_trtllm, "__version__", "1.4.0rc1"
    )  # a sampler that applies seed, min_p, penalties
    executor = executor_for(encoding)
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            plain = client.post("/v1/responses", json={"input": "hello"}).json()
            params = _received(executor)
            assert (params.temperature, params.top_p) == (1.0, 1.0) and not params._greedy_decoding
            assert params.top_k is None and params.min_p is None and params.seed is None
            assert (plain["temperature"], plain["top_p"]) == (1.0, 1.0)
            assert (plain["presence_penalty"], plain["frequency_penalty"]) == (0.0, 0.0)
            tuned = {
                "input": "hello",
                "temperature": 0.3,
                "top_p": 0.8,
                "top_k": 20,
                "min_p": 0.05,
                "seed": 9,
                "frequency_penalty": 0.4,
                "presence_penalty": -0.2,
            }
            events = stream_events(client, tuned)
            echoed = check_stream(events)
            params = _received(executor)
            for name in (
                "temperature",
                "top_p",
                "top_k",
                "min_p",
                "seed",
                "frequency_penalty",
                "presence_penalty",
            ):
                assert getattr(params, name) == tuned[name], name
            created = events[0]["response"]
            for name in ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty"):
                assert created[name] == echoed[name] == tuned[name], name
            greedy = client.post("/v1/responses", json={"input": "hello", "temperature": 0}).json()
            assert greedy["temperature"] == 0 and _received(executor)._greedy_decoding
            bad = client.post("/v1/responses", json={"input": "x", "top_k": -1})
            assert bad.status_code == 400 and bad.json()["error"]["param"] == "top_k"
    finally:
        running.stop()


def test_operator_sampling_defaults_apply_and_are_echoed(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", "1.4.0rc1")  # a sampler that applies the penalties
    args = build_parser().parse_args(
        ["serve", "--temperature", "0.6", "--top_p", "0.95", "--top_k", "40", "--presence_penalty", "0.5"]
    )
    defaults = server_config(args).sampling
    assert defaults == SamplingDefaults(temperature=0.6, top_p=0.95, top_k=40, presence_penalty=0.5)
    executor = executor_for(encoding)
    running = serve(executor, sampling=defaults)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            body = client.post("/v1/responses", json={"input": "hello"}).json()
            params = _received(executor)
            assert (params.temperature, params.top_p, params.top_k, params.presence_penalty) == (
                0.6,
                0.95,
                40,
                0.5,
            )
            assert (body["temperature"], body["top_p"], body["top_k"], body["presence_penalty"]) == (
                0.6,
                0.95,
                40,
                0.5,
            )
            own = client.post("/v1/responses", json={"input": "hello", "temperature": 1.2}).json()
            assert own["temperature"] == 1.2 and _received(executor).temperature == 1.2
    finally:
        running.stop()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--top_p", "0"])


# -- 2. long prompts --------------------------------------------------------------------------


def test_prompt_over_max_num_tokens_without_chunked_prefill_is_a_400(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding, max_num_tokens=512, enable_chunked_prefill=False)
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            for stream in (False, True):
                answer = client.post("/v1/responses", json={"input": "word " * 800, "stream": stream})
                assert answer.status_code == 400, answer.text
                error = answer.json()["error"]
                assert error["code"] == "context_length_exceeded" and "max_num_tokens" in error["message"]
            assert not executor._llm.received, "refused before generation"
            fits = client.post("/v1/responses", json={"input": "word " * 300}).json()
            assert fits["status"] == "completed"
    finally:
        running.stop()


def test_a_tool_turn_past_max_num_tokens_ends_incomplete_not_failed(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    """Inside the tool loop the prompt grows: a turn the engine would refuse ends the response incomplete."""
    from trtllm_responses.tools.settings import ToolSettings

    executor = executor_for(encoding, max_num_tokens=400, enable_chunked_prefill=False)
    running = serve(executor, tools=ToolSettings(python_tool="local"))
    body = {
        "input": "call python print('ab ' * 600)",
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
    }
    try:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            done = check_stream(stream_events(client, body))
            assert done["status"] == "incomplete", done.get("error")
            assert any(item["type"] == "code_interpreter_call" for item in done["output"])
            assert len(executor._llm.received) == 1, "the turn past max_num_tokens was never sent"
    finally:
        running.stop()


async def test_the_fake_refuses_like_check_arguments(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """BaseLLM._check_arguments raises RequestError from generate_async: what the 400 prevents."""
    from trtllm_responses.executors.base import ExecutorError, GenerationRequest, SamplingSettings

    executor = executor_for(encoding, max_num_tokens=64, enable_chunked_prefill=False)
    await executor.start()
    with pytest.raises(fake_trtllm.RequestError, match=r"should not exceed max_num_tokens \(64\)"):
        executor._llm.generate_async(list(range(65)), fake_trtllm.SamplingParams(), streaming=True)
    with pytest.raises(ExecutorError, match="RequestError"):
        async for _ in executor.generate(GenerationRequest("r", list(range(100)), SamplingSettings(8, (1,)))):
            pass


def test_chunked_prefill_serves_any_prompt_the_window_holds(
    tmp_path: Path, fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    plan = resolve_launch(str(make_checkpoint(tmp_path)), {"max_num_tokens": 512}, None)
    assert plan.llm_kwargs["enable_chunked_prefill"] is True
    executor = TrtllmExecutor(plan.llm_kwargs, end_id=encoding.return_)
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            long = check_stream(stream_events(client, {"input": "word " * 3000}))
            assert long["status"] == "completed" and long["usage"]["input_tokens"] > 3000
            assert executor._llm.args.enable_chunked_prefill and executor.max_prompt_tokens is None
    finally:
        running.stop()
    off = resolve_launch(str(make_checkpoint(tmp_path / "b")), {"enable_chunked_prefill": False}, None)
    assert off.llm_kwargs["enable_chunked_prefill"] is False
    assert TrtllmExecutor(off.llm_kwargs, end_id=1).max_prompt_tokens == 8192  # TensorRT-LLM's default


# -- 3. versions -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.1.0", "1.1.0rc5", "1.2.0", "1.2.1", "1.3.0rc1", "2.0.0+local"])
def test_supported_releases(version: str) -> None:
    check_trtllm_version(version)


@pytest.mark.parametrize("version", ["1.0.0", "1.0.0rc6", "0.21.0", "", "unknown"])
def test_older_releases_are_refused_with_what_to_install(version: str) -> None:
    with pytest.raises(
        TrtllmUnavailableError, match=r"needs TensorRT-LLM 1\.1 or newer.*pip install 'tensorrt_llm>=1\.1'"
    ):
        check_trtllm_version(version)


def test_serve_refuses_tensorrt_llm_1_0_at_start(
    tmp_path: Path, fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", "1.0.0")
    with pytest.raises(TrtllmUnavailableError, match="TensorRT-LLM 1.0.0 is installed"):
        import_tensorrt_llm()
    shim = tmp_path / "shim"
    (shim / "tensorrt_llm").mkdir(parents=True)
    (shim / "tensorrt_llm" / "__init__.py").write_text(
        f"import sys; sys.path.insert(0, {FAKE_TRTLLM!r}); del sys.modules['tensorrt_llm']\n"
        "import importlib; _real = importlib.import_module('tensorrt_llm'); _real.__version__ = '1.0.0'\n"
        "sys.modules[__name__] = _real\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trtllm_responses.cli",
            "serve",
            str(make_checkpoint(tmp_path)),
            "--engine",
            "trtllm",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(shim)},
    )
    assert done.returncode == 2
    assert "TensorRT-LLM 1.0.0 is installed; trtllm-responses needs TensorRT-LLM 1.1 or newer" in done.stderr


# -- 4/5. the argument model, curated configs --------------------------------------------------


@pytest.mark.parametrize("name", ["gpt-oss-120b-latency.yaml", "gpt-oss-120b-throughput.yaml"])
def test_tensorrt_llms_curated_configs_are_accepted_unchanged(
    tmp_path: Path, fake_trtllm: Any, encoding: HarmonyEncoding, name: str
) -> None:
    plan = resolve_launch(str(make_checkpoint(tmp_path)), {}, str(CURATED / name))
    check_llm_arguments(plan.llm_kwargs, plan.backend)
    kwargs = plan.llm_kwargs
    assert (
        kwargs["kv_cache_config"]["free_gpu_memory_fraction"] == 0.9
        and "kv_cache_free_gpu_memory_fraction" not in kwargs
    )
    assert "num_postprocess_workers" not in kwargs, "trtllm-serve's own postprocessing is not passed on"
    assert kwargs["stream_interval"] == 20 and kwargs["moe_config"] == {"backend": "TRTLLM"}
    llm = fake_trtllm.LLM(**kwargs)
    assert llm.args.stream_interval == 20 and llm.args.enable_chunked_prefill


def test_argument_names_of_tensorrt_llms_gpt_oss_configs(fake_trtllm: Any) -> None:
    check_llm_arguments(
        {
            "model": "m",
            "num_postprocess_workers": 4,
            "attention_dp_config": {"enable_balance": True, "batching_wait_iters": 50, "timeout_iters": 1},
            "scheduler_config": {"capacity_scheduler_policy": "GUARANTEED_NO_EVICT"},
            "speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3},
            "orchestrator_type": "ray",
            "moe_config": {"backend": "AUTO"},
        },
        "pytorch",
    )


# -- 4. errors, multi-token steps ---------------------------------------------------------------


def test_request_error_while_iterating_fails_the_response_cleanly(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    running = serve(executor_for(encoding))
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            failed = check_stream(stream_events(client, {"input": "#fail"}))
            assert failed["status"] == "failed" and "RequestError" in failed["error"]["message"]
    finally:
        running.stop()


@pytest.mark.parametrize("interval", [10, 20])
def test_multi_token_steps_make_correct_events(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, interval: int
) -> None:
    executor = executor_for(
        encoding, stream_interval=interval, speculative_config={"decoding_type": "Eagle3", "max_draft_len": 3}
    )
    running = serve(executor)
    text = " ".join(f"word{i}" for i in range(120))
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            events = stream_events(client, {"input": text})
            done = check_stream(events)
            assert done["output"][-1]["content"][0]["text"] == text
            deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
            assert "".join(deltas) == text and len(deltas) < len(encoding.encode(text)) / 5
            lookup = {
                "type": "function",
                "name": "lookup",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
            call = check_stream(
                stream_events(client, {"input": 'call lookup {"q": "' + "x" * 200 + '"}', "tools": [lookup]})
            )
            assert call["output"][-1]["type"] == "function_call"
            assert json.loads(call["output"][-1]["arguments"]) == {"q": "x" * 200}
    finally:
        running.stop()


async def test_cached_tokens_come_from_finished_requests_and_are_evicted(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    from support.trtllm_harness import collect, request

    executor = executor_for(encoding, kv_cache_config={"enable_block_reuse": True, "max_tokens": 2048})
    await executor.start()
    base = "word " * 200
    stream = executor.generate(request(adapter, base, request_id="a"))
    first = await stream.__anext__()
    assert first.cached_tokens == 0
    concurrent = await collect(executor, request(adapter, base + "more", request_id="b"))
    assert concurrent[-1].cached_tokens == 0, "blocks are stored when a request finishes, not at submit"
    await stream.aclose()
    again = await collect(executor, request(adapter, base + "again", request_id="c"))
    assert again[-1].cached_tokens and again[-1].cached_tokens % 32 == 0
    await collect(executor, request(adapter, "other " * 2500, request_id="d"))  # fills the 2048-token cache
    evicted = await collect(executor, request(adapter, base + "later", request_id="e"))
    shared = await collect(
        executor, request(adapter, "x", request_id="f")
    )  # what every prompt shares (header)
    assert evicted[-1].cached_tokens == shared[-1].cached_tokens < again[-1].cached_tokens
