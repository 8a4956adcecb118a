"""Codex's own sandbox and where ``CODEX_HOME`` lives (README, "Codex").

Codex puts its helpers (``codex-linux-sandbox``, ``apply_patch``) on ``PATH`` from a directory under
``CODEX_HOME`` and refuses to create them under the system temporary directory (``$TMPDIR``, else
``/tmp``): it warns "could not create PATH aliases" and goes on, and then every sandboxed command
fails (``bwrap: execvp codex-linux-sandbox: No such file or directory``) and every patch is not
written, while ``codex exec`` still exits 0. So README's example keeps ``CODEX_HOME`` out of the
temporary directory. Here the test's temporary directory stands for ``/tmp`` (``TMPDIR`` is set for
Codex), so both cases run hermetically: a home inside it fails as a user's would, a home beside it
works with Codex's ``workspace-write`` sandbox on.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.codex_harness import CODEX, write_codex_home

pytestmark = pytest.mark.skipif(CODEX is None, reason="Codex CLI is not installed (make codex-cli)")

PATCH = "call apply_patch *** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


def _exec(home: Path, temp: Path, workdir: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    assert CODEX is not None
    env = {**os.environ, "CODEX_HOME": str(home), "TMPDIR": str(temp), "NO_COLOR": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [CODEX, "exec", "--skip-git-repo-check", "-s", "workspace-write", prompt],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("inside_temp", [False, True], ids=["home-outside-temp", "home-under-temp"])
def test_sandboxed_commands_need_codex_home_outside_the_temp_dir(
    echo_server, tmp_path: Path, inside_temp: bool
) -> None:  # type: ignore[no-untyped-def]
    temp = tmp_path / "tmp"
    home = (temp if inside_temp else tmp_path) / "codex-home"
    workdir = tmp_path / "work"
    for folder in (temp, home, workdir):
        folder.mkdir(parents=True, exist_ok=True)
    write_codex_home(home, echo_server.base_url)
    command = _exec(home, temp, workdir, 'call exec_command {"cmd":"echo round-trip-ok"}')
    patch = _exec(home, temp, workdir, PATCH)
    assert command.returncode == patch.returncode == 0, command.stderr[-2000:]  # exit 0 either way
    if inside_temp:
        assert "could not create PATH aliases" in command.stderr
        assert "Refusing to create helper binaries under temporary dir" in command.stderr
        assert "execvp codex-linux-sandbox: No such file or directory" in command.stdout + command.stderr
        assert not (workdir / "hello.txt").exists(), "the patch was not written"
    else:
        assert "could not create PATH aliases" not in command.stderr
        assert "exec_command returned: " in command.stdout and "round-trip-ok" in command.stdout
        assert "Process exited with code 0" in command.stdout
        assert (workdir / "hello.txt").read_text() == "hello\n"
