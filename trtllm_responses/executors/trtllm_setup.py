"""Setting TensorRT-LLM up, before any model loads: importing it, refusing what it cannot run (its
release, a backend it lacks, unknown arguments, frontends it cannot attach), and building a TensorRT engine.

Split from ``trtllm.py`` (the executor, re-exporting these); what each release offers is
``trtllm_releases.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .trtllm_releases import MIN_TRTLLM_VERSION, Release

__all__ = [
    "MIN_TRTLLM_VERSION",
    "MULTI_FRONTEND_SINCE",
    "TrtllmUnavailableError",
    "build_tensorrt_engine",
    "check_backend",
    "check_frontends",
    "check_llm_arguments",
    "check_trtllm_version",
    "import_tensorrt_llm",
]


class TrtllmUnavailableError(RuntimeError):
    """``tensorrt_llm`` cannot be imported here."""


def import_tensorrt_llm() -> Any:
    """Import ``tensorrt_llm`` or raise TrtllmUnavailableError saying what to do instead.

    A release older than :data:`MIN_TRTLLM_VERSION` is refused here, before any model loads.
    """
    try:
        module = importlib.import_module("tensorrt_llm")
    except Exception as exc:  # ImportError, or a CUDA/driver error raised while importing
        raise TrtllmUnavailableError(
            f"--engine trtllm needs TensorRT-LLM, which cannot be imported here ({type(exc).__name__}: {exc}). "
            "Install it on a GPU machine (`pip install trtllm-responses[trtllm]` or NVIDIA's container), "
            "or use `--engine echo`, which runs without it."
        ) from exc
    check_trtllm_version(str(getattr(module, "__version__", "")))
    return module


def build_tensorrt_engine(model: Path, sizes: Mapping[str, Any], out: Path) -> None:
    """Build the TensorRT engine of the checkpoint at ``model`` and save it into ``out`` (``build --backend tensorrt``).

    Through the LLM API as ``trtllm-build``'s successor does it: ``tensorrt_llm._tensorrt_engine.LLM``
    with a ``BuildConfig`` of ``sizes`` (``max_batch_size``, ``max_num_tokens``, ``max_seq_len``) and the
    parallel sizes, then ``LLM.save``. TrtllmUnavailableError when TensorRT-LLM cannot be imported.
    """
    try:
        version = str(getattr(importlib.import_module("tensorrt_llm"), "__version__", ""))
    except Exception as exc:
        raise TrtllmUnavailableError(
            f"building a TensorRT engine needs TensorRT-LLM and a GPU; it cannot be imported here ({exc})"
        ) from exc
    refusal = Release(version).tensorrt_backend_refusal
    if refusal is not None:
        raise TrtllmUnavailableError(refusal)
    try:
        trtllm_engine = importlib.import_module("tensorrt_llm._tensorrt_engine")
        llmapi = importlib.import_module("tensorrt_llm.llmapi")
    except Exception as exc:
        raise TrtllmUnavailableError(
            f"building a TensorRT engine needs TensorRT-LLM's TensorRT backend and a GPU; it cannot be imported "
            f"here ({exc})"
        ) from exc
    build_config = llmapi.BuildConfig(
        max_batch_size=sizes["max_batch_size"],
        max_num_tokens=sizes["max_num_tokens"],
        max_seq_len=sizes["max_seq_len"],
    )
    llm = trtllm_engine.LLM(
        model=str(model),
        build_config=build_config,
        tensor_parallel_size=sizes["tensor_parallel_size"],
        pipeline_parallel_size=sizes["pipeline_parallel_size"],
    )
    try:
        llm.save(str(out))
    finally:
        llm.shutdown()


def _release(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a TensorRT-LLM version string (``1.2.0rc5``, ``1.1.0+abc``), or None."""
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "x")
    except (IndexError, ValueError):
        return None


def check_trtllm_version(version: str) -> None:
    """Refuse a TensorRT-LLM release this server cannot drive, with a sentence saying what to install.

    From 1.1 on, TensorRT-LLM hands ``GuidedDecodingParams(structural_tag=...)`` to xgrammar's
    ``{"type": "structural_tag", "format": ...}`` reader (xgrammar 0.1.25, NVIDIA/TensorRT-LLM PR
    #7893); 1.0 (xgrammar 0.1.21) reads only the legacy ``structures``/``triggers`` form, which cannot
    express what the constraints need (sequences, alternatives, grammars between tags), so every
    constrained request would fail there.
    """
    release = _release(version)
    if release is None or release < MIN_TRTLLM_VERSION:
        wanted = ".".join(map(str, MIN_TRTLLM_VERSION))
        raise TrtllmUnavailableError(
            f"TensorRT-LLM {version or '(unknown version)'} is installed; trtllm-responses needs TensorRT-LLM "
            f"{wanted} or newer (structured outputs, required tool calls and custom-tool grammars are xgrammar "
            f"structural tags, read from {wanted} on). Install it with `pip install 'tensorrt_llm>={wanted}'` "
            f"(NVIDIA's index), or run in NVIDIA's release container nvcr.io/nvidia/tensorrt-llm/release:{wanted}.0 "
            "or newer (docs/serving-on-tensorrt-llm.md#tensorrt-llm-versions)."
        )


def check_backend(backend: str, version: str) -> None:
    """Refuse ``--backend tensorrt`` where the installed TensorRT-LLM has no TensorRT engine backend (ValueError
    saying why: ``Release.tensorrt_backend_refusal``), before anything loads."""
    if backend != "tensorrt":
        return
    refusal = Release(version).tensorrt_backend_refusal
    if refusal is not None:
        raise ValueError(refusal)


def check_llm_arguments(llm_kwargs: dict[str, Any], backend: str) -> None:
    """Refuse argument names TensorRT-LLM does not know (ValueError), without loading anything.

    The names are read from TensorRT-LLM's own argument models (``TorchLlmArgs``
    for the PyTorch backend, ``TrtLlmArgs`` for TensorRT engines).
    """
    llm_args = importlib.import_module("tensorrt_llm.llmapi.llm_args")
    args_class = llm_args.TrtLlmArgs if backend == "tensorrt" else llm_args.TorchLlmArgs
    known = set(args_class.model_fields)
    unknown = sorted(set(llm_kwargs) - known - {"backend"})
    if unknown:
        raise ValueError(
            f"TensorRT-LLM ({args_class.__name__}) has no argument(s) {', '.join(unknown)}; check the flags, the bundle's "
            "llm_api_options.yaml and --extra_llm_api_options"
        )


#: Where TensorRT-LLM's multi-frontend serving comes from (the LLM argument ``num_serve_frontends``).
MULTI_FRONTEND_SINCE = (
    "TensorRT-LLM's multi-frontend serving (LLM(num_serve_frontends=K), NVIDIA/TensorRT-LLM PR #16523, merged "
    "2026-07-17 on main after 1.2.1; not in the 1.1 to 1.2.1 releases)"
)


def check_frontends(frontends: int, backend: str) -> None:
    """Refuse ``--num_serve_frontends`` > 1 where the installed TensorRT-LLM cannot attach frontends to one
    engine (ValueError naming what is needed), before any model is loaded."""
    if frontends <= 1:
        return
    if backend == "tensorrt":
        raise ValueError(
            f"--num_serve_frontends {frontends} needs the PyTorch backend: {MULTI_FRONTEND_SINCE}"
        )
    llm_args = importlib.import_module("tensorrt_llm.llmapi.llm_args")
    if "num_serve_frontends" not in llm_args.TorchLlmArgs.model_fields:
        version = getattr(importlib.import_module("tensorrt_llm"), "__version__", "?")
        raise ValueError(
            f"--num_serve_frontends {frontends} needs {MULTI_FRONTEND_SINCE}; the installed TensorRT-LLM is "
            f"{version}. Run one frontend an engine, replicas behind a router (docs/stores-and-frontends.md#many-frontends-num_serve_frontends)."
        )
