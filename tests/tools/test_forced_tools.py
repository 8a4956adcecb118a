"""``tool_choice`` forcing the tools the server runs: python, the browser, an MCP server.

A real server on loopback (the echo executor, which obeys the request's constraint as
TensorRT-LLM's guided decoding would: a required call is the first allowed tool's), with
python ``local``, the loopback search site (tests/support/search_site.py) and an MCP server served by the test.
Each forced response is checked three ways: its stream (check_stream), its items, and the
constraint each generation of the tool loop carried (the first requires the chosen tool's
call, later turns are free again, or keep the structured-output format).

The same constraints compiled by xgrammar, as TensorRT-LLM compiles them, are in
tests/constraints/test_guided_xgrammar.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.mcp_server import MCPTestServer
from support.search_site import serve_search_site
from support.server_harness import RecordingEcho, RunningServer, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.core.errors import InvalidRequestError
from trtllm_responses.executors.base import GenerationRequest
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.tools.python_tool import PythonLimits
from trtllm_responses.tools.settings import ToolSettings

CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
WEB_TOOL = {"type": "web_search"}
LOOKUP = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
ANSWER_FORMAT = {
    "format": {
        "type": "json_schema",
        "name": "answer",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    }
}


@pytest.fixture(scope="module")
def search() -> Iterator[str]:
    with serve_search_site() as url:
        yield url


@pytest.fixture(scope="module")
def echo(encoding: HarmonyEncoding) -> RecordingEcho:
    return RecordingEcho(encoding)


@pytest.fixture(scope="module")
def server_options(search: str, mcp: MCPTestServer, echo: RecordingEcho) -> dict[str, Any]:
    settings = ToolSettings(
        python_tool="local",
        python_limits=PythonLimits(timeout=10.0, cpu_seconds=5, memory_bytes=256 << 20, output_bytes=2000),
        browser_backend=f"searxng:{search}",
        browser_offline_backend=f"searxng:{search}",  # as scripts/openresponses_compliance.py serves it
        fetch_allow_private=("127.0.0.1",),
        mcp_allowed_urls=(mcp.url,),
        tool_timeout=20.0,
    )
    return {"executor": echo, "tools": settings}


def streamed(
    http: httpx.Client, echo: RecordingEcho, body: dict[str, Any]
) -> tuple[dict[str, Any], list[GenerationRequest]]:
    """The response of a streamed create (its stream checked), and the generations it ran."""
    before = len(echo.requests)
    response = check_stream(stream_events(http, body))
    return response, echo.requests[before:]


def required_recipients(generation: GenerationRequest) -> list[str]:
    constraint = generation.constraint
    assert constraint is not None and constraint.call_required
    return [call.recipient for call in constraint.calls]


def mcp_tool(url: str) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "demo", "server_url": url, "require_approval": "never"}


def test_code_interpreter_choice_forces_a_python_call(http: httpx.Client, echo: RecordingEcho) -> None:
    body: dict[str, Any] = {
        "input": "print(6 * 7)",
        "tools": [CODE_TOOL, LOOKUP],
        "include": ["code_interpreter_call.outputs"],
    }
    free, _ = streamed(http, echo, {**body, "tools": [CODE_TOOL]})
    assert [item["type"] for item in free["output"]] == ["reasoning", "message"], "unforced: the echo answers"

    response, generations = streamed(http, echo, {**body, "tool_choice": {"type": "code_interpreter"}})
    assert response["status"] == "completed"
    call = next(item for item in response["output"] if item["type"] == "code_interpreter_call")
    assert call["code"] == "print(6 * 7)" and call["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert response["output"][-1]["content"][0]["text"] == "python returned: 42\n"
    assert response["tool_choice"] == {"type": "code_interpreter"}
    assert required_recipients(generations[0]) == ["python"]
    assert generations[0].constraint.calls[0].channel == "analysis"  # type: ignore[union-attr]
    assert [g.constraint for g in generations[1:]] == [None], "the call was made: the next turn is free"


def test_web_search_choice_forces_a_browser_call(http: httpx.Client, echo: RecordingEcho) -> None:
    body = {"input": "spring tides", "tools": [WEB_TOOL, LOOKUP], "tool_choice": {"type": "web_search"}}
    response, generations = streamed(http, echo, body)
    call = next(item for item in response["output"] if item["type"] == "web_search_call")
    assert call["status"] == "completed" and call["action"]["type"] == "search"
    assert call["action"]["query"] == "spring tides"
    assert response["output"][-1]["content"][0]["text"].startswith("browser.search returned: ")
    # The SDK's ToolChoiceTypes has no "web_search": the choice is its web_search_preview, echoed so.
    assert response["tool_choice"] == {"type": "web_search_preview"}
    assert required_recipients(generations[0]) == ["browser.search", "browser.open", "browser.find"]
    assert generations[1].constraint is None


def test_mcp_choice_forces_a_call_to_that_server(
    http: httpx.Client, echo: RecordingEcho, mcp: MCPTestServer
) -> None:
    body = {
        "input": "hello there",
        "tools": [mcp_tool(mcp.url), LOOKUP],
        "tool_choice": {"type": "mcp", "server_label": "demo", "name": "relay"},
    }
    response, generations = streamed(http, echo, body)
    call = next(item for item in response["output"] if item["type"] == "mcp_call")
    assert call["name"] == "relay" and json.loads(call["arguments"]) == {"text": "hello there"}
    assert call["output"] == "hello there"
    assert required_recipients(generations[0]) == ["demo.relay"]
    assert response["output"][-1]["content"][0]["text"] == "demo.relay returned: hello there"


def test_required_choice_with_only_server_run_tools(http: httpx.Client, echo: RecordingEcho) -> None:
    body = {"input": "print(2 + 2)", "tools": [CODE_TOOL], "tool_choice": "required"}
    response, generations = streamed(http, echo, body)
    assert any(item["type"] == "code_interpreter_call" for item in response["output"])
    assert required_recipients(generations[0]) == ["python"]


def test_allowed_tools_required_can_name_a_built_in_tool(http: httpx.Client, echo: RecordingEcho) -> None:
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "code_interpreter"}]}
    body = {"input": "print(1)", "tools": [CODE_TOOL, WEB_TOOL, LOOKUP], "tool_choice": choice}
    response, generations = streamed(http, echo, body)
    assert any(item["type"] == "code_interpreter_call" for item in response["output"])
    assert required_recipients(generations[0]) == ["python"]


def test_structured_output_holds_across_the_tool_loop(http: httpx.Client, echo: RecordingEcho) -> None:
    body = {
        "input": "print(5)",
        "tools": [CODE_TOOL],
        "tool_choice": {"type": "code_interpreter"},
        "text": ANSWER_FORMAT,
    }
    response, generations = streamed(http, echo, body)
    assert json.loads(response["output"][-1]["content"][0]["text"]) == {"answer": "python returned: 5\n"}
    first, after = generations[0].constraint, generations[1].constraint
    assert first is not None and first.call_required
    assert after is not None and after.final == "json" and after.schema == ANSWER_FORMAT["format"]["schema"]
    # The format's constraint still lets the model call the tools it is shown (python here).
    assert [call.recipient for call in after.calls] == ["python"]


def test_sdk_client_forces_code_interpreter(server: RunningServer) -> None:
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
        response = client.responses.create(
            model="gpt-oss",
            input="print(sum(range(5)))",
            tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
            tool_choice={"type": "code_interpreter"},
            include=["code_interpreter_call.outputs"],
        )
    calls = [item for item in response.output if item.type == "code_interpreter_call"]
    assert len(calls) == 1 and calls[0].outputs and calls[0].outputs[0].logs == "10\n"  # type: ignore[union-attr]
    assert response.output_text == "python returned: 10\n"


def test_sdk_client_offline_web_search_as_the_compliance_suite_sends_it(server: RunningServer) -> None:
    """The Open Responses suite's ``offline-web-search`` case (revision 18e5656, src/lib/compliance-tests.ts):
    ``web_search`` with ``external_web_access: false``, forced, sources included. The offline index
    (``--browser_offline_backend``, here the same loopback stand-in) answers it; the tool comes back as sent."""
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
        # the SDK types neither external_web_access nor a "web_search" tool choice; the suite sends both
        response = client.responses.create(  # type: ignore[call-overload]
            model="gpt-oss",
            input="Find the most relevant cached result for OpenResponses.",
            tools=[{"type": "web_search", "external_web_access": False}],
            tool_choice={"type": "web_search"},
            include=["web_search_call.action.sources"],
        )
    assert response.status == "completed"
    calls = [item for item in response.output if item.type == "web_search_call"]
    assert len(calls) == 1 and calls[0].status == "completed"
    action = calls[0].action
    assert action.type == "search"
    urls = [source.url for source in action.sources or []]  # type: ignore[union-attr]
    assert [url.rsplit("/", 1)[-1] for url in urls] == ["tides", "neap"]  # the search site's two results
    assert response.tools[0].model_dump(exclude_none=True) == {
        "type": "web_search",
        "external_web_access": False,
    }
    assert response.output[-1].type == "message"


@pytest.mark.parametrize(
    ("tools", "choice"),
    [
        ([], {"type": "code_interpreter"}),  # not declared
        ([LOOKUP], {"type": "web_search"}),  # not declared
    ],
)
def test_forcing_a_tool_not_declared_is_a_400(http: httpx.Client, tools: list[Any], choice: Any) -> None:
    reply = http.post("/v1/responses", json={"input": "x", "tools": tools, "tool_choice": choice})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "tool_choice" and error["type"] == "invalid_request_error"


def test_forcing_a_built_in_tool_the_server_does_not_run_is_an_error(adapter: HarmonyAdapter) -> None:
    request = parse_request(
        json.dumps({"input": "x", "tools": [CODE_TOOL], "tool_choice": {"type": "code_interpreter"}})
    )
    with pytest.raises(InvalidRequestError) as raised:
        adapter.build_prompt(request, builtin={})  # the operator left --python_tool off
    assert raised.value.param == "tool_choice" and "--python_tool" in raised.value.message
    prompt = adapter.build_prompt(request, builtin={"python": "the python tool"})
    assert prompt.constraint is not None and [c.recipient for c in prompt.constraint.calls] == ["python"]


@pytest.mark.parametrize(
    ("choice", "required"),
    [
        ({"type": "function", "name": "lookup"}, ["functions.lookup"]),
        (
            {"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search"}]},
            ["browser.search", "browser.open", "browser.find"],
        ),
        ("none", None),
    ],
)
def test_the_choice_decides_which_built_in_tools_are_shown(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding, choice: Any, required: list[str] | None
) -> None:
    """The adapter applies the same narrowing as the service (tool_choice.builtin_types_shown), whoever calls it."""
    body = {"input": "x", "tools": [CODE_TOOL, WEB_TOOL, LOOKUP], "tool_choice": choice}
    prompt = adapter.build_prompt(
        parse_request(json.dumps(body)), builtin={"python": "Run python.", "browser": "Browse."}
    )
    system = encoding.decode(list(prompt.system.tokens))
    assert ("## python" in system) is False
    assert ("## browser" in system) is (required is not None and required[0].startswith("browser"))
    if required is None:
        assert prompt.constraint is None
    else:
        assert prompt.constraint is not None and [c.recipient for c in prompt.constraint.calls] == required
