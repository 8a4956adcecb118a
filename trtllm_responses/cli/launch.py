"""Launching TensorRT-LLM the way trtllm-serve does: flags, a bundle, a YAML file → LLM arguments.

``resolve_launch`` turns what the user gave into a :class:`LaunchPlan`, checking
everything that can be checked before a GPU is touched:

- MODEL is a bundle folder (``manifest.json``, from ``trtllm-responses build``),
  a checkpoint folder (checked offline: ``config.json``, weights), or a Hugging
  Face id (passed on to TensorRT-LLM);
- the LLM arguments are merged with precedence flags < bundle < ``--extra_llm_api_options``
  file; nested mappings (``kv_cache_config``, ``moe_config`` …) merge key by key;
- contradictions are refused: a ``model`` in the file that is not MODEL, ``--backend
  tensorrt`` for gpt-oss (TensorRT-LLM serves gpt-oss through its PyTorch backend
  only), an expert-parallel size that does not divide the tensor-parallel size,
  out-of-range sizes or memory fractions, a file that is not a YAML mapping.

Names follow TensorRT-LLM's ``TorchLlmArgs`` (``tensor_parallel_size`` for ``--tp_size`` …).
Unknown argument names are refused by TensorRT-LLM itself when the LLM is built
(its argument models forbid extra fields), before the model is loaded.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .checkpoint import CheckpointError, inspect_checkpoint

__all__ = ["LaunchError", "LaunchPlan", "resolve_launch", "merge_options", "FLAG_TO_ARG", "load_yaml_options"]

logger = logging.getLogger(__name__)

#: trtllm-serve flag (as the argparse dest) → TorchLlmArgs name.
FLAG_TO_ARG = {
    "tokenizer": "tokenizer",
    "backend": "backend",
    "max_batch_size": "max_batch_size",
    "max_num_tokens": "max_num_tokens",
    "max_seq_len": "max_seq_len",
    "tp_size": "tensor_parallel_size",
    "pp_size": "pipeline_parallel_size",
    "ep_size": "moe_expert_parallel_size",
    "trust_remote_code": "trust_remote_code",
}
DEFAULT_FREE_GPU_MEMORY_FRACTION = 0.9
#: ``kv_cache_config.secondary_offload_min_priority`` with a host cache: TensorRT-LLM's default retention priority
#: (35; its own default minimum is 30), so a normal block is offloaded and a released one (priority 0) is not.
OFFLOAD_MIN_PRIORITY = 35


class LaunchError(ValueError):
    """The launch options are wrong or contradict each other; the message says which and how to fix it."""


@dataclass(frozen=True)
class LaunchPlan:
    """What to start TensorRT-LLM with, and where each setting came from."""

    model: str
    backend: str
    llm_kwargs: dict[str, Any]
    bundle_dir: Path | None = None
    model_type: str | None = None
    sources: dict[str, str] = field(default_factory=dict)  # argument → "flag" | "bundle" | "file" | "default"


def merge_options(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``; nested mappings merge key by key, everything else is replaced."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_options(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_yaml_options(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file of LLM arguments; LaunchError unless it is a readable mapping."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise LaunchError(f"{what} {path} cannot be read: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LaunchError(f"{what} {path} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise LaunchError(f"{what} {path} must be a mapping of LLM argument names to values")
    return data


def _flag_options(flags: Mapping[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for flag, arg in FLAG_TO_ARG.items():
        value = flags.get(flag)
        if value is not None and value is not False:
            options[arg] = value
    # On unless turned off: without it a prompt longer than max_num_tokens is refused
    # (docs/serving-on-tensorrt-llm.md#serving-gpt-oss-on-tensorrt-llm).
    chunked = flags.get("enable_chunked_prefill")
    options["enable_chunked_prefill"] = True if chunked is None else bool(chunked)
    fraction = flags.get("kv_cache_free_gpu_memory_fraction")
    options["kv_cache_config"] = {
        "enable_block_reuse": True,
        "free_gpu_memory_fraction": DEFAULT_FREE_GPU_MEMORY_FRACTION if fraction is None else fraction,
    }
    host = flags.get("kv_host_cache_bytes")
    if host:
        # Evicted blocks go to host memory when their retention priority is at least the offload minimum: here
        # the default priority, so released blocks (0) never take host room (docs/sessions-and-kv-cache.md#host-offload).
        options["kv_cache_config"]["host_cache_size"] = host
        options["kv_cache_config"]["secondary_offload_min_priority"] = OFFLOAD_MIN_PRIORITY
    return options


#: trtllm-serve flag names TensorRT-LLM's curated configs write as YAML keys, and where they go.
SERVE_FLAG_KEYS = {"kv_cache_free_gpu_memory_fraction": ("kv_cache_config", "free_gpu_memory_fraction")}
#: LLM arguments for trtllm-serve's own OpenAI server that this server does not pass on, and why.
NOT_PASSED_ON = {
    "num_postprocess_workers": "TensorRT-LLM's postprocess workers detokenize for trtllm-serve's OpenAI server; "
    "this server reads tokens itself (and with them the engine's cached-token count would read 0)",
}


def normalize_options(options: dict[str, Any], what: str) -> dict[str, Any]:
    """A YAML layer as TorchLlmArgs names: trtllm-serve flag keys moved where the flag puts them, and
    arguments meant for trtllm-serve's own OpenAI server left out (logged). ``options`` is not changed."""
    out = dict(options)
    for key, (section, name) in SERVE_FLAG_KEYS.items():
        if key not in out:
            continue
        value = out.pop(key)
        nested = out.get(section) or {}
        if not isinstance(nested, Mapping):
            raise LaunchError(f"{what}: {section} must be a mapping")
        if name in nested and nested[name] != value:
            raise LaunchError(f"{what} sets both {key}: {value!r} and {section}.{name}: {nested[name]!r}")
        out[section] = {**nested, name: value}
    for key, why in NOT_PASSED_ON.items():
        if key in out:
            logger.warning("%s: %s=%r is not passed to TensorRT-LLM: %s", what, key, out.pop(key), why)
    return out


def _sources(flags: dict[str, Any], bundle: dict[str, Any], file: dict[str, Any]) -> dict[str, str]:
    sources: dict[str, str] = {}
    for name, layer in (("flag", flags), ("bundle", bundle), ("file", file)):
        for key in layer:
            sources[key] = name
    return sources


def _check(options: Mapping[str, Any], model_type: str | None, model: str) -> None:
    backend = options.get("backend", "pytorch")
    if backend not in ("pytorch", "tensorrt"):
        raise LaunchError(f"backend must be 'pytorch' or 'tensorrt', got {backend!r}")
    if backend == "tensorrt" and (model_type == "gpt_oss" or "gpt-oss" in model.lower()):
        raise LaunchError(
            "--backend tensorrt cannot serve gpt-oss: TensorRT-LLM has no TensorRT-engine definition for it and "
            "serves it through its PyTorch backend only. Use --backend pytorch (the default)."
        )
    for key in (
        "max_batch_size",
        "max_num_tokens",
        "max_seq_len",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "moe_expert_parallel_size",
        "stream_interval",
    ):
        value = options.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise LaunchError(f"{key} must be a positive integer, got {value!r}")
    tp = options.get("tensor_parallel_size", 1)
    ep = options.get("moe_expert_parallel_size")
    if ep is not None and (ep > tp or tp % ep):
        raise LaunchError(
            f"expert parallelism ({ep}) must divide tensor parallelism ({tp}): TensorRT-LLM splits the tensor-parallel "
            "GPUs into expert groups"
        )
    kv = options.get("kv_cache_config")
    if not isinstance(kv, Mapping):
        raise LaunchError("kv_cache_config must be a mapping")
    fraction = kv.get("free_gpu_memory_fraction")
    if fraction is not None and (
        isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1
    ):
        raise LaunchError(f"kv_cache_free_gpu_memory_fraction must be in (0, 1], got {fraction!r}")
    if options.get("enable_chunked_prefill") is False and backend == "pytorch":
        limit = options.get("max_num_tokens") or 8192  # TensorRT-LLM's default (BuildConfig.max_num_tokens)
        logger.warning(
            "Chunked prefill is off: prompts longer than max_num_tokens (%d) are refused with 400 "
            "context_length_exceeded (TensorRT-LLM takes a prompt in one step then).",
            limit,
        )
    batch, tokens = options.get("max_batch_size"), options.get("max_num_tokens")
    if isinstance(batch, int) and isinstance(tokens, int) and tokens < batch:
        raise LaunchError(
            f"max_num_tokens ({tokens}) is smaller than max_batch_size ({batch}): a full batch cannot be scheduled"
        )


def _read_bundle(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LaunchError(
            f"{path} has an unreadable manifest.json ({exc}); rebuild it with `trtllm-responses build`"
        ) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != 1 or "source" not in manifest:
        raise LaunchError(f"{path}/manifest.json is not a trtllm-responses bundle manifest; rebuild it")
    options = load_yaml_options(path / "llm_api_options.yaml", "The bundle's options file")
    return manifest, options


def resolve_launch(model: str, flags: Mapping[str, Any], extra_options_file: str | None) -> LaunchPlan:
    """Check and merge launch options for MODEL (see the module docstring). Raises LaunchError."""
    path = Path(model)
    bundle_dir: Path | None = None
    bundle_options: dict[str, Any] = {}
    model_type: str | None = None
    target = model
    if path.is_dir() and (path / "manifest.json").is_file():
        bundle_dir = path.resolve()
        manifest, bundle_options = _read_bundle(bundle_dir)
        model_type = manifest.get("model_type")
        if manifest.get("engine_dir"):
            target = str(bundle_dir / manifest["engine_dir"])
            if not Path(target).is_dir():
                raise LaunchError(
                    f"the bundle {path} has no {manifest['engine_dir']}/ engine folder; rebuild it"
                )
        else:
            target = str(manifest["source"]["path"])
            if not Path(target).is_dir():
                raise LaunchError(
                    f"the bundle {path} was built from {target}, which is not there any more; rebuild it"
                )
    elif path.is_dir():
        try:
            model_type = inspect_checkpoint(path).model_type
        except CheckpointError as exc:
            raise LaunchError(str(exc)) from exc
        target = str(path.resolve())
    elif path.exists() or model.startswith((".", "/")) or model.count("/") != 1:
        raise LaunchError(
            f"MODEL {model!r} is neither a folder (checkpoint or bundle) nor a Hugging Face id (org/name)"
        )

    flag_options = _flag_options(flags)
    file_options = (
        load_yaml_options(extra_options_file, "--extra_llm_api_options") if extra_options_file else {}
    )
    file_options = normalize_options(file_options, "--extra_llm_api_options")
    bundle_options = normalize_options(bundle_options, "The bundle's options")
    file_model = file_options.pop("model", None)
    if file_model is not None and file_model not in (model, target):
        raise LaunchError(
            f"--extra_llm_api_options sets model: {file_model!r}, which contradicts MODEL {model!r}"
        )
    for key, value in bundle_options.items():
        given = flags.get(next((f for f, a in FLAG_TO_ARG.items() if a == key), ""), None)
        if given not in (None, False) and given != value:
            logger.warning(
                "The bundle sets %s=%r over the flag's %r (precedence: flags < bundle < file)",
                key,
                value,
                given,
            )
    options = merge_options(merge_options(flag_options, bundle_options), file_options)
    options["model"] = target
    _check(options, model_type, model)
    backend = options.get("backend", "pytorch")
    return LaunchPlan(
        model=target,
        backend=backend,
        llm_kwargs=options,
        bundle_dir=bundle_dir,
        model_type=model_type,
        sources=_sources(flag_options, bundle_options, file_options),
    )
