"""`trtllm-responses build`: synthetic checkpoints in, bundles out; idempotent; every broken checkpoint refused."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.checkpoints import make_checkpoint
from support.paths import DATA, ROOT

from trtllm_responses.cli.build import build_bundle
from trtllm_responses.cli.checkpoint import CheckpointError, inspect_checkpoint
from trtllm_responses.harmony.encoding import VOCAB_SHA256


def test_build_writes_a_bundle(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path, layers=3, experts=8, per_token=4)
    messages: list[str] = []
    result = build_bundle(
        ckpt,
        output_dir=tmp_path / "engines",
        profile="throughput",
        gpu="blackwell",
        tp_size=2,
        ep_size=2,
        progress=messages.append,
    )
    out = result.path
    assert result.changed and out == tmp_path / "engines" / "gpt-oss-tiny"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["path"] == str(ckpt.resolve())
    assert (
        manifest["source"]["config_sha256"] == hashlib.sha256((ckpt / "config.json").read_bytes()).hexdigest()
    )
    assert (
        manifest["source"]["weights_sha256"]
        == hashlib.sha256((ckpt / "model.safetensors.index.json").read_bytes()).hexdigest()
    )
    assert (manifest["model_type"], manifest["quantization"], manifest["backend"]) == (
        "gpt_oss",
        "mxfp4",
        "pytorch",
    )
    assert (manifest["num_hidden_layers"], manifest["num_local_experts"], manifest["experts_per_token"]) == (
        3,
        8,
        4,
    )
    assert manifest["parallelism"] == {"tp_size": 2, "pp_size": 1, "ep_size": 2}
    assert (manifest["max_seq_len"], manifest["max_batch_size"], manifest["max_num_tokens"]) == (
        131072,
        720,
        16384,
    )
    assert manifest["harmony_vocab_sha256"] == VOCAB_SHA256 and manifest["versions"]["openai_harmony"]
    assert hashlib.sha256((out / "o200k_base.tiktoken").read_bytes()).hexdigest() == VOCAB_SHA256
    options = yaml.safe_load((out / "llm_api_options.yaml").read_text())
    # TensorRT-LLM's curated gpt-oss-120b-throughput.yaml (tests/data/trtllm/), less num_postprocess_workers.
    curated = yaml.safe_load((DATA / "trtllm" / "gpt-oss-120b-throughput.yaml").read_text())
    for key in (
        "max_batch_size",
        "max_num_tokens",
        "enable_attention_dp",
        "cuda_graph_config",
        "moe_config",
        "stream_interval",
        "attention_dp_config",
    ):
        assert options[key] == curated[key], key
    assert options["enable_chunked_prefill"] is True
    assert options["tensor_parallel_size"] == 2 and options["moe_expert_parallel_size"] == 2
    assert [m.split()[0] for m in messages if m.startswith("[")] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]


@pytest.mark.parametrize(
    "profile, gpu, moe, dp, interval",
    [
        ("latency", "blackwell", "TRTLLM", False, 20),
        ("latency", "hopper", "TRITON", False, 20),
        ("throughput", "hopper", "TRITON", False, 20),
    ],
)
def test_profiles(tmp_path: Path, profile: str, gpu: str, moe: str, dp: bool, interval: int) -> None:
    out = build_bundle(make_checkpoint(tmp_path), output_dir=tmp_path / "e", profile=profile, gpu=gpu).path
    options = yaml.safe_load((out / "llm_api_options.yaml").read_text())
    assert (
        options["moe_config"]["backend"] == moe
        and options["enable_attention_dp"] is dp
        and options["stream_interval"] == interval
    )


def test_rebuilding_the_same_inputs_is_a_no_op(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    first = build_bundle(ckpt, output_dir=tmp_path / "e")
    stamps = {p.name: p.stat().st_mtime_ns for p in first.path.iterdir()}
    messages: list[str] = []
    second = build_bundle(ckpt, output_dir=tmp_path / "e", progress=messages.append)
    assert not second.changed and "up to date" in messages[-1]
    assert {p.name: p.stat().st_mtime_ns for p in second.path.iterdir()} == stamps
    # A changed input, a damaged file, or --force rebuilds.
    assert build_bundle(ckpt, output_dir=tmp_path / "e", profile="latency").changed
    (first.path / "o200k_base.tiktoken").write_bytes(b"damaged")
    assert build_bundle(ckpt, output_dir=tmp_path / "e", profile="latency").changed
    assert hashlib.sha256((first.path / "o200k_base.tiktoken").read_bytes()).hexdigest() == VOCAB_SHA256
    assert build_bundle(ckpt, output_dir=tmp_path / "e", profile="latency", force=True).changed
    config = json.loads((ckpt / "config.json").read_text())
    config["rope_theta"] = 1
    (ckpt / "config.json").write_text(json.dumps(config))
    assert build_bundle(ckpt, output_dir=tmp_path / "e", profile="latency").changed


def _remove(name: str) -> Callable[[Path], None]:
    return lambda path: (path / name).unlink()


def _config(**changes: Any) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        config = json.loads((path / "config.json").read_text())
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        (path / "config.json").write_text(json.dumps(config))

    return apply


def _write(name: str, text: str) -> Callable[[Path], None]:
    return lambda path: (path / name).write_text(text)


BROKEN = [
    ("no config", _remove("config.json"), "has no config.json"),
    ("config not json", _write("config.json", "{oops"), "config.json is not valid JSON"),
    ("config not an object", _write("config.json", "[1]"), "must be a JSON object"),
    ("not gpt-oss", _config(model_type="llama"), "model_type is 'llama', not 'gpt_oss'"),
    ("no layer count", _config(num_hidden_layers=None), "num_hidden_layers must be a positive integer"),
    ("no expert count", _config(num_local_experts=0), "num_local_experts must be a positive integer"),
    ("too many experts per token", _config(experts_per_token=9), "exceeds num_local_experts"),
    (
        "unsupported quantization",
        _config(quantization_config={"quant_method": "gptq"}),
        "quantization 'gptq' is not supported",
    ),
    ("no index, no weights", _remove("model.safetensors.index.json"), "has no safetensors weights"),
    (
        "index without weight_map",
        _write("model.safetensors.index.json", '{"metadata": {}}'),
        "not a safetensors index",
    ),
    (
        "missing shard",
        _remove("model-00002-of-00002.safetensors"),
        "1 are missing: model-00002-of-00002.safetensors",
    ),
    (
        "layer count disagrees",
        _config(num_hidden_layers=5),
        "config.json says 5 layers but the weights name 2",
    ),
]


@pytest.mark.parametrize("fault, message", [(b[1], b[2]) for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_checkpoints_are_refused(tmp_path: Path, fault: Callable[[Path], None], message: str) -> None:
    ckpt = make_checkpoint(tmp_path)
    fault(ckpt)
    with pytest.raises(CheckpointError, match=message):
        build_bundle(ckpt, output_dir=tmp_path / "engines")
    assert not (tmp_path / "engines").exists(), "nothing is written for a refused checkpoint"


def test_unquantized_weights_must_be_bf16(tmp_path: Path) -> None:
    assert (
        inspect_checkpoint(make_checkpoint(tmp_path, "bf16", quant=None, single_file=True)).quantization
        == "bf16"
    )
    with pytest.raises(CheckpointError, match="must be MXFP4 .* or bf16"):
        inspect_checkpoint(make_checkpoint(tmp_path, "fp32", quant=None, dtype="float32"))
    (tmp_path / "truncated").mkdir()
    (tmp_path / "truncated" / "config.json").write_text((tmp_path / "bf16" / "config.json").read_text())
    (tmp_path / "truncated" / "model.safetensors").write_bytes(b"\x01")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        inspect_checkpoint(tmp_path / "truncated")


def test_backend_tensorrt_for_gpt_oss_targets_pytorch_and_says_why(tmp_path: Path) -> None:
    messages: list[str] = []
    result = build_bundle(
        make_checkpoint(tmp_path), output_dir=tmp_path / "e", backend="tensorrt", progress=messages.append
    )
    assert result.manifest["backend"] == "pytorch"
    assert any("no TensorRT-engine definition for gpt-oss" in m for m in messages)


def test_backend_tensorrt_builds_an_engine_for_other_architectures(tmp_path: Path, fake_trtllm: Any) -> None:
    ckpt = make_checkpoint(tmp_path, "tiny-llama", model_type="llama", quant=None)
    result = build_bundle(ckpt, output_dir=tmp_path / "e", backend="tensorrt", max_batch_size=8)
    assert result.manifest["backend"] == "tensorrt" and result.manifest["engine_dir"] == "engine"
    assert (result.path / "engine" / "rank0.engine").is_file()
    engine_config = json.loads((result.path / "engine" / "config.json").read_text())
    assert engine_config["build_config"]["max_batch_size"] == 8
    assert not build_bundle(ckpt, output_dir=tmp_path / "e", backend="tensorrt", max_batch_size=8).changed


def test_backend_tensorrt_without_tensorrt_llm_is_a_clear_error(tmp_path: Path) -> None:
    from trtllm_responses.cli.build import BuildError

    with pytest.raises(BuildError, match="needs TensorRT-LLM and a GPU"):
        build_bundle(
            make_checkpoint(tmp_path, "tiny-llama", model_type="llama", quant=None),
            output_dir=tmp_path / "e",
            backend="tensorrt",
        )


def test_build_help_states_the_gpu_default_and_what_hopper_needs() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "trtllm_responses.cli", "build", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    ).stdout
    options = shown[shown.index("options:") :]
    gpu = " ".join(options[options.index("--gpu {hopper,blackwell}") :].split("--backend")[0].split())
    assert "(default: blackwell;" in gpu and "on Hopper pass --gpu hopper" in gpu


def _build_args(entry: list[str], ckpt: Path, output_dir: Path) -> list[str]:
    return [
        sys.executable,
        *entry,
        str(ckpt),
        "--output_dir",
        str(output_dir),
        "--name",
        "tiny",
        "--profile",
        "latency",
    ]


def test_the_build_script_is_the_build_command(tmp_path: Path) -> None:
    """``scripts/build_engine.py`` builds as ``trtllm-responses build`` does (whose every case the next test runs)."""
    ckpt = make_checkpoint(tmp_path)
    args = _build_args(["scripts/build_engine.py"], ckpt, tmp_path / "engines")
    first = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(tmp_path / "engines" / "tiny") and "[4/4]" in first.stderr
    assert "--gpu not given, building for blackwell" in first.stderr


def test_build_commands(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path)
    root = ROOT
    args = _build_args(["-m", "trtllm_responses.cli", "build"], ckpt, tmp_path / "engines")
    first = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, check=False)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(tmp_path / "engines" / "tiny") and "[4/4]" in first.stderr
    # --gpu not given: the default (Blackwell's MoE kernels) is said, with what a Hopper user must pass.
    assert "--gpu not given, building for blackwell" in first.stderr and "pass --gpu hopper" in first.stderr
    hopper = subprocess.run(
        [*args[:-4], "--name", "hopper-tiny", "--gpu", "hopper"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
    )
    assert hopper.returncode == 0 and "--gpu not given" not in hopper.stderr, hopper.stderr
    assert json.loads((tmp_path / "engines" / "hopper-tiny" / "manifest.json").read_text())["gpu"] == "hopper"
    again = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, check=False)
    assert again.returncode == 0 and "up to date" in again.stderr
    (ckpt / "model-00001-of-00002.safetensors").unlink()
    broken = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, check=False)
    assert broken.returncode == 2 and "missing: model-00001-of-00002.safetensors" in broken.stderr
    assert "Traceback" not in broken.stderr
