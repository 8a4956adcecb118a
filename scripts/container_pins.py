"""Print pip constraints that keep what TensorRT-LLM pins in its container, and nothing else.

Run inside NVIDIA's TensorRT-LLM container, before installing trtllm-responses
(docs/serving-on-tensorrt-llm.md#installing-into-nvidias-tensorrt-llm-release-container):

    python3 scripts/container_pins.py > /tmp/container-pins.txt
    pip install -c /tmp/container-pins.txt /src/trtllm-responses

Each package that installed TensorRT-LLM requires *with a version specifier* (``torch<=2.10.0a0,>=2.9.1``,
``fastapi>=0.136.3``, ``xgrammar==0.1.32``, ``mcp<2.0.0,>=1.23.0`` …) is frozen at the version the container
holds: pip may add packages, never change those. A package TensorRT-LLM names without a version
(``openai``, ``uvicorn``, ``lark`` …) is left free: freezing it too (``pip list --format=freeze``, every
package of the container) makes the install fail whenever the container holds an older one than this
project needs (openai 2.x, where the server needs 3.15 or newer: ``ResolutionImpossible``).

Standard library only (the container's Python may have no ``packaging``); ``--requires FILE`` and
``--installed FILE`` (``name==version`` lines) replace what is read from the environment, for tests.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from collections.abc import Iterable, Mapping

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_names(requirements: Iterable[str]) -> list[str]:
    """The names that ``requirements`` (Requires-Dist lines) give a version specifier, extras' lines left out."""
    names: list[str] = []
    for line in requirements:
        requirement, _, marker = line.partition(";")
        if "extra" in marker:
            continue
        match = _NAME.match(requirement)
        if match and re.search(r"[<>=~!]", match.group(3)) and canonical(match.group(1)) not in names:
            names.append(canonical(match.group(1)))
    return names


def container_pins(requirements: Iterable[str], installed: Mapping[str, str]) -> list[str]:
    """``name==version`` for each package ``requirements`` pins that is installed, in their order."""
    versions = {canonical(name): version for name, version in installed.items()}
    return [f"{name}=={versions[name]}" for name in pinned_names(requirements) if name in versions]


def _read_pairs(path: str) -> dict[str, str]:
    pairs = {}
    for line in open(path, encoding="utf-8"):
        name, sep, version = line.strip().partition("==")
        if sep:
            pairs[name] = version
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requires", help="Requires-Dist lines (default: installed tensorrt_llm's)")
    parser.add_argument("--installed", help="name==version lines (default: this environment's distributions)")
    args = parser.parse_args(argv)
    if args.requires:
        requirements = [line.strip() for line in open(args.requires, encoding="utf-8") if line.strip()]
    else:
        try:
            requirements = importlib.metadata.requires("tensorrt_llm") or []
        except importlib.metadata.PackageNotFoundError:
            print(
                "tensorrt_llm is not installed here: run this inside TensorRT-LLM's container",
                file=sys.stderr,
            )
            return 1
    if args.installed:
        installed = _read_pairs(args.installed)
    else:
        installed = {dist.metadata["Name"]: dist.version for dist in importlib.metadata.distributions()}
    print("\n".join(container_pins(requirements, installed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
