"""Claude Code (``@anthropic-ai/claude-code`` from npm) for tests: where it is installed, and one headless run
against a test server with nothing but ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY`` (and a model name) set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from support.paths import ROOT


def _claude() -> str | None:
    candidates = [
        os.environ.get("CLAUDE_CODE_BIN"),
        str(ROOT / ".claude-code" / "node_modules" / ".bin" / "claude"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("claude")


CLAUDE = _claude()

#: What keeps Claude Code off the network but for the server it is pointed at
#: (docs/anthropic-messages.md#claude-code).
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports, auto-update, feedback
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def claude_env(home: Path, base_url: str, api_key: str = "unused") -> dict[str, str]:
    """The whole environment of a run: a HOME the test owns, the server, the key, and :data:`QUIET`."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        **QUIET,
    }


def claude_command(prompt: str, *args: str) -> list[str]:
    assert CLAUDE is not None
    return [CLAUDE, "-p", prompt, "--output-format", "json", *args]


def claude(
    home: Path, workdir: Path, base_url: str, prompt: str, *args: str, api_key: str = "unused"
) -> dict[str, Any]:
    """Run ``claude -p PROMPT --output-format json ARGS`` in ``workdir``; assert it exits 0; return its JSON result."""
    result = subprocess.run(
        claude_command(prompt, *args),
        cwd=workdir,
        env=claude_env(home, base_url, api_key),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return json.loads(result.stdout)
