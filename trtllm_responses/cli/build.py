"""``trtllm-responses build``: a gpt-oss checkpoint → a serving bundle ``engines/<name>/``.

A bundle holds ``manifest.json`` (the source checkpoint, sizes, profile, vocab hash, versions and a
fingerprint of all of it), ``llm_api_options.yaml`` (the profile's LLM arguments, after
TensorRT-LLM's published gpt-oss guides) and the Harmony vocab, so it serves offline. Building is
idempotent (a matching fingerprint and intact files redo nothing); gpt-oss is served by the PyTorch
backend only. docs/serving-on-tensorrt-llm.md#bundles-trtllm-responses-build.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core import sha256_file, write_atomically
from ..executors.trtllm import TrtllmUnavailableError, build_tensorrt_engine
from ..harmony import VOCAB_FILENAME, VOCAB_SHA256, ensure_vocab
from .checkpoint import CheckpointInfo, inspect_checkpoint

__all__ = ["BuildError", "BuildResult", "build_bundle", "profile_options", "PROFILES", "GPUS"]

PROFILES = ("latency", "throughput")
GPUS = ("hopper", "blackwell")
MANIFEST = "manifest.json"
OPTIONS = "llm_api_options.yaml"
ENGINE_DIR = "engine"


class BuildError(RuntimeError):
    """The bundle cannot be built; the message says why."""


@dataclass(frozen=True)
class BuildResult:
    path: Path
    changed: bool
    manifest: dict[str, Any]


def profile_options(
    profile: str, gpu: str, *, max_batch_size: int | None, max_num_tokens: int | None, tp_size: int
) -> dict[str, Any]:
    """LLM arguments of a serving profile, as TensorRT-LLM publishes gpt-oss's recipes.

    Blackwell follows the curated configs (``examples/configs/curated/gpt-oss-120b-latency.yaml`` and
    ``-throughput.yaml``): MoE backend TRTLLM, ``max_num_tokens`` 16384, ``stream_interval`` 20, padded
    CUDA graphs up to the batch size; latency batches 64 requests, throughput 720 with attention data
    parallelism (``attention_dp_config`` balanced) when there is more than one GPU. Block reuse is on and blocks
    at the default retention priority and above are the ones offloaded to host memory. Hopper takes the
    TRITON MoE backend (the gpt-oss guide's choice there: TRTLLM's kernels are Blackwell's). Both turn
    chunked prefill on, so any prompt the context window holds is served
    (docs/serving-on-tensorrt-llm.md#serving-gpt-oss-on-tensorrt-llm).
    The curated configs' ``num_postprocess_workers`` is left out: it serves trtllm-serve's own
    detokenizing, which this server does itself.
    """
    if profile not in PROFILES or gpu not in GPUS:
        raise BuildError(f"unknown profile {profile!r} / gpu {gpu!r}; profiles: {PROFILES}, gpus: {GPUS}")
    latency = profile == "latency"
    batch = max_batch_size or (64 if latency else 720)
    attention_dp = (not latency) and tp_size > 1
    options: dict[str, Any] = {
        "max_batch_size": batch,
        "max_num_tokens": max_num_tokens or 16384,
        "enable_attention_dp": attention_dp,
        "enable_chunked_prefill": True,
        "cuda_graph_config": {"enable_padding": True, "max_batch_size": batch},
        "moe_config": {"backend": "TRITON" if gpu == "hopper" else "TRTLLM"},
        "stream_interval": 20,
        # Offloaded to host memory (when serve --kv_host_cache_bytes gives some): blocks at the default retention
        # priority and above, never released ones (docs/sessions-and-kv-cache.md#host-offload).
        "kv_cache_config": {"enable_block_reuse": True, "secondary_offload_min_priority": 35},
    }
    if attention_dp:
        options["attention_dp_config"] = {
            "enable_balance": True,
            "batching_wait_iters": 50,
            "timeout_iters": 1,
        }
    return options


def _versions() -> dict[str, str | None]:
    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "trtllm_responses": version("trtllm-responses"),
        "openai_harmony": version("openai-harmony"),
        "tensorrt_llm": version("tensorrt_llm") or version("tensorrt-llm"),
    }


def _up_to_date(out: Path, fingerprint: str) -> dict[str, Any] | None:
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if manifest.get("fingerprint") != fingerprint:
        return None
    if sha256_file(out / VOCAB_FILENAME) != VOCAB_SHA256:
        return None
    if sha256_file(out / OPTIONS) != manifest.get("options_sha256"):
        return None
    if manifest.get("backend") == "tensorrt" and not (out / ENGINE_DIR).is_dir():
        return None
    return manifest


def _build_tensorrt_engine(
    info: CheckpointInfo, out: Path, sizes: dict[str, Any], progress: Callable[[str], None]
) -> None:
    progress(f"building the TensorRT engine of {info.path} through the LLM API (this takes a while)")
    staging = Path(tempfile.mkdtemp(dir=out, prefix=".engine-"))
    try:
        build_tensorrt_engine(info.path, sizes, staging)
        shutil.rmtree(out / ENGINE_DIR, ignore_errors=True)
        staging.rename(out / ENGINE_DIR)
    except TrtllmUnavailableError as exc:
        raise BuildError(str(exc)) from exc
    except Exception as exc:
        raise BuildError(f"TensorRT-LLM could not build the engine: {type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_bundle(
    checkpoint: str | Path,
    *,
    output_dir: str | Path = "engines",
    name: str | None = None,
    profile: str = "throughput",
    gpu: str = "blackwell",
    backend: str = "pytorch",
    max_seq_len: int | None = None,
    max_batch_size: int | None = None,
    max_num_tokens: int | None = None,
    tp_size: int = 1,
    pp_size: int = 1,
    ep_size: int | None = None,
    force: bool = False,
    progress: Callable[[str], None] = lambda message: None,
) -> BuildResult:
    """Build (or confirm up to date) the bundle of ``checkpoint``; raise CheckpointError or BuildError."""
    _check_sizes(backend, tp_size, pp_size, ep_size)
    info, backend = _read_checkpoint(checkpoint, backend, progress)
    sizes: dict[str, Any] = {
        "backend": backend,
        "max_seq_len": max_seq_len or info.max_position_embeddings or 131072,
        "tensor_parallel_size": tp_size,
        "pipeline_parallel_size": pp_size,
    }
    if ep_size is not None:
        sizes["moe_expert_parallel_size"] = ep_size
    options = _llm_options(sizes, profile, gpu, max_batch_size, max_num_tokens)
    options_yaml = yaml.safe_dump(options, sort_keys=True).encode()

    bundle_name = name or info.path.name
    out = Path(output_dir) / bundle_name
    inputs = _inputs(info, options, profile, gpu)
    fingerprint = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    if not force:
        current = _up_to_date(out, fingerprint)
        if current is not None:
            progress(f"[4/4] {out} is up to date: nothing to do")
            return BuildResult(out, False, current)

    out.mkdir(parents=True, exist_ok=True)
    progress(f"[2/4] writing {out / OPTIONS} ({profile} profile for {gpu})")
    write_atomically(out / OPTIONS, options_yaml)
    progress(f"[3/4] copying the Harmony vocab into {out}")
    vocab = ensure_vocab() / VOCAB_FILENAME
    if sha256_file(out / VOCAB_FILENAME) != VOCAB_SHA256:
        write_atomically(out / VOCAB_FILENAME, vocab.read_bytes())
    if backend == "tensorrt":
        _build_tensorrt_engine(info, out, options, progress)

    manifest = {
        "format": 1,
        "name": bundle_name,
        **_described(info),
        "backend": backend,
        "engine_dir": ENGINE_DIR if backend == "tensorrt" else None,
        "max_seq_len": options["max_seq_len"],
        "max_batch_size": options["max_batch_size"],
        "max_num_tokens": options["max_num_tokens"],
        "parallelism": {"tp_size": tp_size, "pp_size": pp_size, "ep_size": ep_size},
        "profile": profile,
        "gpu": gpu,
        "harmony_vocab_sha256": VOCAB_SHA256,
        "options_sha256": hashlib.sha256(options_yaml).hexdigest(),
        "versions": inputs["versions"],
        "fingerprint": fingerprint,
    }
    progress(f"[4/4] writing {out / MANIFEST}")
    write_atomically(out / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())
    return BuildResult(out, True, manifest)


def _llm_options(
    sizes: dict[str, Any], profile: str, gpu: str, max_batch_size: int | None, max_num_tokens: int | None
) -> dict[str, Any]:
    """The bundle's LLM arguments: ``sizes`` (backend, lengths, parallelism) and the batch limits, the
    profile's for ``gpu`` on the PyTorch backend (the given ones win), else the given ones or 64 and 8192."""
    if sizes["backend"] == "pytorch":
        batching = profile_options(
            profile,
            gpu,
            max_batch_size=max_batch_size,
            max_num_tokens=max_num_tokens,
            tp_size=sizes["tensor_parallel_size"],
        )
        return {**sizes, **batching}
    return {**sizes, "max_batch_size": max_batch_size or 64, "max_num_tokens": max_num_tokens or 8192}


def _inputs(info: CheckpointInfo, options: dict[str, Any], profile: str, gpu: str) -> dict[str, Any]:
    """Everything a bundle is built from (its fingerprint's input): the checkpoint, the LLM arguments, the
    profile, the Harmony vocab and the versions of the packages that serve it."""
    return {
        "source": {
            "config_sha256": info.config_sha256,
            "weights_sha256": info.weights_sha256,
            "path": str(info.path),
        },
        "options": options,
        "profile": profile,
        "gpu": gpu,
        "harmony_vocab_sha256": VOCAB_SHA256,
        "versions": _versions(),
    }


def _check_sizes(backend: str, tp_size: int, pp_size: int, ep_size: int | None) -> None:
    """Refuse (BuildError) a backend this builds no bundle for, and a parallelism that cannot be."""
    if backend not in ("pytorch", "tensorrt"):
        raise BuildError(f"backend must be 'pytorch' or 'tensorrt', got {backend!r}")
    for label, value in (("tp_size", tp_size), ("pp_size", pp_size), ("ep_size", ep_size or tp_size)):
        if value < 1:
            raise BuildError(f"{label} must be at least 1")
    if ep_size is not None and (ep_size > tp_size or tp_size % ep_size):
        raise BuildError(f"ep_size ({ep_size}) must divide tp_size ({tp_size})")


def _read_checkpoint(
    checkpoint: str | Path, backend: str, progress: Callable[[str], None]
) -> tuple[CheckpointInfo, str]:
    """Step 1: the checkpoint, described to ``progress``, and the backend its bundle targets (gpt-oss: the
    PyTorch one, whatever was asked)."""
    progress(f"[1/4] checking checkpoint {checkpoint}")
    info = inspect_checkpoint(checkpoint, require_gpt_oss=backend == "pytorch")
    if backend == "tensorrt" and info.model_type == "gpt_oss":
        progress(
            "      --backend tensorrt: TensorRT-LLM has no TensorRT-engine definition for gpt-oss and serves it "
            "through its PyTorch backend only, so this bundle targets the PyTorch backend"
        )
        backend = "pytorch"
    progress(
        f"      {info.model_type}, {info.num_hidden_layers} layers"
        + (
            f", {info.num_local_experts} experts ({info.experts_per_token} per token)"
            if info.num_local_experts
            else ""
        )
        + f", {info.quantization}, {len(info.shards)} shard(s)"
    )
    return info, backend


def _described(info: CheckpointInfo) -> dict[str, Any]:
    """What a bundle's manifest says of its checkpoint: where it was, its hashes and shards, its model."""
    return {
        "source": {
            "path": str(info.path),
            "config_sha256": info.config_sha256,
            "weights_sha256": info.weights_sha256,
            "shards": list(info.shards),
        },
        "model_type": info.model_type,
        "num_hidden_layers": info.num_hidden_layers,
        "num_local_experts": info.num_local_experts,
        "experts_per_token": info.experts_per_token,
        "quantization": info.quantization,
    }
