"""Claude Code (``@anthropic-ai/claude-code`` from npm), headless, against ``/v1/messages`` of an echo server.

Each run is a real ``claude -p ... --output-format json`` subprocess with a HOME of its own and nothing but
``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY`` (and a model name) set, plus the variables that turn off its
telemetry and auto-update. Claude Code sends its own long system prompt and tools (Agent, Bash, Edit,
Read, Write, …); the echo executor's rules (docs/echo-executor.md#the-echo-executor) read the user's words
without the
``<system-reminder>`` blocks Claude Code puts before them, and a ``#steps`` script drives its tool loop.
Skipped when no Claude Code binary is installed (``make test`` installs one under ``.claude-code/``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.claude_code_harness import CLAUDE, claude, claude_command, claude_env
from support.process_harness import ServeProcess
from support.server_harness import RecordingEcho, steps

pytestmark = pytest.mark.skipif(
    CLAUDE is None, reason="Claude Code is not installed (make test installs it with npm)"
)


@pytest.fixture(scope="module")
def server_options(encoding) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {"executor": RecordingEcho(encoding), "api_key": "cc-test-key"}


def run(server: Any, tmp_path: Path, prompt: str, *args: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return claude(home, work, server.base_url, prompt, *args, api_key="cc-test-key")


def test_a_session_reads_a_file_and_edits_it(server, tmp_path: Path, encoding) -> None:  # type: ignore[no-untyped-def]
    work = tmp_path / "work"
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("hello world\n")
    script = steps(
        f"call Read {json.dumps({'file_path': str(notes)})}",
        f"call Edit {json.dumps({'file_path': str(notes), 'old_string': 'hello', 'new_string': 'goodbye'})}",
        "Edited notes.txt.",
    )
    before = len(server.executor.prompts)
    result = run(server, tmp_path, script, "--model", "gpt-oss", "--allowedTools", "Read", "Edit")
    assert result["is_error"] is False and result["subtype"] == "success"
    assert result["result"] == "Edited notes.txt."
    assert notes.read_text() == "goodbye world\n"
    tokens = list(server.executor.prompts.values())[before:]
    prompts = [encoding.decode(p) for p in tokens]
    assert len(prompts) == 3  # read, edit, answer: one request each
    # Each turn's prompt extends the one before (the engine's KV cache reuses it): nothing of the first
    # instructions changes between requests (Claude Code's billing header is left out).
    for earlier, later in zip(tokens, tokens[1:], strict=False):
        assert later[: len(earlier)] == earlier
    # The second and third requests replayed the thinking blocks (signatures verified) and Read's output.
    assert "<|channel|>analysis<|message|>Calling Read.<|end|>" in prompts[1]
    assert "hello world" in prompts[1].split("<|start|>functions.Read")[1]


def test_a_session_against_serve_engine_echo(tmp_path: Path) -> None:
    """The same session against ``trtllm-responses serve --engine echo`` as a process of its own."""
    server = ServeProcess("--api_key", "cc-test-key").start()
    try:
        work = tmp_path / "work"
        work.mkdir()
        notes = work / "notes.txt"
        notes.write_text("hello world\n")
        script = steps(
            f"call Read {json.dumps({'file_path': str(notes)})}",
            f"call Edit {json.dumps({'file_path': str(notes), 'old_string': 'world', 'new_string': 'there'})}",
            "Done.",
        )
        result = run(server, tmp_path, script, "--model", "gpt-oss", "--allowedTools", "Read", "Edit")
        assert result["is_error"] is False and result["result"] == "Done."
        assert notes.read_text() == "hello there\n"
        metrics = httpx.get(server.base_url + "/metrics", timeout=10).text
        served = [
            line for line in metrics.splitlines() if 'route="/v1/messages"' in line and 'status="200"' in line
        ]
        assert served and served[0].endswith(" 3.0"), served  # read, edit, answer
    finally:
        server.kill()


def test_any_model_name_is_the_served_model(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = run(server, tmp_path, "#lorem 6")  # Claude Code's own default model, a claude-… name
    assert result["is_error"] is False and result["result"].strip().startswith("lorem ipsum dolor")
    assert all(name.startswith("claude-") for name in result["modelUsage"])
    result = run(server, tmp_path, "#lorem 3", "--model", "claude-haiku-4-5")
    assert result["result"].strip() == "lorem ipsum dolor"


def test_a_bash_round_trip(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = steps('call Bash {"command": "echo bash-round-trip-ok", "description": "Say it"}', "Ran it.")
    result = run(server, tmp_path, script, "--model", "gpt-oss", "--allowedTools", "Bash")
    assert result["result"] == "Ran it."


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_it_connects_to_nothing_but_the_server(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every connect() Claude Code makes (any of its processes) goes to the server's loopback port."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    log = tmp_path / "connect.log"
    command = [
        "strace",
        "-f",
        "-qq",
        "-e",
        "trace=connect",
        "-o",
        str(log),
        *claude_command("#lorem 3", "--model", "gpt-oss"),
    ]
    result = subprocess.run(
        command,
        cwd=work,
        env=claude_env(home, server.base_url, "cc-test-key"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    port = server.base_url.rsplit(":", 1)[1]
    inet = [line for line in log.read_text().splitlines() if "AF_INET" in line]
    assert inet, "Claude Code reached the server"
    assert all(f"htons({port})" in line and "127.0.0.1" in line for line in inet), inet
