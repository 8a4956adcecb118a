"""The vendored wires (trtllm_responses/executors/trtllm_grpc/: SMG's protocol; its openengine/: OpenEngine's):
the protos are the ones each PIN.md names, and the stubs beside them are protoc's output for exactly those
protos.

- Each ``proto/*.proto``'s sha256 is the one PIN.md records (an edited proto, or a PIN.md not updated with a
  new one, fails).
- Where grpcio-tools is installed: the file descriptor serialized in each ``*_pb2.py`` is the one protoc builds
  from the vendored ``.proto`` (stubs left stale after a proto changed fail), and, where its version is the one
  PIN.md records, ``scripts/grpc_stubs.py`` regenerates every stub byte for byte (a hand-edited stub fails).
- The stubs import under the ``grpc`` extra and name the services the engine serves; OpenEngine's register
  their descriptors under TensorRT-LLM's names (``openengine/v1/*.proto``, package ``openengine.v1``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.paths import PACKAGE, ROOT

WIRE = PACKAGE / "executors" / "trtllm_grpc"
# Each wire: its package folder and its protos, named as protoc names them (relative to the folder's proto/)
WIRES = {
    "smg": (WIRE, ("common.proto", "trtllm_service.proto")),
    "openengine": (
        WIRE / "openengine",
        tuple(
            f"openengine/v1/{name}.proto"
            for name in ("error", "generation", "kv", "lifecycle", "lora", "model", "openengine", "server")
        ),
    ),
}
PROTOS = [(wire, name) for wire, (_, names) in WIRES.items() for name in names]
# Vendored beside OpenEngine's protos, as TensorRT-LLM vendors them, and pinned with them
OPENENGINE_EXTRAS = ("manifest.json", "openengine/v1/README.md")


def _pin(wire: str = "smg") -> str:
    return (WIRES[wire][0] / "PIN.md").read_text()


def _pinned_sha256(name: str, wire: str = "smg") -> str:
    match = re.search(rf"`proto/{re.escape(name)}` sha256 \| `([0-9a-f]{{64}})`", _pin(wire))
    assert match is not None, f"{wire}'s PIN.md records no sha256 for proto/{name}"
    return match.group(1)


def _pinned_tools_version(wire: str = "smg") -> str:
    match = re.search(r"`grpcio-tools==([0-9.]+)`", _pin(wire))
    assert match is not None, f"{wire}'s PIN.md records no grpcio-tools version"
    return match.group(1)


def _grpc_tools_version() -> str | None:
    try:
        importlib.import_module("grpc_tools")
    except ImportError:
        return None
    return importlib.metadata.version("grpcio-tools")


@pytest.mark.parametrize(("wire", "name"), [*PROTOS, *(("openengine", name) for name in OPENENGINE_EXTRAS)])
def test_the_vendored_protos_are_the_pinned_ones(wire: str, name: str) -> None:
    digest = hashlib.sha256((WIRES[wire][0] / "proto" / name).read_bytes()).hexdigest()
    assert digest == _pinned_sha256(name, wire)


def test_every_vendored_file_is_pinned() -> None:
    folder = WIRES["openengine"][0] / "proto"
    vendored = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}
    assert vendored == {*WIRES["openengine"][1], *OPENENGINE_EXTRAS}


def test_the_makefiles_target_installs_the_pinned_grpcio_tools() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert _pinned_tools_version("openengine") == _pinned_tools_version("smg")
    assert f"GRPCIO_TOOLS_SPEC ?= grpcio-tools=={_pinned_tools_version()}" in makefile
    assert re.search(r"^grpc-stubs:.*\n(\t.*\n)*\t.*scripts/grpc_stubs\.py", makefile, flags=re.M)


def _without_json_names(messages: Any) -> None:
    """Clear ``json_name`` (protoc's python generator leaves it out of the descriptor it embeds)."""
    for message in messages:
        for field in [*message.field, *message.extension]:
            field.ClearField("json_name")
        _without_json_names(message.nested_type)


def _descriptor_set(tmp: Path, wire: str) -> dict[str, bytes]:
    """What protoc builds from a wire's vendored protos, as the descriptor a ``_pb2`` module embeds."""
    from google.protobuf import descriptor_pb2

    folder, names = WIRES[wire]
    out = tmp / "set.pb"
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{folder / 'proto'}",
        f"--descriptor_set_out={out}",
    ]
    subprocess.run([*command, *names], check=True, cwd=folder / "proto", timeout=120)
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    for file in files:
        _without_json_names(file.message_type)
    return {file.name: file.SerializeToString(deterministic=True) for file in files}


@pytest.mark.parametrize(("wire", "name"), PROTOS)
def test_each_stubs_descriptor_is_the_vendored_protos(wire: str, name: str, tmp_path: Path) -> None:
    if _grpc_tools_version() is None:
        pytest.skip("grpcio-tools is not installed (make grpc-stubs installs it)")
    from google.protobuf import descriptor_pb2

    package = "trtllm_responses.executors.trtllm_grpc" + (".openengine" if wire == "openengine" else "")
    module = importlib.import_module(f"{package}.{Path(name).name.removesuffix('.proto')}_pb2")
    in_stub = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert in_stub.name == name
    assert in_stub.SerializeToString(deterministic=True) == _descriptor_set(tmp_path, wire)[name]


@pytest.mark.parametrize("wire", WIRES)
def test_the_stubs_are_exactly_what_the_script_generates(wire: str, tmp_path: Path) -> None:
    version = _grpc_tools_version()
    if version is None:
        pytest.skip("grpcio-tools is not installed (make grpc-stubs installs it)")
    if version != _pinned_tools_version(wire):
        pytest.skip(
            f"grpcio-tools {version} is installed; the stubs were generated with {_pinned_tools_version(wire)}"
        )
    script = runpy.run_path(str(ROOT / "scripts" / "grpc_stubs.py"))
    written = script["generate"](tmp_path, wire)
    assert [path.name for path in written] == script["generated_names"](wire)
    folder = WIRES[wire][0]
    stubs = {path.name for path in folder.iterdir() if "_pb2" in path.name}
    assert stubs == {path.name for path in written}, (
        "a stub the script no longer writes is left in the package"
    )
    for path in written:
        assert path.read_bytes() == (folder / path.name).read_bytes(), path.name


def test_the_stubs_name_the_engines_service() -> None:
    pytest.importorskip("grpc")
    from trtllm_responses.executors.trtllm_grpc import trtllm_service_pb2, trtllm_service_pb2_grpc

    service = trtllm_service_pb2.DESCRIPTOR.services_by_name["TrtllmService"]
    assert service.full_name == "trtllm.TrtllmService"
    wanted = {"Generate", "Abort", "HealthCheck", "GetModelInfo", "GetServerInfo"}
    assert wanted <= set(service.methods_by_name)
    assert service.methods_by_name["Generate"].server_streaming
    assert hasattr(trtllm_service_pb2_grpc, "TrtllmServiceStub")
    kinds = trtllm_service_pb2.DisaggregatedParams.RequestType
    assert kinds.Value("REQUEST_TYPE_CONTEXT_ONLY") == 1 and kinds.Value("REQUEST_TYPE_GENERATION_ONLY") == 2


def test_the_openengine_stubs_are_tensorrt_llms_services() -> None:
    pytest.importorskip("grpc")
    from trtllm_responses.executors.trtllm_grpc.openengine import (
        generation_pb2,
        lifecycle_pb2,
        openengine_pb2,
        openengine_pb2_grpc,
    )

    assert openengine_pb2.DESCRIPTOR.name == "openengine/v1/openengine.proto"
    assert openengine_pb2.DESCRIPTOR.package == "openengine.v1"
    inference = openengine_pb2.DESCRIPTOR.services_by_name["Inference"]
    control = openengine_pb2.DESCRIPTOR.services_by_name["Control"]
    assert inference.full_name == "openengine.v1.Inference"
    assert inference.methods_by_name["Generate"].server_streaming
    wanted = {"GetServerInfo", "GetModelInfo", "GetLoad", "Health", "Abort", "LoadLora", "UnloadLora"}
    assert wanted | {"ListLoras", "GetKvEventSources", "SubscribeKvEvents"} == set(control.methods_by_name)
    assert hasattr(openengine_pb2_grpc, "InferenceStub") and hasattr(openengine_pb2_grpc, "ControlStub")
    events = generation_pb2.GenerateResponse.DESCRIPTOR.oneofs_by_name["event"]
    assert [field.name for field in events.fields] == [
        "prompt",
        "token",
        "prefill_ready",
        "finished",
        "error",
    ]
    assert lifecycle_pb2.AbortStatus.Value("ABORT_STATUS_ALREADY_FINISHED") == 2


def test_the_openengine_manifest_names_the_pinned_release() -> None:
    manifest = json.loads((WIRES["openengine"][0] / "proto" / "manifest.json").read_text())
    assert manifest["schema_revision"] == 1 and manifest["minimum_client_revision"] == 1
    assert f"release `{manifest['bsr']['release']}`" in _pin("openengine")
