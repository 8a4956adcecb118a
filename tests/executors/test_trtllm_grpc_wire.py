"""The vendored wire (trtllm_responses/executors/trtllm_grpc/): the protos are the ones PIN.md names, and the
stubs beside them are protoc's output for exactly those protos.

- Each ``proto/*.proto``'s sha256 is the one PIN.md records (an edited proto, or a PIN.md not updated with a
  new one, fails).
- Where grpcio-tools is installed: the file descriptor serialized in each ``*_pb2.py`` is the one protoc builds
  from the vendored ``.proto`` (stubs left stale after a proto changed fail), and, where its version is the one
  PIN.md records, ``scripts/grpc_stubs.py`` regenerates every stub byte for byte (a hand-edited stub fails).
- The stubs import under the ``grpc`` extra and name the service the engine serves.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.paths import PACKAGE, ROOT

WIRE = PACKAGE / "executors" / "trtllm_grpc"
PROTOS = ("common.proto", "trtllm_service.proto")


def _pin() -> str:
    return (WIRE / "PIN.md").read_text()


def _pinned_sha256(name: str) -> str:
    match = re.search(rf"`proto/{re.escape(name)}` sha256 \| `([0-9a-f]{{64}})`", _pin())
    assert match is not None, f"PIN.md records no sha256 for proto/{name}"
    return match.group(1)


def _pinned_tools_version() -> str:
    match = re.search(r"`grpcio-tools==([0-9.]+)`", _pin())
    assert match is not None, "PIN.md records no grpcio-tools version"
    return match.group(1)


def _grpc_tools_version() -> str | None:
    try:
        importlib.import_module("grpc_tools")
    except ImportError:
        return None
    return importlib.metadata.version("grpcio-tools")


@pytest.mark.parametrize("name", PROTOS)
def test_the_vendored_protos_are_the_pinned_ones(name: str) -> None:
    digest = hashlib.sha256((WIRE / "proto" / name).read_bytes()).hexdigest()
    assert digest == _pinned_sha256(name)


def test_the_makefiles_target_installs_the_pinned_grpcio_tools() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert f"GRPCIO_TOOLS_SPEC ?= grpcio-tools=={_pinned_tools_version()}" in makefile
    assert re.search(r"^grpc-stubs:.*\n(\t.*\n)*\t.*scripts/grpc_stubs\.py", makefile, flags=re.M)


def _without_json_names(messages: Any) -> None:
    """Clear ``json_name`` (protoc's python generator leaves it out of the descriptor it embeds)."""
    for message in messages:
        for field in [*message.field, *message.extension]:
            field.ClearField("json_name")
        _without_json_names(message.nested_type)


def _descriptor_set(tmp: Path) -> dict[str, bytes]:
    """What protoc builds from the vendored protos, as the descriptor a ``_pb2`` module embeds."""
    from google.protobuf import descriptor_pb2

    out = tmp / "set.pb"
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{WIRE / 'proto'}",
        f"--descriptor_set_out={out}",
    ]
    subprocess.run([*command, *PROTOS], check=True, cwd=WIRE / "proto", timeout=120)
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    for file in files:
        _without_json_names(file.message_type)
    return {file.name: file.SerializeToString(deterministic=True) for file in files}


@pytest.mark.parametrize("name", PROTOS)
def test_each_stubs_descriptor_is_the_vendored_protos(name: str, tmp_path: Path) -> None:
    if _grpc_tools_version() is None:
        pytest.skip("grpcio-tools is not installed (make grpc-stubs installs it)")
    from google.protobuf import descriptor_pb2

    module = importlib.import_module(
        f"trtllm_responses.executors.trtllm_grpc.{name.removesuffix('.proto')}_pb2"
    )
    in_stub = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert in_stub.SerializeToString(deterministic=True) == _descriptor_set(tmp_path)[name]


def test_the_stubs_are_exactly_what_the_script_generates(tmp_path: Path) -> None:
    version = _grpc_tools_version()
    if version is None:
        pytest.skip("grpcio-tools is not installed (make grpc-stubs installs it)")
    if version != _pinned_tools_version():
        pytest.skip(
            f"grpcio-tools {version} is installed; the stubs were generated with {_pinned_tools_version()}"
        )
    script = runpy.run_path(str(ROOT / "scripts" / "grpc_stubs.py"))
    written = script["generate"](tmp_path)
    assert [path.name for path in written] == script["generated_names"]()
    for path in written:
        assert path.read_bytes() == (WIRE / path.name).read_bytes(), path.name


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
