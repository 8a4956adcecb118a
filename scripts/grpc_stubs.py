"""Generate the Python stubs of TensorRT-LLM's gRPC wires from the vendored protos (``make grpc-stubs``).

Two wires, each a set of vendored protos with a PIN.md naming where they come from, and the stubs beside them:

- ``smg``: SMG's protocol (``trtllm-serve MODEL --grpc``), ``trtllm_responses/executors/trtllm_grpc/proto/*.proto``,
  stubs in ``trtllm_responses/executors/trtllm_grpc/``;
- ``openengine``: OpenEngine v0.1.0 (``trtllm-serve MODEL --grpc --grpc-protocol openengine``),
  ``trtllm_responses/executors/trtllm_grpc/openengine/proto/openengine/v1/*.proto`` (TensorRT-LLM's
  ``tensorrt_llm/grpc/openengine/proto/`` tree), stubs in ``trtllm_responses/executors/trtllm_grpc/openengine/``.

    python scripts/grpc_stubs.py [--wire smg|openengine] [--out DIR]

``grpc_tools.protoc`` (``pip install grpcio-tools==VERSION``, the version PIN.md records) writes
``<name>_pb2.py``, ``<name>_pb2.pyi`` and ``<name>_pb2_grpc.py`` for each proto. protoc imports one proto's
module from another by the proto's path (``import common_pb2``, ``from openengine.v1 import kv_pb2``); inside
the package those imports are rewritten package-relative (``from . import kv_pb2``), as TensorRT-LLM's own
vendored OpenEngine stubs are (tensorrt_llm/grpc/openengine/generate_stubs.sh, PR NVIDIA/TensorRT-LLM#17019).
OpenEngine's protos are compiled as ``openengine/v1/<name>.proto`` (``-I`` their ``proto/`` folder), so the
descriptors they register in the process-wide pool are named exactly as TensorRT-LLM's; their stubs are
written flat into the package, and only ``openengine.proto`` (the one with services) keeps its
``_pb2_grpc.py`` (protoc writes an empty one for each of the others). Nothing else of protoc's output is
touched, so tests/executors/test_trtllm_grpc_wire.py can regenerate into a temporary folder and compare byte
for byte.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "trtllm_responses" / "executors" / "trtllm_grpc"


@dataclass(frozen=True)
class Wire:
    """One vendored proto set: where its protos are (as protoc names them) and where its stubs go."""

    package_dir: Path
    proto_dir: Path  # protoc's -I: the protos' names are relative to it
    protos: tuple[str, ...]
    with_services: tuple[str, ...]  # the protos whose _pb2_grpc.py is kept

    def stem(self, proto: str) -> str:
        return Path(proto).name.removesuffix(".proto")


WIRES = {
    "smg": Wire(
        package_dir=PACKAGE_DIR,
        proto_dir=PACKAGE_DIR / "proto",
        protos=("common.proto", "trtllm_service.proto"),
        with_services=("common.proto", "trtllm_service.proto"),
    ),
    "openengine": Wire(
        package_dir=PACKAGE_DIR / "openengine",
        proto_dir=PACKAGE_DIR / "openengine" / "proto",
        protos=tuple(
            f"openengine/v1/{name}.proto"
            for name in ("error", "generation", "kv", "lifecycle", "lora", "model", "openengine", "server")
        ),
        with_services=("openengine/v1/openengine.proto",),
    ),
}
# The proto set of SMG's wire, as earlier callers name it
PROTO_DIR = WIRES["smg"].proto_dir
PROTOS = WIRES["smg"].protos


def generated_names(wire: str = "smg") -> list[str]:
    """The files one generation of ``wire`` writes, in a stable order."""
    spec = WIRES[wire]
    names = []
    for proto in spec.protos:
        stem = spec.stem(proto)
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi"]
        if proto in spec.with_services:
            names.append(f"{stem}_pb2_grpc.py")
    return names


def _relative_imports(text: str, spec: Wire) -> str:
    """protoc's imports of sibling modules (``import x_pb2 as y``, ``from a.b import x_pb2 as y``) made
    package-relative."""
    stems = "|".join(re.escape(spec.stem(proto)) for proto in spec.protos)
    packages = sorted({str(Path(proto).parent).replace("/", ".") for proto in spec.protos} - {"."})
    text = re.sub(rf"^import ((?:{stems})_pb2)( as \w+)?$", r"from . import \1\2", text, flags=re.M)
    for package in packages:
        pattern = rf"^from {re.escape(package)} import ((?:{stems})_pb2)( as \w+)?$"
        text = re.sub(pattern, r"from . import \1\2", text, flags=re.M)
    return text


def generate(out: Path, wire: str = "smg") -> list[Path]:
    """Run protoc over ``wire``'s protos into ``out`` (flat) and make the sibling imports relative; returns
    the files written.

    Raises ``subprocess.CalledProcessError`` when protoc fails (its message on stderr) and
    ``ModuleNotFoundError`` when grpcio-tools is not installed.
    """
    import grpc_tools  # noqa: F401  (fail here, with the module's name, when grpcio-tools is missing)

    spec = WIRES[wire]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{spec.proto_dir}",
            f"--python_out={scratch}",
        ]
        command += [f"--pyi_out={scratch}", f"--grpc_python_out={scratch}", *spec.protos]
        subprocess.run(command, check=True, cwd=spec.proto_dir)
        written = []
        for proto in spec.protos:
            folder = Path(scratch) / Path(proto).parent
            for name in generated_names(wire):
                if name.rsplit("_pb2", 1)[0] != spec.stem(proto):
                    continue
                path = out / name
                shutil.copyfile(folder / name, path)
                path.write_text(_relative_imports(path.read_text(), spec))
                written.append(path)
    order = generated_names(wire)
    return sorted(written, key=lambda path: order.index(path.name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wire", choices=sorted(WIRES), help="one wire only (default: every wire)")
    parser.add_argument(
        "--out", type=Path, help="where the stubs go (default: the wire's package; needs --wire)"
    )
    args = parser.parse_args(argv)
    if args.out is not None and args.wire is None:
        parser.error("--out needs --wire")
    for wire in [args.wire] if args.wire else sorted(WIRES):
        generate(args.out or WIRES[wire].package_dir, wire)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
