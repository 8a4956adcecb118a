"""Codex's own sandbox and where ``CODEX_HOME`` lives (docs/agent-clients.md#codex).

Codex puts its helpers (``codex-linux-sandbox``, ``apply_patch``) on ``PATH`` from a directory under
``CODEX_HOME`` and refuses to create them under the system temporary directory (``$TMPDIR``, else
``/tmp``): it warns "could not create PATH aliases" and goes on, and then every sandboxed command
fails (``bwrap: execvp codex-linux-sandbox: No such file or directory``) and every patch is not
written, while ``codex exec`` still exits 0. So the example in docs/agent-clients.md#codex keeps
``CODEX_HOME`` out of the
temporary directory. Here the test's temporary directory stands for ``/tmp`` (``TMPDIR`` is set for
Codex), so both cases run hermetically: a home inside it fails as a user's would, a home beside it
works with Codex's ``workspace-write`` sandbox on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.codex_harness import CODEX, codex, write_codex_home
from support.server_harness import RunningServer

pytestmark = pytest.mark.skipif(CODEX is None, reason="Codex CLI is not installed (make codex-cli)")

PATCH = "call apply_patch *** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


@pytest.mark.parametrize("inside_temp", [False, True], ids=["home-outside-temp", "home-under-temp"])
def test_sandboxed_commands_need_codex_home_outside_the_temp_dir(
    echo_server: RunningServer, tmp_path: Path, inside_temp: bool
) -> None:
    temp = tmp_path / "tmp"
    home = (temp if inside_temp else tmp_path) / "codex-home"
    workdir = tmp_path / "work"
    for folder in (temp, home, workdir):
        folder.mkdir(parents=True, exist_ok=True)
    write_codex_home(home, echo_server.base_url)
    # codex() asserts exit 0: Codex exits 0 either way.
    env = {"TMPDIR": str(temp)}
    command = 'call exec_command {"cmd":"echo round-trip-ok"}'
    said = codex(home, workdir, "-s", "workspace-write", command, transcript=True, env=env)
    codex(home, workdir, "-s", "workspace-write", PATCH, env=env)
    if inside_temp:
        assert "could not create PATH aliases" in said
        assert "Refusing to create helper binaries under temporary dir" in said
        assert "execvp codex-linux-sandbox: No such file or directory" in said
        assert not (workdir / "hello.txt").exists(), "the patch was not written"
    else:
        assert "could not create PATH aliases" not in said
        assert "exec_command returned: " in said and "round-trip-ok" in said
        assert "Process exited with code 0" in said
        assert (workdir / "hello.txt").read_text() == "hello\n"
