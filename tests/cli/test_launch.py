"""trtllm-serve-style launch: option merging (flags < bundle < file) and refusals before any GPU work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.checkpoints import make_checkpoint
from support.paths import FAKE_TRTLLM

from trtllm_responses.cli.build import build_bundle
from trtllm_responses.cli.launch import LaunchError, merge_options, resolve_launch

NO_FLAGS: dict[str, Any] = {}


def write_yaml(path: Path, data: Any) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_merge_is_deep_for_mappings() -> None:
    base = {"a": 1, "kv_cache_config": {"enable_block_reuse": True, "free_gpu_memory_fraction": 0.9}}
    merged = merge_options(base, {"kv_cache_config": {"dtype": "fp8"}, "a": 2})
    assert merged == {
        "a": 2,
        "kv_cache_config": {"enable_block_reuse": True, "free_gpu_memory_fraction": 0.9, "dtype": "fp8"},
    }
    assert base["kv_cache_config"] == {"enable_block_reuse": True, "free_gpu_memory_fraction": 0.9}


def test_flags_map_to_llm_arguments(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    flags = {
        "tp_size": 4,
        "ep_size": 2,
        "pp_size": 1,
        "max_batch_size": 32,
        "max_num_tokens": 4096,
        "max_seq_len": 8192,
        "kv_cache_free_gpu_memory_fraction": 0.8,
        "trust_remote_code": True,
        "tokenizer": "/tok",
        "backend": "pytorch",
    }
    plan = resolve_launch(str(ckpt), flags, None)
    assert plan.llm_kwargs == {
        "model": str(ckpt.resolve()),
        "tensor_parallel_size": 4,
        "moe_expert_parallel_size": 2,
        "pipeline_parallel_size": 1,
        "max_batch_size": 32,
        "max_num_tokens": 4096,
        "max_seq_len": 8192,
        "trust_remote_code": True,
        "tokenizer": "/tok",
        "backend": "pytorch",
        "kv_cache_config": {"enable_block_reuse": True, "free_gpu_memory_fraction": 0.8},
        # on unless turned off (docs/serving-on-tensorrt-llm.md#serving-gpt-oss-on-tensorrt-llm)
        "enable_chunked_prefill": True,
    }
    assert plan.model_type == "gpt_oss" and plan.sources["tensor_parallel_size"] == "flag"


def test_file_wins_over_bundle_over_flags(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    bundle = build_bundle(ckpt, output_dir=tmp_path / "engines", profile="latency", gpu="hopper").path
    extra = write_yaml(
        tmp_path / "extra.yml", {"stream_interval": 7, "kv_cache_config": {"enable_block_reuse": False}}
    )
    plan = resolve_launch(str(bundle), {"max_batch_size": 4, "max_num_tokens": 8, "tp_size": 1}, extra)
    kwargs = plan.llm_kwargs
    assert kwargs["model"] == str(ckpt.resolve()) and plan.bundle_dir == bundle.resolve()
    assert kwargs["max_batch_size"] == 64 and plan.sources["max_batch_size"] == "bundle"  # bundle over flag
    assert kwargs["moe_config"] == {"backend": "TRITON"}  # from the bundle's profile
    assert kwargs["stream_interval"] == 7 and plan.sources["stream_interval"] == "file"  # file over bundle
    assert kwargs["kv_cache_config"] == {
        "enable_block_reuse": False,  # file
        "free_gpu_memory_fraction": 0.9,  # flag (its default)
        "secondary_offload_min_priority": 35,  # the bundle's profile
    }


def test_hugging_face_ids_pass_through() -> None:
    plan = resolve_launch("openai/gpt-oss-20b", NO_FLAGS, None)
    assert plan.model == "openai/gpt-oss-20b" and plan.backend == "pytorch"


@pytest.mark.parametrize(
    "flags, file, message",
    [
        ({"backend": "tensorrt"}, None, "TensorRT-LLM has no TensorRT-engine definition"),
        ({"tp_size": 4, "ep_size": 3}, None, "must divide tensor parallelism"),
        ({"tp_size": 2, "ep_size": 4}, None, "must divide tensor parallelism"),
        (
            {"max_batch_size": 64, "max_num_tokens": 8},
            None,
            "max_num_tokens \\(8\\) is smaller than max_batch_size",
        ),
        ({}, {"kv_cache_config": {"free_gpu_memory_fraction": 1.5}}, "must be in \\(0, 1\\]"),
        ({}, {"tensor_parallel_size": 0}, "positive integer"),
        ({}, {"model": "some/other-model"}, "contradicts MODEL"),
        ({}, {"backend": "onnx"}, "backend must be"),
        ({}, ["not", "a", "mapping"], "must be a mapping"),
        ({}, "::: not yaml :::\n  - [", "not valid YAML"),
    ],
)
def test_contradictions_are_refused(tmp_path: Path, flags: dict[str, Any], file: Any, message: str) -> None:
    ckpt = make_checkpoint(tmp_path)
    extra = None
    if file is not None:
        extra = str(tmp_path / "extra.yml")
        Path(extra).write_text(file if isinstance(file, str) else yaml.safe_dump(file))
    with pytest.raises(LaunchError, match=message):
        resolve_launch(str(ckpt), flags, extra)


def test_missing_files_and_bad_models(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="cannot be read"):
        resolve_launch("openai/gpt-oss-20b", NO_FLAGS, str(tmp_path / "missing.yml"))
    with pytest.raises(LaunchError, match="has no config.json"):
        resolve_launch(str(tmp_path), NO_FLAGS, None)
    with pytest.raises(LaunchError, match="neither a folder"):
        resolve_launch(str(tmp_path / "nope" / "deeper"), NO_FLAGS, None)


def run_cli(*args: str, fake: bool = False, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    import os

    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if fake:
        env["PYTHONPATH"] = FAKE_TRTLLM
    return subprocess.run(
        [sys.executable, "-m", "trtllm_responses.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_engine_trtllm_without_tensorrt_llm_exits_clearly(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    result = run_cli("serve", str(ckpt), "--engine", "trtllm", "--port", "0")
    assert result.returncode == 2
    assert "cannot be imported" in result.stderr and "--engine echo" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_llm_arguments_fail_at_start(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    extra = write_yaml(tmp_path / "extra.yml", {"enable_warp_drive": True})
    result = run_cli("serve", str(ckpt), "--extra_llm_api_options", extra, "--port", "0", fake=True)
    assert (
        result.returncode == 2 and "enable_warp_drive" in result.stderr and "Traceback" not in result.stderr
    )


def test_trtllm_flags_with_the_echo_engine_are_refused() -> None:
    result = run_cli("serve", "--engine", "echo", "--tp_size", "2")
    assert result.returncode == 2 and "--tp_size only apply to --engine trtllm" in result.stderr
