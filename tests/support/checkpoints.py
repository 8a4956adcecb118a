"""Tiny synthetic checkpoint folders: config.json, a safetensors index and shards (headers only)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any


def safetensors_bytes(names: list[str]) -> bytes:
    """A minimal safetensors file declaring ``names`` as empty uint8 tensors."""
    header = {name: {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]} for name in names}
    header["__metadata__"] = {"format": "pt"}  # type: ignore[assignment]
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw


def make_checkpoint(
    root: Path,
    name: str = "gpt-oss-tiny",
    *,
    layers: int = 2,
    experts: int = 4,
    per_token: int = 2,
    quant: str | None = "mxfp4",
    dtype: str = "bfloat16",
    shards: int = 2,
    single_file: bool = False,
    model_type: str = "gpt_oss",
    config_overrides: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint folder shaped like openai/gpt-oss-* and return its path."""
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "architectures": ["GptOssForCausalLM"],
        "model_type": model_type,
        "num_hidden_layers": layers,
        "num_local_experts": experts,
        "experts_per_token": per_token,
        "hidden_size": 64,
        "max_position_embeddings": 131072,
        "torch_dtype": dtype,
    }
    if quant is not None:
        config["quantization_config"] = {
            "quant_method": quant,
            "modules_to_not_convert": ["model.layers.*.self_attn"],
        }
    config.update(config_overrides or {})
    (path / "config.json").write_text(json.dumps(config))
    names = ["model.embed_tokens.weight", "lm_head.weight"]
    for i in range(layers):
        names += [
            f"model.layers.{i}.self_attn.q_proj.weight",
            f"model.layers.{i}.mlp.experts.gate_up_proj_blocks",
        ]
    if single_file:
        (path / "model.safetensors").write_bytes(safetensors_bytes(names))
        return path
    shard_names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    weight_map = {n: shard_names[i % shards] for i, n in enumerate(names)}
    for shard in shard_names:
        (path / shard).write_bytes(safetensors_bytes([n for n, s in weight_map.items() if s == shard]))
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return path
