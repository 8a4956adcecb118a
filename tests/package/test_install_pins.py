"""Installs that hold: the project resolves against each supported TensorRT-LLM release's pins, and its
declared lower bounds are real.

- ``constraints/tensorrt-llm-X.txt`` holds release X's install requirements (its PKG-INFO on PyPI,
  built from its requirements.txt). ``pip install --dry-run -c`` that file, with the ``test`` and
  ``guided`` extras (what runs tests/executors/test_trtllm_contract.py in TensorRT-LLM's container), must
  resolve: nothing TensorRT-LLM pins (torch, openai-harmony, fastapi, xgrammar …) is replaced.
- The container recipe (``scripts/container_pins.py``: freeze only what TensorRT-LLM pins) resolves against
  a container-like set of installed packages that holds an ``openai`` older than the project needs, where
  freezing every installed package (the old recipe) cannot.
- The lowest versions ``pyproject.toml`` allows for each direct dependency (``mcp`` 1.23 among them) are
  installed into a fresh venv, where a smoke test serves a streamed response, renders and parses Harmony,
  and calls an MCP server's tool over streamable HTTP and SSE (mcp 1.x; the suite runs 2.x).

These need the package registry and ~3.5 minutes of CPU (pip unpacks torch): they are marked ``install`` and
run by ``make test-install`` (``.ci/run`` runs it after ``make test``), not in ``make test``'s 10 minutes.
They need only the package registry (``pip --isolated``: this machine's pip configuration, its local
wheel folders and global constraints, are left out). They are skipped, not failed, only when the
registry cannot be reached at all.
"""

from __future__ import annotations

import json
import os
import re
import runpy
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


#: The releases whose pins are recorded and resolved: every stable release from the oldest served, and the
#: newest pre-releases of 1.3 and 1.4 (NVIDIA's release container nvcr.io/nvidia/tensorrt-llm/release:1.4.0rc1).
RELEASES = {"1.1.0", "1.2.0", "1.2.1", "1.3.0rc29", "1.4.0rc1"}


def _release(path: Path) -> Version:
    return Version(path.stem.removeprefix("tensorrt-llm-"))


def test_pins_are_recorded_with_their_source() -> None:
    assert {str(_release(p)) for p in PINS} >= RELEASES
    for path in PINS:
        assert _release(path).release[:2] >= MIN_TRTLLM_VERSION, f"{path.name}: an unsupported release"
        text = path.read_text()
        assert re.search(r"^# Source: .*tensorrt_llm-[\w.]+\.tar\.gz", text, re.M), path.name
        assert re.search(r"\(sha256 [0-9a-f]{64}\)", text), path.name
        assert re.search(r"^openai-harmony==", text, re.M) and re.search(r"^torch[<>=]", text, re.M), (
            path.name
        )


def _pip_env(tmp: Path) -> dict[str, str]:
    """pip's environment with its temporary folder in the test's own: a dry run leaves each wheel it unpacked
    (torch: 860 MB) in ``pip-unpack-*`` under TMPDIR, which filled the machine's /tmp run after run."""
    scratch = tmp / "pip-tmp"
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(scratch)}


def _dry_run(pins: Path, tmp: Path, extras: str = "[test,guided]") -> tuple[int, str, dict]:
    report = tmp / f"{pins.stem}.json"
    command = [
        sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed", "--quiet",
        "--report", str(report), "-c", str(pins), f"{ROOT}{extras}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=_pip_env(tmp))
    data = json.loads(report.read_text()) if report.exists() else {}
    return done.returncode, done.stdout + done.stderr, data


@pytest.mark.install
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
        mcp = re.search(r"^mcp([<>=!~].*)$", pins.read_text(), re.M)
        if mcp:  # 1.3.0rc22 and later: mcp<2.0.0,>=1.23.0, which tools/mcp_sdk.py serves
            assert Version(chosen["mcp"]) < Version("2"), pins.name


def _versions(report: dict) -> dict[str, str]:
    return {
        re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(): item["metadata"]["version"]
        for item in report["install"]
    }


@pytest.mark.install
def test_the_container_recipe_leaves_what_tensorrt_llm_does_not_pin_free(
    registry: None, tmp_path: Path
) -> None:
    """A container like 1.2.0's (what its pins resolve to) with openai 2.54.0, which TensorRT-LLM requires
    without a version: freezing every package fails; freezing what TensorRT-LLM pins resolves and upgrades
    openai to what the server needs, leaving the pinned packages as the container has them."""
    pins = ROOT / "constraints" / "tensorrt-llm-1.2.0.txt"
    code, output, report = _dry_run(pins, tmp_path, extras="")
    assert code == 0, output[-2000:]
    container = _versions(report) | {"openai": "2.54.0"}
    requires = [line for line in pins.read_text().splitlines() if line and not line.startswith("#")]
    recipe = runpy.run_path(str(ROOT / "scripts" / "container_pins.py"))
    frozen = recipe["container_pins"](requires, container)
    assert not any(line.startswith("openai==") for line in frozen)
    assert "openai-harmony==0.0.4" in frozen and "fastapi==" + container["fastapi"] in frozen
    everything = tmp_path / "freeze-everything.txt"
    everything.write_text("".join(f"{name}=={version}\n" for name, version in container.items()))
    only_pinned = tmp_path / "freeze-pinned.txt"
    only_pinned.write_text("\n".join(frozen) + "\n")
    with ThreadPoolExecutor(2) as pool:
        old, new = pool.map(lambda p: _dry_run(p, tmp_path, extras=""), (everything, only_pinned))
    assert old[0] != 0 and "ResolutionImpossible" in old[1], (
        "the old recipe (freeze everything) must fail here"
    )
    assert new[0] == 0, new[1][-2000:]
    chosen = _versions(new[2])
    assert Version(chosen["openai"]) >= Version("3.15")
    for line in frozen:
        name, version = line.split("==")
        if name in chosen:
            assert chosen[name] == version, name


def _floors() -> dict[str, str]:
    """Each direct dependency's lowest allowed version (``name>=X`` in pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = {}
    for requirement in project["dependencies"]:
        match = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?>=([\w.]+)", requirement)
        assert match, f"{requirement}: every direct dependency states its lower bound"
        floors[match.group(1)] = match.group(3)
    return floors


@pytest.mark.install
@pytest.mark.parametrize("python", ["3.10", "3.12"])
def test_every_floor_installs_from_wheels(registry: None, tmp_path: Path, python: str) -> None:
    """Each direct dependency's lowest version has a wheel for Python 3.10 and 3.12 (the containers' Python): none
    has to compile (pyyaml 6.0 and regex before 2023.10.3 do on 3.12)."""
    command = [
        sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet", "--no-deps",
        "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
        "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "--target", str(tmp_path),
        *(f"{name}=={version}" for name, version in _floors().items()),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=_pip_env(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


SMOKE = r"""
import json, socket, subprocess, sys, time, urllib.request
import mcp
from trtllm_responses.harmony import load_encoding, parse_completion
from trtllm_responses.tools.mcp_sdk import MCP_MAJOR
assert MCP_MAJOR == 1, mcp
enc = load_encoding()
assert [m.text for m in parse_completion(enc, enc.encode("<|channel|>final<|message|>hi<|return|>"))] == ["hi"]
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]
def wait(url):
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1); return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
port, mcp_ports = free_port(), {"streamable-http": free_port(), "sse": free_port()}
mcp_servers = [subprocess.Popen([sys.executable, "-c", MCP_SERVER, transport, str(p)]) for transport, p in mcp_ports.items()]
allowed = ",".join(f"http://127.0.0.1:{p}" for p in mcp_ports.values())
server = subprocess.Popen([sys.executable, "-m", "trtllm_responses.cli", "serve", "--engine", "echo", "--port", str(port), "--mcp_allowed_urls", allowed])
def respond(body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/responses", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=120).read().decode()
try:
    wait(f"http://127.0.0.1:{port}/health")
    body = {"input": "lowest versions", "stream": True, "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}], "tool_choice": "none"}
    events = [json.loads(line[6:]) for line in respond(body).splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.completed", events[-1]
    assert events[-1]["response"]["output"][-1]["content"][0]["text"] == "lowest versions"
    for url in (f"http://127.0.0.1:{mcp_ports['streamable-http']}/mcp", f"http://127.0.0.1:{mcp_ports['sse']}/sse"):
        wait(url.rsplit("/", 1)[0] + "/")
        tool = {"type": "mcp", "server_label": "demo", "server_url": url, "require_approval": "never"}
        response = json.loads(respond({"input": 'call demo.add {"a": 2, "b": 3}', "tools": [tool]}))
        listing, call = [item for item in response["output"] if item["type"].startswith("mcp")]
        assert [t["name"] for t in listing["tools"]] == ["add", "boom"], listing
        assert listing["tools"][0]["input_schema"]["required"] == ["a", "b"], listing
        assert call["output"] == "5" and call["error"] is None, call
        response = json.loads(respond({"input": "call demo.boom {}", "tools": [tool]}))
        call = [item for item in response["output"] if item["type"] == "mcp_call"][0]
        assert call["error"]["type"] == "mcp_tool_execution_error" and "boom went" in str(call["error"]), call
finally:
    for process in (server, *mcp_servers):
        process.terminate(); process.wait(30)
print("smoke ok")
"""

#: An MCP server of the mcp 1.x SDK (FastMCP), on a transport and port given as arguments.
MCP_SERVER = r"""
import sys
from mcp.server.fastmcp import FastMCP
server = FastMCP("smoke", host="127.0.0.1", port=int(sys.argv[2]))
@server.tool(description="Add two numbers.")
def add(a: int, b: int) -> str:
    return str(a + b)
@server.tool(description="Always fails.")
def boom() -> str:
    raise RuntimeError("boom went the tool")
server.run(transport=sys.argv[1])
"""


@pytest.mark.install
def test_lowest_allowed_versions_work(registry: None, tmp_path: Path) -> None:
    floors = _floors()
    constraints = tmp_path / "floors.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in floors.items()))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    install = subprocess.run(  # this venv's (recent) pip installs into the new one: it resolves faster
        [sys.executable, "-m", "pip", "--python", python, "install", "--isolated", "--quiet", "-c", str(constraints), str(ROOT)],
        capture_output=True, text=True, timeout=900, env=_pip_env(tmp_path),
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
    script = f"MCP_SERVER = {MCP_SERVER!r}\n{SMOKE}"
    smoke = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert smoke.returncode == 0 and "smoke ok" in smoke.stdout, smoke.stdout[-2000:] + smoke.stderr[-4000:]
