"""gpt-oss's python tool as a server-run code_interpreter: local subprocesses and an MCP python server.

A real server on loopback (the echo executor: ``call python CODE`` calls the tool,
and the model's answer after it is ``python returned: OUTPUT``), driven with httpx
and the openai SDK; every stream goes through check_stream.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from mcp.server.mcpserver import MCPServer
from support.mcp_server import MCPTestServer, _serve
from support.process_harness import host_processes, wait_gone
from support.server_harness import RecordingEcho, RunningServer, ServerFactory, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.tools.python_tool import STATELESS_PYTHON_DESCRIPTION, LocalPython
from trtllm_responses.tools.sandbox import SandboxUnavailable, setup_sandbox
from trtllm_responses.tools.settings import PythonLimits, ToolSettings

CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
LIMITS = PythonLimits(timeout=3.0, cpu_seconds=1, memory_bytes=256 << 20, output_bytes=2000)


@pytest.fixture(scope="module")
def sandbox() -> Any:
    try:
        return setup_sandbox(LIMITS)
    except SandboxUnavailable as exc:
        pytest.skip(f"the python sandbox cannot be set up here: {exc}")


@pytest.fixture(scope="module")
def server_options(sandbox: Any, encoding: HarmonyEncoding) -> dict[str, Any]:
    settings = ToolSettings(python_tool="local", python_limits=LIMITS, tool_timeout=20.0)
    return {"executor": RecordingEcho(encoding), "tools": settings}


def run(http: httpx.Client, code: str, **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    body = {"input": f"call python {code}", "tools": [CODE_TOOL], **extra}
    events = stream_events(http, body)
    return check_stream(events), events


def logs_of(item: dict[str, Any]) -> str:
    return "".join(o["logs"] for o in item["outputs"] if o["type"] == "logs")


def test_prints_a_result_streamed_as_openai_streams_it(http: httpx.Client) -> None:
    response, events = run(http, "print(6 * 7)", include=["code_interpreter_call.outputs"])
    assert response["status"] == "completed"
    assert [i["type"] for i in response["output"]] == [
        "reasoning",
        "code_interpreter_call",
        "reasoning",
        "message",
    ]
    call = response["output"][1]
    assert call["code"] == "print(6 * 7)" and call["status"] == "completed"
    assert call["container_id"].startswith("cntr_")
    assert call["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert response["output"][-1]["content"][0]["text"] == "python returned: 42\n"
    kinds = [e["type"] for e in events if "code_interpreter" in e["type"]]
    assert kinds[0] == "response.code_interpreter_call.in_progress"
    assert kinds[-3:] == [
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
    ]
    assert "response.code_interpreter_call_code.delta" in kinds


def test_outputs_only_when_included_but_the_model_reads_them(http: httpx.Client) -> None:
    response, _ = run(http, "print('hidden from the client')")
    call = response["output"][1]
    assert call["outputs"] is None
    assert response["output"][-1]["content"][0]["text"] == "python returned: hidden from the client\n"
    # The stored conversation holds what the model read: a continuation sees the output.
    follow = http.post(
        "/v1/responses",
        json={"input": "#prompt", "previous_response_id": response["id"], "tools": [CODE_TOOL]},
    ).json()
    assert (
        "<|start|>python to=assistant<|channel|>commentary<|message|>hidden from the client"
        in (follow["output"][-1]["content"][0]["text"])
    )


def test_timeout_comes_back_as_the_tool_text_with_failed_status(http: httpx.Client) -> None:
    response, _ = run(
        http,
        "import time; print('start', flush=True); time.sleep(30)",
        include=["code_interpreter_call.outputs"],
    )
    assert response["status"] == "completed"
    call = response["output"][1]
    assert call["status"] == "failed"
    assert logs_of(call).startswith("start\n") and "stopped after 3 s of wall-clock time" in logs_of(call)
    assert "wall-clock time" in response["output"][-1]["content"][0]["text"]


async def test_cpu_limit(sandbox: Any) -> None:
    # The provider itself, with a wall-clock limit far above the CPU limit (a loaded machine is slow).
    python = LocalPython(PythonLimits(timeout=60.0, cpu_seconds=1, memory_bytes=256 << 20))
    outcome = await python.call("", "while True: pass")
    assert outcome.failed
    logs = outcome.optional["code_interpreter_call.outputs"]["outputs"][0]["logs"]
    assert "stopped after 1 s of CPU time" in logs


def test_memory_limit(http: httpx.Client) -> None:
    response, _ = run(http, "x = bytearray(1 << 30)", include=["code_interpreter_call.outputs"])
    call = response["output"][1]
    assert call["status"] == "failed" and "MemoryError" in logs_of(call)


def test_oversized_output_is_cut_with_a_note(http: httpx.Client) -> None:
    response, _ = run(http, "print('x' * 100000)", include=["code_interpreter_call.outputs"])
    call = response["output"][1]
    assert call["status"] == "failed"
    assert "[output truncated" in logs_of(call) and len(logs_of(call)) < 2200


def test_files_vanish_and_environment_is_scrubbed(http: httpx.Client, sandbox: Any) -> None:
    os.environ["TRTLLM_TEST_SECRET"] = "do-not-leak"
    try:
        code = (
            "import os, json; open('made.txt', 'w').write('hi'); "
            "print(json.dumps({'cwd': os.getcwd(), 'files': os.listdir('.'), 'env': dict(os.environ)}))"
        )
        response, _ = run(http, code, include=["code_interpreter_call.outputs"])
    finally:
        del os.environ["TRTLLM_TEST_SECRET"]
    seen = json.loads(logs_of(response["output"][1]))
    assert seen["files"] == ["made.txt"] and seen["cwd"] == "/sandbox", "an empty private directory"
    assert "TRTLLM_TEST_SECRET" not in seen["env"]
    assert set(seen["env"]) <= {"PATH", "HOME", "TMPDIR", "LANG", "PWD"}
    again, _ = run(http, "import os; print(os.listdir('.'))", include=["code_interpreter_call.outputs"])
    assert logs_of(again["output"][1]) == "[]\n", "the next call starts from nothing"
    assert not _cgroups_left(sandbox), "each call's cgroup is removed"


def _cgroups_left(sandbox: Any) -> list[str]:
    """This process's call cgroups still on the host (named by its pid: no other process makes them)."""
    if sandbox.cgroups is None:
        return []
    roots = {sandbox.cgroups.memory, sandbox.cgroups.pids}
    return [str(p) for root in roots for p in root.glob(f"trtllm-python-{os.getpid()}-*")]


def test_no_network(http: httpx.Client) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        code = (
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('reached')\nexcept OSError as exc:\n    print('unreachable', exc.errno)"
        )
        response, _ = run(http, code, include=["code_interpreter_call.outputs"])
    finally:
        listener.close()
    assert logs_of(response["output"][1]).startswith("unreachable")


def test_python_error_is_read_by_the_model(http: httpx.Client) -> None:
    response, _ = run(http, "raise ValueError('nope')", include=["code_interpreter_call.outputs"])
    call = response["output"][1]
    assert call["status"] == "failed" and "ValueError: nope" in logs_of(call)
    assert "ValueError: nope" in response["output"][-1]["content"][0]["text"]


def test_stateless_replay_renders_the_prompt_the_loop_saw(http: httpx.Client, server: RunningServer) -> None:
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    user = {"role": "user", "content": "call python print(1 + 1)"}
    executor.requests.clear()
    response, _ = run(http, "print(1 + 1)", include=["code_interpreter_call.outputs"])
    loop_prompt = executor.requests[1].prompt_token_ids
    executor.requests.clear()
    replay = {"input": [user, *response["output"][:2]], "tools": [CODE_TOOL], "store": False}
    check_stream(stream_events(http, replay))
    assert executor.requests[0].prompt_token_ids == loop_prompt, "token for token"
    # And continuing with previous_response_id renders the same conversation as a replay of all of it.
    executor.requests.clear()
    http.post(
        "/v1/responses", json={"input": "next", "previous_response_id": response["id"], "tools": [CODE_TOOL]}
    )
    stored = executor.requests[0].prompt_token_ids
    executor.requests.clear()
    full = [user, *response["output"], {"role": "user", "content": "next"}]
    http.post("/v1/responses", json={"input": full, "tools": [CODE_TOOL], "store": False})
    assert executor.requests[0].prompt_token_ids == stored


def test_the_tool_is_shown_with_the_stateless_text(http: httpx.Client) -> None:
    response = http.post("/v1/responses", json={"input": "#prompt", "tools": [CODE_TOOL]}).json()
    prompt = response["output"][-1]["content"][0]["text"]
    assert "## python\n\n" + STATELESS_PYTHON_DESCRIPTION in prompt
    assert "stateful Jupyter" not in prompt


def test_hidden_when_the_backend_is_off(echo_server: RunningServer) -> None:
    with httpx.Client(base_url=echo_server.base_url, timeout=30) as client:
        response = client.post("/v1/responses", json={"input": "#prompt", "tools": [CODE_TOOL]}).json()
    assert "## python" not in response["output"][-1]["content"][0]["text"]


def test_openai_sdk(server: RunningServer) -> None:
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
        response = client.responses.create(
            model="gpt-oss",
            input="call python print(2 ** 10)",
            tools=[CODE_TOOL],  # type: ignore[list-item]
            include=["code_interpreter_call.outputs"],
        )
        assert response.output_text == "python returned: 1024\n"
        call = response.output[1]
        assert call.type == "code_interpreter_call" and call.outputs and call.outputs[0].type == "logs"


def test_disconnect_kills_the_running_code(http: httpx.Client, sandbox: Any) -> None:
    marker = "29.979245"  # the sandbox's pids are its own: the host finds the code by its command line
    code = f"import os; os.execv('/usr/bin/sleep', ['sleep', '{marker}'])"
    body = {"input": f"call python {code}", "tools": [CODE_TOOL], "stream": True}
    with http.stream("POST", "/v1/responses", json=body) as reply:
        lines = reply.iter_lines()  # kept referenced: the connection stays open until we leave
        for line in lines:
            if "response.code_interpreter_call.interpreting" in line:
                break
        deadline = time.monotonic() + 10
        while not host_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert host_processes(marker), "the code runs"
    assert not wait_gone(marker, 10), "the client went away: its code was killed"
    deadline = time.monotonic() + 10
    while _cgroups_left(sandbox) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _cgroups_left(sandbox)


# -- python through an MCP server ------------------------------------------------------------------


def _python_mcp() -> MCPServer:
    server = MCPServer("python-test")

    @server.tool(description="Run python code, return what it printed.")
    def python(code: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, {})  # noqa: S102 - the test's own MCP server
        return out.getvalue()

    return server


@pytest.fixture(scope="module")
def mcp_python_server(serve: ServerFactory) -> Iterator[RunningServer]:
    mcp = MCPTestServer(url="", sse_url="")
    mcp.url = _serve(_python_mcp().streamable_http_app(), mcp) + "/mcp"
    running = serve(tools=ToolSettings(python_tool=f"mcp:{mcp.url}"))
    yield running
    running.stop()
    mcp.stop()


def test_python_through_an_mcp_server(mcp_python_server: RunningServer) -> None:
    with httpx.Client(base_url=mcp_python_server.base_url, timeout=60) as client:
        body = {
            "input": "call python print(3 * 3)",
            "tools": [CODE_TOOL],
            "include": ["code_interpreter_call.outputs"],
        }
        response = check_stream(stream_events(client, body))
    call = response["output"][1]
    assert call["status"] == "completed" and call["outputs"] == [{"type": "logs", "logs": "9\n"}]
    assert call["container_id"] == "mcp"
    assert response["output"][-1]["content"][0]["text"] == "python returned: 9\n"


async def test_agents_sdk_code_interpreter_tool(server: RunningServer) -> None:
    from agents import Agent, CodeInterpreterTool, OpenAIResponsesModel, RunConfig, Runner

    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0
    ) as client:
        agent = Agent(
            name="coder",
            instructions="Compute with python.",
            model=OpenAIResponsesModel(model="gpt-oss", openai_client=client),
            tools=[
                CodeInterpreterTool(tool_config={"type": "code_interpreter", "container": {"type": "auto"}})
            ],
        )
        result = await Runner.run(
            agent, "call python print(sum(range(10)))", run_config=RunConfig(tracing_disabled=True)
        )
    assert result.final_output == "python returned: 45\n"
    assert any(getattr(item.raw_item, "type", None) == "code_interpreter_call" for item in result.new_items)
    assert len(result.raw_responses) == 1, "call, output and final in one response"


def test_tool_choice_code_interpreter_shows_python_alone(http: httpx.Client) -> None:
    function = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    body = {"input": "#prompt", "tools": [CODE_TOOL, function], "tool_choice": {"type": "code_interpreter"}}
    prompt = http.post("/v1/responses", json=body).json()["output"][-1]["content"][0]["text"]
    assert "## python" in prompt and "lookup" not in prompt
    body["tool_choice"] = {"type": "function", "name": "lookup"}
    prompt = http.post("/v1/responses", json=body).json()["output"][-1]["content"][0]["text"]
    assert "## python" not in prompt


# -- where the sandbox cannot be set up, `serve` refuses ---------------------------------------------


def test_serve_refuses_local_python_without_bubblewrap(tmp_path: Any) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "trtllm_responses.cli", "serve", "--engine", "echo", "--port", "1"]
        + ["--python_tool", "local"],
        env={**os.environ, "PATH": str(tmp_path)},  # no bwrap on PATH
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "--python_tool local needs its sandbox, and bubblewrap is not installed" in result.stderr


def test_without_a_cgroup_root_is_refused_and_others_get_rlimits(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trtllm_responses.tools import sandbox as sandbox_module

    monkeypatch.setattr(sandbox_module.CgroupParent, "find", classmethod(lambda cls: None))
    limits = PythonLimits(timeout=7.0)  # its own cache entry
    if os.geteuid() == 0:
        # The kernel does not apply RLIMIT_NPROC to root's uid: nothing would bound the processes.
        with pytest.raises(SandboxUnavailable, match="RLIMIT_NPROC"):
            setup_sandbox(limits)
    else:
        assert "no cgroup here, so each call is bounded by rlimits" in setup_sandbox(limits).describe()
