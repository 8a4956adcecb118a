"""Offline checks of a gpt-oss checkpoint folder (no GPU, no network, no weights read).

``inspect_checkpoint`` reads ``config.json`` and the safetensors index (or the
single ``model.safetensors`` header) and refuses a checkpoint that cannot serve,
one clear message per fault:

- the folder or ``config.json`` is missing, or ``config.json`` is not a JSON object;
- ``model_type`` is not ``gpt_oss``;
- layer or expert counts are missing or inconsistent (``num_hidden_layers``,
  ``num_local_experts``, ``experts_per_token`` ≤ experts, the index's layers);
- weights are neither MXFP4 (``quantization_config.quant_method: mxfp4``) nor bf16;
- there are no safetensors weights, the index is broken, or a shard it names is missing.

Hashes cover ``config.json``, the index and the safetensors headers, so a
bundle can tell whether its checkpoint changed without reading 60 GB of weights.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CheckpointError", "CheckpointInfo", "inspect_checkpoint"]

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


class CheckpointError(ValueError):
    """The checkpoint cannot be served; the message names the fault."""


@dataclass(frozen=True)
class CheckpointInfo:
    """What the checks learned about a checkpoint."""

    path: Path
    model_type: str
    num_hidden_layers: int
    num_local_experts: int | None
    experts_per_token: int | None
    quantization: str  # "mxfp4" or "bf16" (gpt-oss); the config's dtype otherwise
    max_position_embeddings: int | None
    shards: tuple[str, ...]
    config_sha256: str
    weights_sha256: str  # of the index, or of the single file's safetensors header


def _positive_int(config: dict[str, Any], key: str, path: Path) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CheckpointError(f"{path}/config.json: {key} must be a positive integer, got {value!r}")
    return value


def _safetensors_header(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if length > 100_000_000:
                raise CheckpointError(f"{path} is not a safetensors file (header length {length})")
            header = f.read(length)
    except (OSError, struct.error) as exc:
        raise CheckpointError(f"{path} is not a readable safetensors file: {exc}") from exc
    try:
        json.loads(header)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} is not a safetensors file: its header is not JSON") from exc
    return header


def _weights(path: Path) -> tuple[tuple[str, ...], str, set[int]]:
    """Shard names, a hash of the weight layout, and the layer numbers the weights name."""
    index = path / INDEX_FILE
    if index.is_file():
        raw = index.read_bytes()
        try:
            weight_map = json.loads(raw)["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{index} is not a safetensors index (no weight_map)") from exc
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index} has an empty weight_map")
        shards = tuple(sorted(set(weight_map.values())))
        missing = [s for s in shards if not (path / s).is_file()]
        if missing:
            raise CheckpointError(
                f"{path}: the index names {len(shards)} shard(s) and {len(missing)} are missing: {', '.join(missing[:5])}"
            )
        names: Iterable[str] = weight_map.keys()
        digest = hashlib.sha256(raw).hexdigest()
    elif (path / SINGLE_FILE).is_file():
        header = _safetensors_header(path / SINGLE_FILE)
        shards = (SINGLE_FILE,)
        names = [k for k in json.loads(header) if k != "__metadata__"]
        digest = hashlib.sha256(header).hexdigest()
    else:
        raise CheckpointError(f"{path} has no safetensors weights ({INDEX_FILE} or {SINGLE_FILE})")
    layers = {int(m.group(1)) for name in names if (m := _LAYER.search(name))}
    return shards, digest, layers


def inspect_checkpoint(path: str | Path, *, require_gpt_oss: bool = True) -> CheckpointInfo:
    """Check a checkpoint folder offline; raise CheckpointError naming the first fault found."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path} is not a checkpoint folder (it does not exist or is not a directory)")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{path} has no config.json: not a Hugging Face checkpoint")
    raw = config_path.read_bytes()
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{config_path} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise CheckpointError(f"{config_path} must be a JSON object")
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise CheckpointError(f"{config_path} has no model_type")
    if require_gpt_oss and model_type != "gpt_oss":
        raise CheckpointError(
            f"{config_path}: model_type is {model_type!r}, not 'gpt_oss'; this server serves gpt-oss"
        )
    layers = _positive_int(config, "num_hidden_layers", path)
    experts = per_token = None
    quantization = str(config.get("torch_dtype") or config.get("dtype") or "unknown")
    if model_type == "gpt_oss":
        experts = _positive_int(config, "num_local_experts", path)
        per_token_key = "experts_per_token" if "experts_per_token" in config else "num_experts_per_tok"
        per_token = _positive_int(config, per_token_key, path)
        if per_token > experts:
            raise CheckpointError(
                f"{config_path}: {per_token_key} ({per_token}) exceeds num_local_experts ({experts})"
            )
        quant = config.get("quantization_config")
        if quant is not None:
            method = quant.get("quant_method") if isinstance(quant, dict) else None
            if method != "mxfp4":
                raise CheckpointError(
                    f"{config_path}: quantization {method!r} is not supported; gpt-oss weights must be MXFP4 or bf16"
                )
            quantization = "mxfp4"
        elif quantization in ("bfloat16", "bf16"):
            quantization = "bf16"
        else:
            raise CheckpointError(
                f"{config_path}: weights are {quantization!r} without quantization_config; gpt-oss weights must be "
                "MXFP4 (quantization_config.quant_method: mxfp4) or bf16 (torch_dtype: bfloat16)"
            )
    shards, weights_digest, weight_layers = _weights(path)
    if weight_layers and (max(weight_layers) + 1 != layers or len(weight_layers) != layers):
        raise CheckpointError(
            f"{path}: config.json says {layers} layers but the weights name {len(weight_layers)} "
            f"(layers {min(weight_layers)}..{max(weight_layers)})"
        )
    max_pos = config.get("max_position_embeddings")
    return CheckpointInfo(
        path=path.resolve(),
        model_type=model_type,
        num_hidden_layers=layers,
        num_local_experts=experts,
        experts_per_token=per_token,
        quantization=quantization,
        max_position_embeddings=max_pos if isinstance(max_pos, int) and max_pos > 0 else None,
        shards=shards,
        config_sha256=hashlib.sha256(raw).hexdigest(),
        weights_sha256=weights_digest,
    )
