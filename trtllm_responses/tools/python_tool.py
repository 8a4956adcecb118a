"""gpt-oss's ``python`` tool as a server-run ``code_interpreter``: a local sandboxed subprocess, or an MCP server.

The model calls ``to=python`` with code as the body; what the process printed is what the model
reads and the ``code_interpreter_call``'s ``outputs`` log. ``local`` (:class:`LocalPython`): a fresh
interpreter per call inside the sandbox (:mod:`.sandbox`), killed at ``--python_timeout``, the tool
loop's ``--tool_timeout`` or its output cap, whichever comes first. ``mcp:URL``
(:class:`MCPPython`): that MCP server's ``python`` tool.
docs/server-run-tools.md#gpt-osss-own-tools-python-code_interpreter-and-browser-web_search.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from typing import Any

import anyio
import orjson
from openai.types.responses.response_output_item import McpListToolsTool

from ..core import new_id
from ..harmony import ItemKind
from .base import ToolOutcome, ToolProvider, truncate_output
from .cgroups import CallCgroup
from .mcp import MCPProvider
from .sandbox import Sandbox, SandboxUnavailable, setup_sandbox
from .settings import PythonLimits, ToolSettings

__all__ = ["STATELESS_PYTHON_DESCRIPTION", "LocalPython", "MCPPython", "PythonLimits"]

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


def _logs(text: str) -> dict[str, Any]:
    return {"code_interpreter_call.outputs": {"outputs": [{"type": "logs", "logs": text}]}}


class _PythonProvider(ToolProvider):
    namespace = "python"
    item_kind = ItemKind.CODE_INTERPRETER_CALL

    def __init__(self, container: str) -> None:
        self._container = container

    def outcome(self, text: str, failed: bool, error_type: str | None = None) -> ToolOutcome:
        """The item's fields for a run that printed ``text``: ``outputs`` (logs) when the client asks for them.
        ``error_type``: how it failed, for its span (``exit_status`` when it failed otherwise)."""
        if failed and error_type is None:
            error_type = "exit_status"
        return ToolOutcome(
            {"container_id": self._container}, failed=failed, optional=_logs(text), error_type=error_type
        )

    def failure(self, message: str, code: int = -32603) -> ToolOutcome:
        return self.outcome(message, failed=True, error_type="tool_error")


class LocalPython(_PythonProvider):
    """``--python_tool local``: each call in a fresh bubblewrap sandbox (see the module docstring)."""

    def __init__(self, limits: PythonLimits) -> None:
        super().__init__(new_id("cntr"))
        self._limits = limits

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        try:
            sandbox = await asyncio.to_thread(setup_sandbox, self._limits)  # cached after the first
        except SandboxUnavailable as exc:
            message = f"The python sandbox is not available on this server: {exc}."
            return self.outcome(message, failed=True, error_type="sandbox_unavailable")
        async with sandbox.slots:  # at most limits.concurrent_calls at once: their memory is bounded in sum
            return await self._call(sandbox, arguments)

    async def _call(self, sandbox: Sandbox, arguments: str) -> ToolOutcome:
        cgroup: CallCgroup | None = None
        proc: asyncio.subprocess.Process | None = None
        try:
            cgroup = sandbox.new_cgroup()
            proc = await asyncio.create_subprocess_exec(
                *sandbox.command(cgroup),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=sandbox.env,
                cwd="/",
                start_new_session=True,
            )
            return await self._run(proc, arguments)
        finally:
            # Also when cancelled (--tool_timeout, the client gone, a shutdown): anyio's cancellation
            # would cut every await here short, so the clean-up is shielded.
            with anyio.CancelScope(shield=True):
                if proc is not None and proc.returncode is None:
                    _kill(proc)
                    with contextlib.suppress(Exception):
                        await proc.wait()
                if cgroup is not None:
                    if not await asyncio.to_thread(cgroup.remove):
                        logger.warning("python sandbox: could not remove the cgroup %s", cgroup.directories)

    async def _run(self, proc: asyncio.subprocess.Process, arguments: str) -> ToolOutcome:
        limits = self._limits
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

    def _result(self, output: bytes, returncode: int | None, over: bool, timed_out: bool) -> ToolOutcome:
        limits = self._limits
        text = truncate_output(output.decode(errors="replace"), limits.output_bytes)
        if over:
            return self.outcome(text, True, "output_limit")  # truncate_output added the note
        if timed_out:
            return self.outcome(
                f"{text}\n[the code was stopped after {limits.timeout:g} s of wall-clock time]",
                True,
                "timeout",
            )
        if returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return self.outcome(
                f"{text}\n[the code was stopped after {limits.cpu_seconds} s of CPU time]", True, "cpu_limit"
            )
        if returncode is not None and returncode >= 128:
            # bwrap's init exits 128 + N when the code was killed by signal N (SIGKILL: the memory
            # cgroup's OOM killer, or RLIMIT_CPU's hard limit).
            return self.outcome(f"{text}\n[the code was killed by signal {returncode - 128}]", True, "killed")
        if returncode is not None and returncode < 0:
            return self.outcome(f"{text}\n[the sandbox was killed by signal {-returncode}]", True, "killed")
        return self.outcome(text, failed=returncode != 0)


def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL bwrap: its pid namespace's init dies with it (``--die-with-parent``), and so everything in it."""
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
            return self.outcome(output, outcome.failed, outcome.error_type)
        error = fields.get("error") or {}
        content = error.get("content") if isinstance(error, dict) else None
        if isinstance(content, list):
            text = "".join(c.get("text", "") for c in content if isinstance(c, dict))
        else:
            text = f"Error: {error.get('message', 'the python server failed') if isinstance(error, dict) else error}"
        return self.outcome(text, failed=True, error_type=outcome.error_type)
