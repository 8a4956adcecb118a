"""Generate the Python stubs of TensorRT-LLM's gRPC service from the vendored protos (``make grpc-stubs``).

The protos are ``trtllm_responses/executors/trtllm_grpc/proto/*.proto`` (PIN.md there names where they come
from); the stubs are written beside them, in the package:

    python scripts/grpc_stubs.py [--out DIR]

``grpc_tools.protoc`` (``pip install grpcio-tools==VERSION``, the version PIN.md records) writes
``<name>_pb2.py``, ``<name>_pb2.pyi`` and ``<name>_pb2_grpc.py`` for each proto. protoc imports one proto's
module from another as a top-level module (``import common_pb2``); inside the package those imports are
rewritten package-relative (``from . import common_pb2``), as TensorRT-LLM's own vendored OpenEngine stubs
are (tensorrt_llm/grpc/openengine/generate_stubs.sh). Nothing else of protoc's output is touched, so
tests/executors/test_trtllm_grpc_wire.py can regenerate into a temporary folder and compare byte for byte.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "trtllm_responses" / "executors" / "trtllm_grpc"
PROTO_DIR = PACKAGE_DIR / "proto"
PROTOS = ("common.proto", "trtllm_service.proto")


def generated_names() -> list[str]:
    """The files one generation writes, in a stable order."""
    stems = [name.removesuffix(".proto") for name in PROTOS]
    return [f"{stem}{suffix}" for stem in stems for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")]


def _relative_imports(text: str) -> str:
    """protoc's top-level imports of sibling modules (``import x_pb2 as y``) made package-relative."""
    stems = "|".join(re.escape(name.removesuffix(".proto")) for name in PROTOS)
    return re.sub(rf"^import ((?:{stems})_pb2)( as \w+)?$", r"from . import \1\2", text, flags=re.M)


def generate(out: Path) -> list[Path]:
    """Run protoc over PROTOS into ``out`` and make the sibling imports relative; returns the files written.

    Raises ``subprocess.CalledProcessError`` when protoc fails (its message on stderr) and
    ``ModuleNotFoundError`` when grpcio-tools is not installed.
    """
    import grpc_tools  # noqa: F401  (fail here, with the module's name, when grpcio-tools is missing)

    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={out}"]
    command += [f"--pyi_out={out}", f"--grpc_python_out={out}", *PROTOS]
    subprocess.run(command, check=True, cwd=PROTO_DIR)
    written = []
    for name in generated_names():
        path = out / name
        path.write_text(_relative_imports(path.read_text()))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DIR, help="where the stubs go (the package)")
    args = parser.parse_args(argv)
    generate(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
