"""gpt-oss's ``python`` tool as a server-run ``code_interpreter``: a local sandboxed subprocess, or an MCP server.

The model calls ``to=python`` with code as the body; the call is a
``code_interpreter_call`` item, and what the process printed (stdout and stderr,
interleaved) is what the model reads back and the item's ``outputs`` logs.

``local`` (:class:`LocalPython`): every call is a fresh process of the server's
own Python (``-I``: no user site, no ``PYTHON*`` variables), started in its own
session with

- an empty temporary working directory (also its ``HOME`` and ``TMPDIR``), removed afterwards;
- a scrubbed environment (``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` only);
- ``RLIMIT_CPU`` (CPU seconds), ``RLIMIT_AS`` (address space), ``RLIMIT_FSIZE`` (largest file it may
  write), ``RLIMIT_NOFILE`` and no core dumps, set by the child before the code runs;
- a wall-clock timeout, after which its whole process group is killed;
- an output cap: reading stops and the group is killed once it printed more than the limit;
- no network where the kernel lets it drop it: the child enters a new, empty network namespace
  (``unshare(CLONE_NEWNET)``, or with ``CLONE_NEWUSER`` when unprivileged). Where neither is allowed
  (seccomp'd containers, non-Linux) the code keeps the server's network: :func:`network_isolated` says
  which, and the server logs it at startup.

It does not isolate the file system (the code can read what the server's user can read) nor
processes beyond the rlimits: run the server as an unprivileged user, or use ``mcp:URL`` with
a containerised python server, when that matters.

``mcp:URL`` (:class:`MCPPython`): calls the ``python`` tool (argument ``code``) of the MCP
server at URL, e.g. the gpt-oss repository's reference python MCP server, through the MCP
provider's client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any

import anyio
import orjson
from openai.types.responses.response_output_item import McpListToolsTool

from ..harmony.items import ItemKind
from ..ids import new_id
from .base import ToolOutcome, ToolProvider, truncate_output
from .mcp import MCPProvider
from .settings import PythonLimits, ToolSettings

__all__ = ["STATELESS_PYTHON_DESCRIPTION", "LocalPython", "MCPPython", "PythonLimits", "network_isolated"]

logger = logging.getLogger(__name__)

#: The instruction gpt-oss reads for the stateless python tool: the wording of the gpt-oss reference
#: tool's stateless (docker) variant, which the model was tuned with.
STATELESS_PYTHON_DESCRIPTION = (
    "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. "
    "This tool should be used for internal reasoning, but not for code that is intended to be visible to the "
    "user (e.g. when creating plots, tables, or files).\n"
    "When you send a message containing python code to python, it will be executed in a stateless docker "
    "container, and the stdout of that process will be returned to you. You have to use print statements to "
    "access the output."
)

#: Runs in the child before the model's code (read from stdin): limits, then the network, then the code.
_BOOTSTRAP = r"""
import ctypes, os, resource, sys
cpu, mem, fsize = (int(v) for v in sys.argv[1:4])
def limit(kind, value):
    try:
        resource.setrlimit(kind, (value, value))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(kind)
        resource.setrlimit(kind, (min(value, hard) if hard != resource.RLIM_INFINITY else value, hard))
limit(resource.RLIMIT_CPU, cpu)
limit(resource.RLIMIT_FSIZE, fsize)
limit(resource.RLIMIT_NOFILE, 256)
limit(resource.RLIMIT_CORE, 0)
isolated = False
try:
    libc = ctypes.CDLL(None, use_errno=True)
    isolated = libc.unshare(0x40000000) == 0 or libc.unshare(0x40000000 | 0x10000000) == 0
except (OSError, AttributeError):
    pass
if sys.argv[4] == "probe":
    print("isolated" if isolated else "shared")
    raise SystemExit(0)
code = sys.stdin.read()
sys.stdin.close()
sys.stdin = open(os.devnull)
sys.stdout.reconfigure(encoding="utf-8", errors="replace", line_buffering=False)
sys.stderr.reconfigure(encoding="utf-8", errors="replace")
limit(resource.RLIMIT_AS, mem)
del ctypes, resource, libc, limit, cpu, mem, fsize, isolated
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
exec(compile(code, "<python>", "exec"), namespace)
"""


def _clean_env(workdir: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"}


@functools.cache
def network_isolated() -> bool:
    """Whether a local python call runs without network here (the child could enter a new network namespace)."""
    workdir = tempfile.mkdtemp(prefix="trtllm-python-")
    try:
        result = subprocess.run(
            [sys.executable, "-I", "-c", _BOOTSTRAP, "10", str(1 << 30), str(1 << 20), "probe"],
            capture_output=True,
            cwd=workdir,
            env=_clean_env(workdir),
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result.stdout.strip() == b"isolated"


def _logs(text: str) -> dict[str, Any]:
    return {"code_interpreter_call.outputs": {"outputs": [{"type": "logs", "logs": text}]}}


class _PythonProvider(ToolProvider):
    namespace = "python"
    item_kind = ItemKind.CODE_INTERPRETER_CALL

    def __init__(self, container: str) -> None:
        self._container = container

    def outcome(self, text: str, failed: bool) -> ToolOutcome:
        """The item's fields for a run that printed ``text``: ``outputs`` (logs) when the client asks for them."""
        return ToolOutcome({"container_id": self._container}, failed=failed, optional=_logs(text))

    def failure(self, message: str, code: int = -32603) -> ToolOutcome:
        return self.outcome(message, failed=True)


class LocalPython(_PythonProvider):
    """``--python_tool local``: each call in a fresh, limited subprocess (see the module docstring)."""

    def __init__(self, limits: PythonLimits) -> None:
        super().__init__(new_id("cntr"))
        self._limits = limits

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        limits = self._limits
        workdir = tempfile.mkdtemp(prefix="trtllm-python-")
        proc: asyncio.subprocess.Process | None = None
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-c",
                _BOOTSTRAP,
                str(limits.cpu_seconds),
                str(limits.memory_bytes),
                str(limits.file_bytes),
                "run",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=workdir,
                env=_clean_env(workdir),
                start_new_session=True,
            )
            assert proc.stdin is not None and proc.stdout is not None
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(arguments.encode())
                await proc.stdin.drain()
                proc.stdin.close()
            output = bytearray()
            over = timed_out = False
            try:
                with anyio.fail_after(limits.timeout):
                    while chunk := await proc.stdout.read(65536):
                        output += chunk
                        if len(output) > limits.output_bytes:
                            over = True
                            break
                    if not over:
                        await proc.wait()
            except TimeoutError:
                timed_out = True
            if over or timed_out:
                _kill(proc)
                await proc.wait()
            return self._result(bytes(output), proc.returncode, over, timed_out)
        finally:
            if proc is not None and proc.returncode is None:  # cancelled (client gone, loop timeout)
                _kill(proc)
                with contextlib.suppress(Exception):
                    await asyncio.shield(proc.wait())
            await asyncio.to_thread(shutil.rmtree, workdir, True)

    def _result(self, output: bytes, returncode: int | None, over: bool, timed_out: bool) -> ToolOutcome:
        limits = self._limits
        text = truncate_output(output.decode(errors="replace"), limits.output_bytes)
        if over:
            return self.outcome(text, failed=True)  # truncate_output added the note
        if timed_out:
            return self.outcome(
                f"{text}\n[the code was stopped after {limits.timeout:g} s of wall-clock time]", True
            )
        if returncode == -signal.SIGXCPU or returncode == -signal.SIGKILL:
            return self.outcome(
                f"{text}\n[the code was stopped after {limits.cpu_seconds} s of CPU time]", True
            )
        if returncode is not None and returncode < 0:
            return self.outcome(f"{text}\n[the code was killed by signal {-returncode}]", True)
        return self.outcome(text, failed=returncode != 0)


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class MCPPython(_PythonProvider):
    """``--python_tool mcp:URL``: the ``python`` tool of an operator-configured MCP server."""

    def __init__(self, url: str, settings: ToolSettings) -> None:
        super().__init__("mcp")
        self._mcp = MCPProvider("python", url, headers={}, settings=settings)
        self._mcp.tools = [McpListToolsTool(name="python", input_schema={"type": "object"})]

    def __repr__(self) -> str:
        return f"MCPPython({self._mcp!r})"

    async def connect(self) -> ToolOutcome | None:
        failed = await self._mcp.connect()
        return None if failed is None else self._from_mcp(failed)

    async def reset(self) -> None:
        await self._mcp.reset()

    async def aclose(self) -> None:
        await self._mcp.aclose()

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        return self._from_mcp(await self._mcp.call("python", orjson.dumps({"code": arguments}).decode()))

    def _from_mcp(self, outcome: ToolOutcome) -> ToolOutcome:
        fields = outcome.fields
        output = fields.get("output")
        if isinstance(output, str):
            return self.outcome(output, outcome.failed)
        error = fields.get("error") or {}
        content = error.get("content") if isinstance(error, dict) else None
        if isinstance(content, list):
            text = "".join(c.get("text", "") for c in content if isinstance(c, dict))
        else:
            text = f"Error: {error.get('message', 'the python server failed') if isinstance(error, dict) else error}"
        return self.outcome(text, failed=True)
