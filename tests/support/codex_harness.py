"""Codex CLI (``@openai/codex`` from npm) for tests: where it is installed, a CODEX_HOME whose only provider is
a test server, and one ``codex exec`` run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from support.paths import DATA, ROOT

CATALOG = DATA / "codex" / "gpt-oss-catalog.json"
#: The stdio MCP server Codex starts for the tool-search tests.
MCP_STDIO_SERVER = Path(__file__).with_name("mcp_stdio_server.py")


def _codex() -> str | None:
    candidates = [os.environ.get("CODEX_BIN"), str(ROOT / ".codex-cli" / "node_modules" / ".bin" / "codex")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("codex")


CODEX = _codex()


def write_codex_home(home: Path, base_url: str, *, search: bool = False, websocket: bool = False) -> None:
    """A CODEX_HOME whose only provider is the server at ``base_url`` (gpt-oss from the test catalog).

    ``search``: Codex's ``tool_search`` feature on, the catalog entry saying gpt-oss supports it
    (``supports_search_tool``), and the stdio MCP server :data:`MCP_STDIO_SERVER` configured as ``notes``
    (``required``: Codex waits for it before the first turn, else a slow start leaves it out of the
    search; up to 120 s, for a loaded test machine), its tools approved (``default_tools_approval_mode``:
    under ``codex exec``'s approval policy ``never`` Codex otherwise refuses every MCP call), and Codex's
    sandbox left as it is (the config docs/agent-clients.md#codex gives, as written: no command runs).
    ``websocket``: the provider speaks the Responses WebSocket mode (``supports_websockets``).

    Otherwise Codex's own sandbox is off (``sandbox_mode = "danger-full-access"``): these tests are about the
    Responses API round trip, not Codex's sandbox, and a home in pytest's temporary directory could not
    run it anyway (Codex creates no ``codex-linux-sandbox`` helper under ``$TMPDIR``, so every sandboxed
    command fails: ``tests/clients/test_codex_sandbox.py``). The commands they run are ``echo`` and an
    ``apply_patch`` into the test's own temporary directory.
    """
    catalog = json.loads(CATALOG.read_text())
    if search:
        for model in catalog["models"]:
            model["supports_search_tool"] = True
    (home / "gpt-oss-catalog.json").write_text(json.dumps(catalog))
    sandbox = "" if search else 'sandbox_mode = "danger-full-access"\n'
    config = f'''model = "gpt-oss"
{sandbox}model_provider = "trtllm"
model_context_window = 131072
model_catalog_json = "{home / "gpt-oss-catalog.json"}"

[model_providers.trtllm]
name = "trtllm-responses"
base_url = "{base_url}/v1"
wire_api = "responses"
'''
    if websocket:
        config += "supports_websockets = true\n"
    if search:
        config += f'''
[features]
tool_search = true

[mcp_servers.notes]
command = "{sys.executable}"
args = ["{MCP_STDIO_SERVER}"]
required = true
default_tools_approval_mode = "approve"
startup_timeout_sec = 120
'''
    (home / "config.toml").write_text(config)


def codex(
    home: Path, workdir: Path, *args: str, transcript: bool = False, env: Mapping[str, str] | None = None
) -> str:
    """Run ``codex exec`` in ``workdir`` (``env``: variables set for it beside ``CODEX_HOME``); assert it exits 0;
    return its stdout (with ``transcript``, also the transcript Codex prints on stderr)."""
    assert CODEX is not None
    env = {**os.environ, **(env or {}), "CODEX_HOME": str(home), "NO_COLOR": "1"}
    env.pop("OPENAI_API_KEY", None)
    result = subprocess.run(
        [CODEX, "exec", "--skip-git-repo-check", *args],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout if not transcript else result.stdout + result.stderr
