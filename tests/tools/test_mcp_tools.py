"""Remote MCP tools run by the server, inside one response, against a real MCP server on loopback.

The MCP server is the ``mcp`` package's MCPServer (tests/support/mcp_server.py) over
streamable HTTP and SSE; our server is the echo executor behind uvicorn, driven
with the openai SDK, httpx and the Agents SDK. Every stream goes through
check_stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from support.mcp_server import SLEEP_LOG, MCPTestServer, SilentServer, closed_port_url
from support.server_harness import RecordingEcho, RunningServer, ServerFactory, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.tools.settings import ToolSettings, url_allowed

SECRET = "Bearer sekret-4711"


def _origin(url: str) -> str:
    return url.rsplit("/", 1)[0]


@pytest.fixture(scope="module")
def server_options(mcp: MCPTestServer, encoding: HarmonyEncoding) -> dict[str, Any]:
    settings = ToolSettings(
        mcp_allowed_urls=(_origin(mcp.url) + "/mcp", _origin(mcp.sse_url)),
        tool_servers=(("configured", mcp.url),),
        tool_timeout=20.0,  # generous: a loaded machine must not time out ordinary calls
        tool_output_max_bytes=1000,
    )
    return {"executor": RecordingEcho(encoding), "tools": settings}


@pytest.fixture
def client(server: RunningServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


def mcp_tool(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "demo", "server_url": url, "require_approval": "never", **extra}


def call(tool: str, **args: Any) -> str:
    return f"call demo.{tool} {json.dumps(args)}"


def types_of(response: dict[str, Any]) -> list[str]:
    return [item["type"] for item in response["output"]]


def streamed(http: httpx.Client, body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events = stream_events(http, body)
    return check_stream(events), events


@contextmanager
def served_with(
    serve: ServerFactory, encoding: HarmonyEncoding, tools: ToolSettings
) -> Iterator[httpx.Client]:
    """A client of a server of its own whose operator configured ``tools`` (a service's tool settings are
    fixed for its life)."""
    with serve(RecordingEcho(encoding), tools=tools) as running:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            yield client


# -- the loop ----------------------------------------------------------------------------------


def test_call_output_final_in_one_streamed_response(http: httpx.Client, mcp: MCPTestServer) -> None:
    response, events = streamed(http, {"input": call("add", a=2, b=3), "tools": [mcp_tool(mcp.url)]})
    assert response["status"] == "completed"
    assert types_of(response) == ["mcp_list_tools", "reasoning", "mcp_call", "reasoning", "message"]
    listing, _, mcp_call, _, message = response["output"]
    assert listing["server_label"] == "demo" and "add" in [t["name"] for t in listing["tools"]]
    assert mcp_call["name"] == "add" and mcp_call["server_label"] == "demo"
    assert json.loads(mcp_call["arguments"]) == {"a": 2, "b": 3}
    assert mcp_call["output"] == "5" and mcp_call["status"] == "completed" and mcp_call["error"] is None
    assert message["content"][0]["text"] == "demo.add returned: 5"
    kinds = [e["type"] for e in events]
    for expected in (
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
    ):
        assert expected in kinds, expected
    assert kinds.index("response.mcp_call_arguments.done") < kinds.index("response.mcp_call.in_progress")
    assert kinds.index("response.mcp_call.in_progress") < kinds.index("response.mcp_call.completed")


def test_openai_sdk_non_streamed_and_streamed(client: openai.OpenAI, mcp: MCPTestServer) -> None:
    tools: Any = [mcp_tool(mcp.url)]
    response = client.responses.create(model="gpt-oss", input=call("add", a=1, b=1), tools=tools)
    assert response.status == "completed" and response.output_text == "demo.add returned: 2"
    mcp_call = next(item for item in response.output if item.type == "mcp_call")
    assert mcp_call.output == "2"
    with client.responses.create(model="gpt-oss", input=call("add", a=4, b=4), tools=tools, stream=True) as s:
        events = [e.model_dump(mode="json", exclude_unset=True) for e in s]
    final = check_stream(events)
    assert final["output"][-1]["content"][0]["text"] == "demo.add returned: 8"


def test_sse_transport_for_older_servers(http: httpx.Client, mcp: MCPTestServer) -> None:
    response, _ = streamed(http, {"input": call("add", a=5, b=5), "tools": [mcp_tool(mcp.sse_url)]})
    assert response["output"][2]["output"] == "10"
    assert response["output"][-1]["content"][0]["text"] == "demo.add returned: 10"


def test_operator_configured_tool_server(http: httpx.Client) -> None:
    tool = {"type": "mcp", "server_label": "configured", "require_approval": "never"}
    response, _ = streamed(http, {"input": 'call configured.add {"a": 1, "b": 2}', "tools": [tool]})
    assert response["output"][2]["output"] == "3"


def test_usage_sums_every_turn_and_prompts_extend_each_other(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    executor.requests.clear()
    response, _ = streamed(http, {"input": call("add", a=2, b=2), "tools": [mcp_tool(mcp.url)]})
    first, second = (r.prompt_token_ids for r in executor.requests)
    assert second[: len(first)] == first, "the second turn's prompt extends the first"
    usage = response["usage"]
    assert usage["input_tokens"] == len(first) + len(second)
    assert executor.requests[1].request_id.startswith(response["id"])
    assert executor.requests[0].request_id != executor.requests[1].request_id


def test_stateless_replay_renders_the_prompt_the_loop_saw(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    tools = [mcp_tool(mcp.url)]
    user = {"role": "user", "content": call("add", a=3, b=4)}
    executor.requests.clear()
    response, _ = streamed(http, {"input": [user], "tools": tools})
    loop_prompt = executor.requests[1].prompt_token_ids
    # Replay the items the loop had when it generated its second turn: listing, reasoning, call + output.
    executor.requests.clear()
    replay = {"input": [user, *response["output"][:3]], "tools": tools, "store": False}
    replayed, _ = streamed(http, replay)
    assert executor.requests[0].prompt_token_ids == loop_prompt, "token for token"
    assert "mcp_list_tools" not in types_of(replayed), "the replayed listing is reused"


def test_continuing_after_the_loop_renders_what_a_replay_renders(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    tools = [mcp_tool(mcp.url)]
    user = {"role": "user", "content": call("relay", text=call("add", a=1, b=1))}
    first, _ = streamed(http, {"input": [user], "tools": tools})
    assert first["output"][-1]["content"][0]["text"] == "demo.add returned: 2"
    follow_up = {"role": "user", "content": "thanks"}
    executor.requests.clear()
    continued, _ = streamed(http, {"previous_response_id": first["id"], "input": [follow_up], "tools": tools})
    stored_prompt = executor.requests[0].prompt_token_ids
    executor.requests.clear()
    replay = {"input": [user, *first["output"], follow_up], "tools": tools, "store": False}
    streamed(http, replay)
    assert executor.requests[0].prompt_token_ids == stored_prompt, "token for token"
    assert continued["output"][-1]["content"][0]["text"] == "thanks"
    assert "mcp_list_tools" not in types_of(continued)


def test_chained_calls_and_max_tool_calls(http: httpx.Client, mcp: MCPTestServer) -> None:
    relay = call("relay", text=call("add", a=1, b=2))
    response, _ = streamed(http, {"input": relay, "tools": [mcp_tool(mcp.url)]})
    assert types_of(response) == [
        "mcp_list_tools", "reasoning", "mcp_call", "reasoning", "mcp_call", "reasoning", "message",
    ]  # fmt: skip
    assert [i.get("output") for i in response["output"] if i["type"] == "mcp_call"] == [
        call("add", a=1, b=2),
        "3",
    ]

    limited, _ = streamed(http, {"input": relay, "tools": [mcp_tool(mcp.url)], "max_tool_calls": 1})
    assert limited["status"] == "completed" and limited["max_tool_calls"] == 1
    refused = [i for i in limited["output"] if i["type"] == "mcp_call"][1]
    assert refused["status"] == "failed" and "max_tool_calls" in refused["error"]["message"]
    assert limited["output"][-1]["content"][0]["text"].startswith(
        "demo.add returned: Error: This response has"
    )


def test_token_budget_across_turns_ends_incomplete(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    executor.requests.clear()
    body = {"input": call("add", a=2, b=3), "tools": [mcp_tool(mcp.url)], "max_output_tokens": 40}
    response, _ = streamed(http, body)
    assert response["status"] == "incomplete"
    assert response["incomplete_details"]["reason"] == "max_output_tokens"
    assert response["usage"]["output_tokens"] == 40, "max_output_tokens counts every turn"
    first, second = executor.requests
    assert first.sampling.max_tokens == 40 and 0 < second.sampling.max_tokens < 40


# -- approvals ----------------------------------------------------------------------------------


def test_approval_round_trip_and_list_tools_reuse(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    tools = [mcp_tool(mcp.url, require_approval="always")]
    first, _ = streamed(http, {"input": call("add", a=20, b=22), "tools": tools})
    assert first["status"] == "completed"
    assert types_of(first) == ["mcp_list_tools", "reasoning", "mcp_approval_request"]
    request = first["output"][-1]
    assert request["name"] == "add" and request["id"].startswith("mcpr_")

    approval = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    executor.requests.clear()
    second, events = streamed(
        http, {"previous_response_id": first["id"], "input": [approval], "tools": tools}
    )
    assert types_of(second) == ["mcp_call", "reasoning", "message"], "no second listing: it is reused"
    mcp_call = second["output"][0]
    assert mcp_call["approval_request_id"] == request["id"] and mcp_call["output"] == "42"
    assert second["output"][-1]["content"][0]["text"] == "demo.add returned: 42"
    assert "response.mcp_list_tools.in_progress" not in [e["type"] for e in events]
    stored_prompt = executor.requests[0].prompt_token_ids

    # The same continuation replayed statelessly renders the same prompt.
    executor.requests.clear()
    replay = [{"role": "user", "content": call("add", a=20, b=22)}, *first["output"], approval]
    streamed(http, {"input": replay, "tools": tools, "store": False})
    assert executor.requests[0].prompt_token_ids == stored_prompt


def test_declined_approval_tells_the_model(http: httpx.Client, mcp: MCPTestServer) -> None:
    tools = [mcp_tool(mcp.url, require_approval={"always": {"tool_names": ["add"]}})]
    first, _ = streamed(http, {"input": call("add", a=1, b=1), "tools": tools})
    request = first["output"][-1]
    assert request["type"] == "mcp_approval_request"
    approval = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": False}
    second, _ = streamed(http, {"previous_response_id": first["id"], "input": [approval], "tools": tools})
    assert types_of(second) == ["reasoning", "message"]
    assert second["output"][-1]["content"][0]["text"] == (
        "demo.add returned: Error: the user did not approve this tool call."
    )


def test_per_tool_never_runs_without_approval(http: httpx.Client, mcp: MCPTestServer) -> None:
    tools = [mcp_tool(mcp.url, require_approval={"never": {"tool_names": ["add"]}})]
    response, _ = streamed(http, {"input": call("add", a=1, b=1), "tools": tools})
    assert response["output"][2]["output"] == "2"


def test_unknown_approval_request_id_is_a_400(http: httpx.Client, mcp: MCPTestServer) -> None:
    approval = {"type": "mcp_approval_response", "approval_request_id": "mcpr_nope", "approve": True}
    reply = http.post("/v1/responses", json={"input": [approval], "tools": [mcp_tool(mcp.url)]})
    assert reply.status_code == 400 and "mcpr_nope" in reply.json()["error"]["message"]


# -- secrets and the allow-list -------------------------------------------------------------------


def test_headers_reach_the_mcp_server_and_nowhere_else(
    http: httpx.Client, mcp: MCPTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    mcp.headers.clear()
    tools = [mcp_tool(mcp.url, headers={"Authorization": SECRET})]
    with caplog.at_level("DEBUG"):
        response, events = streamed(http, {"input": call("add", a=1, b=2), "tools": tools})
    assert any(h.get("authorization") == SECRET for h in mcp.headers), "the MCP server got the header"
    assert SECRET not in json.dumps(events)
    assert response["tools"][0]["headers"] is None
    stored = http.get(f"/v1/responses/{response['id']}")
    assert stored.status_code == 200 and "sekret" not in stored.text
    assert "sekret" not in caplog.text


def test_disallowed_urls_are_a_400_that_says_how_to_enable(http: httpx.Client, mcp: MCPTestServer) -> None:
    for url in (
        "http://127.0.0.1:1/mcp",
        "http://169.254.169.254/latest/meta-data",
        _origin(mcp.url) + "/other",
        _origin(mcp.url) + "/mcp/../admin",
        _origin(mcp.url).replace("http://", "http://user@") + "/mcp",
        "file:///etc/passwd",
    ):
        reply = http.post("/v1/responses", json={"input": "hi", "tools": [mcp_tool(url)]})
        assert reply.status_code == 400, url
        error = reply.json()["error"]
        assert "--mcp_allowed_urls" in error["message"] and error["param"] == "tools[0].server_url"


def test_no_allowed_urls_by_default(serve: ServerFactory, mcp: MCPTestServer) -> None:
    running = serve()
    try:
        reply = httpx.post(
            running.base_url + "/v1/responses", json={"input": "hi", "tools": [mcp_tool(mcp.url)]}
        )
        assert reply.status_code == 400 and "--mcp_allowed_urls" in reply.json()["error"]["message"]
    finally:
        running.stop()


def test_url_allowed_compares_parsed_urls() -> None:
    prefixes = ("http://127.0.0.1:8080/mcp",)
    assert url_allowed("http://127.0.0.1:8080/mcp", prefixes)
    assert url_allowed("http://127.0.0.1:8080/mcp/x", prefixes)
    assert not url_allowed("http://127.0.0.1:80801/mcp", prefixes)
    assert not url_allowed("http://127.0.0.1:8080/mcpx", prefixes)
    assert not url_allowed("https://127.0.0.1:8080/mcp", prefixes)
    assert not url_allowed("http://127.0.0.1:8080@evil.example/mcp", prefixes)
    assert not url_allowed("http://localhost:8080/mcp", prefixes)
    assert url_allowed("https://mcp.example.com/anything", ("https://mcp.example.com",))


# -- failure modes: a clean item, the model reads it, the response completes ---------------------------


def test_unreachable_server(serve: ServerFactory, encoding: HarmonyEncoding, server: RunningServer) -> None:
    url = closed_port_url()
    assert not url_allowed(url, server.app.state.service.tool_settings.mcp_allowed_urls)
    # The operator's own server for label "down" is down.
    tool = {"type": "mcp", "server_label": "down", "require_approval": "never"}
    with served_with(serve, encoding, ToolSettings(tool_servers=(("down", url),), tool_timeout=3.0)) as http:
        response, events = streamed(http, {"input": 'call down.add {"a": 1}', "tools": [tool]})
        assert http.get("/health").status_code == 200
    assert response["status"] == "completed"
    listing = response["output"][0]
    assert listing["type"] == "mcp_list_tools" and "could not connect" in listing["error"]
    assert "response.mcp_list_tools.failed" in [e["type"] for e in events]
    failed = response["output"][2]
    assert failed["type"] == "mcp_call" and failed["status"] == "failed"
    assert "not available" in failed["error"]["message"]


def test_listing_timeout(serve: ServerFactory, encoding: HarmonyEncoding) -> None:
    silent = SilentServer()
    try:
        with served_with(
            serve, encoding, ToolSettings(tool_servers=(("slow", silent.url),), tool_timeout=1.0)
        ) as http:
            started = time.monotonic()
            tool = {"type": "mcp", "server_label": "slow", "require_approval": "never"}
            response, _ = streamed(http, {"input": "hello", "tools": [tool]})
            assert time.monotonic() - started < 30
    finally:
        silent.stop()
    listing = response["output"][0]
    assert "timed out" in listing["error"] and listing["tools"] == []
    assert response["output"][-1]["content"][0]["text"] == "hello"


def test_tool_that_raises(http: httpx.Client, mcp: MCPTestServer) -> None:
    response, events = streamed(http, {"input": call("boom"), "tools": [mcp_tool(mcp.url)]})
    failed = response["output"][2]
    assert failed["status"] == "failed" and failed["output"] is None
    assert failed["error"]["type"] == "mcp_tool_execution_error"
    assert "response.mcp_call.failed" in [e["type"] for e in events]
    assert response["status"] == "completed"
    assert (
        response["output"][-1]["content"][0]["text"] == "demo.boom returned: Error: Error executing tool boom"
    )


def test_tool_timeout(
    serve: ServerFactory, encoding: HarmonyEncoding, server: RunningServer, mcp: MCPTestServer
) -> None:
    allowed = server.app.state.service.tool_settings.mcp_allowed_urls
    with served_with(serve, encoding, ToolSettings(mcp_allowed_urls=allowed, tool_timeout=1.0)) as http:
        response, _ = streamed(http, {"input": call("sleep", seconds=30), "tools": [mcp_tool(mcp.url)]})
    failed = response["output"][2]
    assert failed["status"] == "failed" and "timed out after 1 s" in failed["error"]["message"]
    assert response["status"] == "completed"
    assert response["output"][-1]["content"][0]["text"].startswith(
        "demo.sleep returned: Error: The tool call timed"
    )


def test_oversized_output_is_truncated_with_a_note(http: httpx.Client, mcp: MCPTestServer) -> None:
    response, _ = streamed(http, {"input": call("big", n=5000), "tools": [mcp_tool(mcp.url)]})
    output = response["output"][2]["output"]
    assert output.startswith("x" * 1000) and "[output truncated: 5000 bytes" in output
    assert response["output"][-1]["content"][0]["text"] == f"demo.big returned: {output}"


def test_tool_not_listed(http: httpx.Client, mcp: MCPTestServer) -> None:
    tools = [mcp_tool(mcp.url, allowed_tools=["add"])]
    response, _ = streamed(http, {"input": call("secret_tool"), "tools": tools})
    assert [t["name"] for t in response["output"][0]["tools"]] == ["add"]
    failed = response["output"][2]
    assert failed["status"] == "failed" and "not available" in failed["error"]["message"]


def test_allowed_tools_read_only(http: httpx.Client, mcp: MCPTestServer) -> None:
    tools = [mcp_tool(mcp.url, allowed_tools={"read_only": True})]
    response, _ = streamed(http, {"input": call("add", a=1, b=1), "tools": tools})
    listed = response["output"][0]["tools"]
    assert [t["name"] for t in listed] == ["add"] and listed[0]["annotations"]["readOnlyHint"] is True
    assert response["output"][2]["output"] == "2"


def test_malformed_arguments(http: httpx.Client, mcp: MCPTestServer) -> None:
    response, _ = streamed(http, {"input": "call demo.add {not json}", "tools": [mcp_tool(mcp.url)]})
    failed = response["output"][2]
    assert failed["status"] == "failed" and "not valid JSON" in failed["error"]["message"]
    assert response["status"] == "completed"


def test_disconnect_aborts_the_running_tool(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    seconds = 2.75  # this test's own call
    SLEEP_LOG.pop(seconds, None)
    body = {"input": call("sleep", seconds=seconds), "tools": [mcp_tool(mcp.url)], "stream": True}
    with http.stream("POST", "/v1/responses", json=body) as reply:
        lines = reply.iter_lines()  # kept referenced: the connection stays open until we leave
        for line in lines:
            if "response.mcp_call.in_progress" in line:
                break
        deadline = time.monotonic() + 10
        while not SLEEP_LOG.get(seconds) and time.monotonic() < deadline:  # the tool runs on the MCP server
            time.sleep(0.02)
        assert SLEEP_LOG[seconds] == ["started"]
    # The client is gone: the tool call is cancelled (the MCP server sees it), no generation runs.
    deadline = time.monotonic() + 10
    while SLEEP_LOG[seconds][-1:] != ["cancelled"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert SLEEP_LOG[seconds] == ["started", "cancelled"]
    assert not server.executor._running  # type: ignore[attr-defined]
    check = http.post("/v1/responses", json={"input": "still here"}).json()
    assert check["output"][-1]["content"][0]["text"] == "still here"


def test_cancelling_a_background_response_cancels_its_running_tool(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    seconds = 15.25  # far longer than the cancel may take
    SLEEP_LOG.pop(seconds, None)
    body = {"input": call("sleep", seconds=seconds), "tools": [mcp_tool(mcp.url)], "background": True}
    created = http.post("/v1/responses", json=body).json()
    deadline = time.monotonic() + 10
    while not SLEEP_LOG.get(seconds) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert SLEEP_LOG[seconds] == ["started"]
    began = time.monotonic()
    cancelled = http.post(f"/v1/responses/{created['id']}/cancel").json()
    assert time.monotonic() - began < seconds / 2, "the cancel did not wait for the tool call"
    assert cancelled["status"] == "cancelled"
    call_item = next(item for item in cancelled["output"] if item["type"] == "mcp_call")
    assert call_item["status"] == "failed" and "cancelled" in call_item["error"]["message"]
    assert [item["type"] for item in cancelled["output"]][-1] == "mcp_call", "no generation after the cancel"
    deadline = time.monotonic() + 10
    while SLEEP_LOG[seconds][-1:] != ["cancelled"] and time.monotonic() < deadline:  # the MCP server saw it
        time.sleep(0.05)
    assert SLEEP_LOG[seconds] == ["started", "cancelled"]
    assert http.get(f"/v1/responses/{created['id']}").json()["status"] == "cancelled"


# -- the Agents SDK ------------------------------------------------------------------------------


async def test_agents_sdk_hosted_mcp_tool(server: RunningServer, mcp: MCPTestServer) -> None:
    from agents import Agent, HostedMCPTool, OpenAIResponsesModel, RunConfig, Runner

    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0
    ) as client:
        agent = Agent(
            name="mcp",
            instructions="Use the demo server.",
            model=OpenAIResponsesModel(model="gpt-oss", openai_client=client),
            tools=[HostedMCPTool(tool_config=mcp_tool(mcp.url))],  # type: ignore[arg-type]
        )
        result = await Runner.run(agent, call("add", a=6, b=7), run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "demo.add returned: 13"
    kinds = [item.type for item in result.new_items]
    assert "mcp_list_tools_item" in kinds and "tool_call_item" in kinds
    assert len(result.raw_responses) == 1, "call, output and final in one response"


async def test_agents_sdk_hosted_mcp_approval(server: RunningServer, mcp: MCPTestServer) -> None:
    from agents import Agent, HostedMCPTool, OpenAIResponsesModel, RunConfig, Runner

    asked: list[str] = []

    def approve(request: Any) -> dict[str, Any]:
        asked.append(request.data.name)
        return {"approve": True}

    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0
    ) as client:
        agent = Agent(
            name="mcp",
            model=OpenAIResponsesModel(model="gpt-oss", openai_client=client),
            tools=[
                HostedMCPTool(
                    tool_config=mcp_tool(mcp.url, require_approval="always"),  # type: ignore[arg-type]
                    on_approval_request=approve,  # type: ignore[arg-type]
                )
            ],
        )
        result = await Runner.run(agent, call("add", a=1, b=2), run_config=RunConfig(tracing_disabled=True))
    assert asked == ["add"]
    assert result.final_output == "demo.add returned: 3"


# -- the TensorRT-LLM executor (fake LLM API) -------------------------------------------------------


def test_loop_turns_are_separate_generate_async_calls_whose_prompts_extend(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory, mcp: MCPTestServer
) -> None:
    from trtllm_responses.executors.trtllm import TrtllmExecutor

    executor = TrtllmExecutor(
        {"model": "/ckpt/gpt-oss-tiny", "kv_cache_config": {"enable_block_reuse": True}},
        end_id=encoding.return_,
    )
    settings = ToolSettings(mcp_allowed_urls=(mcp.url,), tool_timeout=10.0)
    running = serve(executor, tools=settings)
    try:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            relay = call("relay", text=call("add", a=2, b=5))
            response = check_stream(stream_events(client, {"input": relay, "tools": [mcp_tool(mcp.url)]}))
        llm = executor._llm
        assert llm is not None
        prompts = llm.prompts  # one per generate_async call
        assert len(prompts) == 3, "three turns: relay, add, final"
        for earlier, later in zip(prompts, prompts[1:], strict=False):
            assert later[: len(earlier)] == earlier, "each turn's prompt extends the previous one"
    finally:
        running.stop()
    assert response["output"][-1]["content"][0]["text"] == "demo.add returned: 7"
    usage = response["usage"]
    assert usage["input_tokens"] == sum(len(p) for p in prompts)
    # Block reuse: turn 2 reuses at least turn 1's prompt, turn 3 turn 2's (whole 32-token blocks; a finished
    # turn stores its output's blocks too, and the never-reused last prompt token bounds it).
    cached = usage["input_tokens_details"]["cached_tokens"]
    assert sum((len(p) // 32) * 32 for p in prompts[:2]) <= cached <= sum(len(p) - 1 for p in prompts[1:])
    # What the engine had to compute: the rest of the prompt tokens.
    details = usage["input_tokens_details"]
    assert details["cache_write_tokens"] == usage["input_tokens"] - details["cached_tokens"] > 0


def test_serve_flags() -> None:
    from trtllm_responses.cli.command import build_parser
    from trtllm_responses.cli.serve_options import server_config

    args = build_parser().parse_args(
        [
            "serve",
            "--mcp_allowed_urls",
            "http://127.0.0.1:9000/mcp,https://mcp.example.com",
            "--tool_server",
            "calc=http://10.0.0.5:9000/mcp",
            "--tool_timeout",
            "5",
            "--tool_output_max_bytes",
            "2048",
        ]
    )
    tools = server_config(args).tools
    assert tools.mcp_allowed_urls == ("http://127.0.0.1:9000/mcp", "https://mcp.example.com")
    assert tools.tool_server("calc") == "http://10.0.0.5:9000/mcp" and tools.tool_server("other") is None
    assert tools.tool_timeout == 5.0 and tools.tool_output_max_bytes == 2048
    assert build_parser().parse_args(["serve"]).mcp_allowed_urls == []
    for bad in (["--tool_server", "nolabel"], ["--mcp_allowed_urls", "ftp://x"], ["--tool_timeout", "0"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["serve", *bad])


def test_a_final_message_before_a_call_is_rendered_back_by_harmony_rules(
    http: httpx.Client, server: RunningServer, mcp: MCPTestServer
) -> None:
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    completion = (
        "#harmony\n<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>"
        "Checking.<|end|><|start|>assistant to=demo.add<|channel|>commentary <|constrain|>json<|message|>"
        '{"a": 1, "b": 2}<|call|>'
    )
    user = {"role": "user", "content": completion}
    tools = [mcp_tool(mcp.url)]
    executor.requests.clear()
    response, _ = streamed(http, {"input": [user], "tools": tools})
    assert types_of(response) == [
        "mcp_list_tools",
        "reasoning",
        "message",
        "mcp_call",
        "reasoning",
        "message",
    ]
    assert response["output"][-1]["content"][0]["text"] == "demo.add returned: 3"
    loop_prompt = executor.requests[1].prompt_token_ids
    executor.requests.clear()
    streamed(http, {"input": [user, *response["output"][:4]], "tools": tools, "store": False})
    assert executor.requests[0].prompt_token_ids == loop_prompt


def test_approving_without_the_mcp_tool_is_a_400(http: httpx.Client) -> None:
    items = [
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "demo",
            "name": "add",
            "arguments": "{}",
        },
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    ]
    reply = http.post("/v1/responses", json={"input": items})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "tools"


def test_tool_choice_mcp_shows_only_that_server_or_tool(http: httpx.Client, mcp: MCPTestServer) -> None:
    tools = [mcp_tool(mcp.url), {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    body = {
        "input": "#prompt",
        "tools": tools,
        "tool_choice": {"type": "mcp", "server_label": "demo", "name": "add"},
    }
    prompt = http.post("/v1/responses", json=body).json()["output"][-1]["content"][0]["text"]
    assert "namespace demo {" in prompt and "type add = " in prompt
    assert "type boom = " not in prompt and "get_weather" not in prompt
    body["tool_choice"] = {"type": "mcp", "server_label": "demo", "name": "nope"}
    reply = http.post("/v1/responses", json=body)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "tool_choice.name"


def test_http_error_from_the_mcp_server(
    serve: ServerFactory, encoding: HarmonyEncoding, mcp: MCPTestServer
) -> None:
    gone = ToolSettings(tool_servers=(("gone", _origin(mcp.url) + "/no-such-endpoint"),))
    with served_with(serve, encoding, gone) as http:
        tool = {"type": "mcp", "server_label": "gone", "require_approval": "never"}
        response, events = streamed(http, {"input": "hello", "tools": [tool]})
    assert "Not Found" in response["output"][0]["error"]
    assert "response.mcp_list_tools.failed" in [e["type"] for e in events]
    assert response["status"] == "completed"


def test_truncate_output_cuts_on_a_character_boundary() -> None:
    from trtllm_responses.tools.base import truncate_output

    assert truncate_output("short", 10) == "short"
    cut = truncate_output("é" * 10, 5)  # 20 bytes of UTF-8
    assert cut.startswith("éé\n") and "[output truncated: 20 bytes, over the limit of 5 bytes]" in cut
