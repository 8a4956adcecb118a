"""Installs that hold: the project resolves against each supported TensorRT-LLM release's pins, and its
declared lower bounds are real.

- ``constraints/tensorrt-llm-X.txt`` holds release X's install requirements (its PKG-INFO on PyPI,
  built from its requirements.txt). ``pip install --dry-run -c`` that file, with the ``test`` and
  ``guided`` extras (what runs tests/executors/test_trtllm_contract.py in TensorRT-LLM's container), must
  resolve: nothing TensorRT-LLM pins (torch, openai-harmony, fastapi, xgrammar …) is replaced.
- The lowest versions ``pyproject.toml`` allows for each direct dependency are installed into a
  fresh venv, where a smoke test serves a streamed response and renders and parses Harmony.

Both need only the package registry (``pip --isolated``: this machine's pip configuration, its local
wheel folders and global constraints, are left out). They are skipped, not failed, only when the
registry cannot be reached at all.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tomllib
from packaging.version import Version
from support.paths import ROOT

from trtllm_responses.executors.trtllm import MIN_TRTLLM_VERSION

PINS = sorted((ROOT / "constraints").glob("tensorrt-llm-*.txt"))
INDEX = "https://pypi.org/simple/"


@pytest.fixture(scope="module")
def registry() -> None:
    try:
        with urllib.request.urlopen(INDEX + "pip/", timeout=15) as answer:
            answer.read(1)
    except OSError as exc:
        pytest.skip(f"the package registry cannot be reached ({exc})")


def _release(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in path.stem.removeprefix("tensorrt-llm-").split("."))


def test_pins_are_recorded_with_their_source() -> None:
    assert {_release(p)[:2] for p in PINS} >= {(1, 1), (1, 2)}
    for path in PINS:
        assert _release(path)[:2] >= MIN_TRTLLM_VERSION, f"{path.name}: an unsupported release"
        text = path.read_text()
        assert re.search(r"^# Source: .*tensorrt_llm-[\d.]+\.tar\.gz", text, re.M), path.name
        assert re.search(r"^openai-harmony==", text, re.M) and re.search(r"^torch[<>=]", text, re.M), (
            path.name
        )


def _dry_run(pins: Path, tmp: Path) -> tuple[int, str, dict]:
    report = tmp / f"{pins.stem}.json"
    command = [
        sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed", "--quiet",
        "--report", str(report), "-c", str(pins), f"{ROOT}[test,guided]",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    data = json.loads(report.read_text()) if report.exists() else {}
    return done.returncode, done.stdout + done.stderr, data


def test_resolves_against_each_supported_release(registry: None, tmp_path: Path) -> None:
    with ThreadPoolExecutor(len(PINS)) as pool:
        results = dict(zip(PINS, pool.map(lambda p: _dry_run(p, tmp_path), PINS), strict=True))
    for pins, (code, output, report) in results.items():
        assert code == 0, f"{pins.name}: {output[-2000:]}"
        chosen = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}
        pinned = dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)$", pins.read_text(), re.M))
        assert chosen["openai-harmony"] == pinned["openai-harmony"]
        assert chosen["xgrammar"] == pinned["xgrammar"], "the guided extra takes the release's own xgrammar"
        assert "torch" in chosen, "xgrammar brings torch: the one the release allows"


def _floors() -> dict[str, str]:
    """Each direct dependency's lowest allowed version (``name>=X`` in pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = {}
    for requirement in project["dependencies"]:
        match = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?>=([\w.]+)", requirement)
        assert match, f"{requirement}: every direct dependency states its lower bound"
        floors[match.group(1)] = match.group(3)
    return floors


SMOKE = r"""
import json, socket, subprocess, sys, time, urllib.request
from trtllm_responses.harmony import load_encoding, parse_completion
enc = load_encoding()
assert [m.text for m in parse_completion(enc, enc.encode("<|channel|>final<|message|>hi<|return|>"))] == ["hi"]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
server = subprocess.Popen([sys.executable, "-m", "trtllm_responses.cli", "serve", "--engine", "echo", "--port", str(port)])
try:
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1); break
        except OSError:
            time.sleep(0.2)
    body = json.dumps({"input": "lowest versions", "stream": True, "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}], "tool_choice": "none"}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/responses", body, {"Content-Type": "application/json"})
    events = [json.loads(line[6:]) for line in urllib.request.urlopen(request, timeout=60).read().decode().splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.completed", events[-1]
    assert events[-1]["response"]["output"][-1]["content"][0]["text"] == "lowest versions"
finally:
    server.terminate(); server.wait(30)
print("smoke ok")
"""


def test_lowest_allowed_versions_work(registry: None, tmp_path: Path) -> None:
    floors = _floors()
    constraints = tmp_path / "floors.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in floors.items()))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    install = subprocess.run(  # this venv's (recent) pip installs into the new one: it resolves faster
        [sys.executable, "-m", "pip", "--python", python, "install", "--isolated", "--quiet", "-c", str(constraints), str(ROOT)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-3000:]
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {
        item["name"].lower().replace("_", "-"): item["version"] for item in json.loads(listed.stdout)
    }
    for name, version in floors.items():
        assert Version(installed[name.lower().replace("_", "-")]) == Version(version), name
    smoke = subprocess.run([python, "-c", SMOKE], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert smoke.returncode == 0 and "smoke ok" in smoke.stdout, smoke.stdout[-2000:] + smoke.stderr[-4000:]
