"""`trtllm-responses serve CHECKPOINT --engine trtllm` end to end, with the fake LLM API importable as tensorrt_llm."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from support.checkpoints import make_checkpoint
from support.server_harness import stream_events
from support.stream_grammar import check_stream
from support.trtllm_harness import Served

from trtllm_responses.cli.build import build_bundle


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    ckpt = make_checkpoint(tmp_path)
    extra = tmp_path / "extra.yml"
    extra.write_text(
        yaml.safe_dump({"stream_interval": 2, "moe_config": {"backend": "TRITON"}, "max_seq_len": 32768})
    )
    server = Served(
        [
            str(ckpt),
            "--engine",
            "trtllm",
            "--tp_size",
            "2",
            "--kv_cache_free_gpu_memory_fraction",
            "0.75",
            "--extra_llm_api_options",
            str(extra),
        ],
        tmp_path / "trtllm.log",
        {"FAKE_TRTLLM_STEP_DELAY": "0.002"},
    )
    yield server
    out = server.stop()
    assert "Traceback" not in out, out


def test_llm_built_from_merged_flags_and_yaml(served: Served, tmp_path: Path) -> None:
    [init] = served.records("init")
    args = init["args"]
    assert args["model"] == str((tmp_path / "gpt-oss-tiny").resolve())
    assert args["tensor_parallel_size"] == 2 and args["stream_interval"] == 2 and args["max_seq_len"] == 32768
    assert args["moe_config"] == {"backend": "TRITON"}
    assert args["kv_cache_config"] == {"enable_block_reuse": True, "free_gpu_memory_fraction": 0.75}


def test_streamed_and_plain_responses(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        events = stream_events(client, {"input": "TensorRT-LLM, end to end", "tools": []})
        response = check_stream(events)
        assert response["output"][-1]["content"][0]["text"] == "TensorRT-LLM, end to end"
        lookup = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
        body = {
            "input": 'call lookup {"q": 1}',
            "tools": [lookup],
        }  # a call to an undeclared function is answered
        call = check_stream(stream_events(client, body))["output"][-1]
        assert call["type"] == "function_call" and call["arguments"] == '{"q": 1}'
        plain = client.post("/v1/responses", json={"input": "plain"}).json()
        assert plain["status"] == "completed" and plain["output"][-1]["content"][0]["text"] == "plain"
        assert client.get(f"/v1/responses/{plain['id']}").json() == plain
        too_long = client.post("/v1/responses", json={"input": "word " * 40000})
        assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"


def test_client_disconnect_aborts_the_tensorrt_llm_request(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        with client.stream(
            "POST", "/v1/responses", json={"input": "#lorem 20000", "stream": True}
        ) as response:
            lines = response.iter_lines()
            for _ in range(30):
                next(lines)
        deadline = time.monotonic() + 15
        while not served.records("abort") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(served.records("abort")) == 1
        assert check_stream(stream_events(client, {"input": "still serving"}))["status"] == "completed"


def test_serve_a_bundle_uses_its_options(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    bundle = build_bundle(ckpt, output_dir=tmp_path / "engines", profile="latency", gpu="blackwell").path
    server = Served([str(bundle)], tmp_path / "bundle.log")
    try:
        [init] = server.records("init")
        assert init["args"]["model"] == str(ckpt.resolve())
        assert init["args"]["moe_config"] == {"backend": "TRTLLM"} and init["args"]["max_batch_size"] == 64
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert check_stream(stream_events(client, {"input": "from a bundle"}))["status"] == "completed"
    finally:
        server.stop()
