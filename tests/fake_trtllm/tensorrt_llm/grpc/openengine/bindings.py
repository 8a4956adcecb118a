"""tensorrt_llm/grpc/openengine/bindings.py, faked: the generated modules of OpenEngine v0.1.0 and the schema's
identity (NVIDIA/TensorRT-LLM ``bindings.py`` at ``d4db566123160e38f7e74cd67a430205b3b8cc34``: the modules from
its private ``_generated/``, ``SCHEMA_REVISION``, ``MINIMUM_CLIENT_REVISION`` and ``SCHEMA_RELEASE`` from
``proto/manifest.json``).

The fake imports the stubs vendored in trtllm_responses (``trtllm_responses/executors/trtllm_grpc/openengine/``,
PIN.md there: the same ``openengine/v1/*.proto`` bytes TensorRT-LLM vendors, and its ``manifest.json``), so the
fake engine and the server's client speak one wire.
"""

import json
from pathlib import Path

from trtllm_responses.executors.trtllm_grpc import openengine as _vendored
from trtllm_responses.executors.trtllm_grpc.openengine import (
    error_pb2,
    generation_pb2,
    kv_pb2,
    lifecycle_pb2,
    lora_pb2,
    model_pb2,
    openengine_pb2_grpc,
    server_pb2,
)

_MANIFEST = json.loads((Path(_vendored.__file__).parent / "proto" / "manifest.json").read_text())
SCHEMA_REVISION: int = _MANIFEST["schema_revision"]
MINIMUM_CLIENT_REVISION: int = _MANIFEST["minimum_client_revision"]
SCHEMA_RELEASE: str = _MANIFEST["bsr"]["release"]

__all__ = [
    "MINIMUM_CLIENT_REVISION",
    "SCHEMA_RELEASE",
    "SCHEMA_REVISION",
    "error_pb2",
    "generation_pb2",
    "kv_pb2",
    "lifecycle_pb2",
    "lora_pb2",
    "model_pb2",
    "openengine_pb2_grpc",
    "server_pb2",
]
