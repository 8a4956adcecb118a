"""Spans of server-run tool calls and of their MCP requests (docs/tracing-and-dashboards.md#tool-spans),
exported to a real OTLP receiver (tests/support/otlp_receiver.py) by servers on loopback driven over HTTP.

The MCP server is the ``mcp`` package's (tests/support/mcp_server.py), which records every JSON-RPC
message it received with its HTTP headers; in one test it runs in a process of its own with its own
OpenTelemetry instrumentation (tests/support/mcp_traced_server.py), exporting to the same receiver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from support.mcp_server import MCPTestServer, closed_port_url
from support.mcp_traced_server import SERVICE
from support.otlp_receiver import ReceivedSpan
from support.paths import ROOT, TESTS
from support.server_harness import RecordingEcho, ServerFactory, steps, stream_events
from support.stream_grammar import check_stream
from support.traced import all_text, named, one, traced

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.ops import tracing
from trtllm_responses.tools import tool_span
from trtllm_responses.tools.mcp_sdk import MCP_MAJOR
from trtllm_responses.tools.sandbox import SandboxUnavailable, setup_sandbox
from trtllm_responses.tools.settings import PythonLimits, ToolSettings
from trtllm_responses.tools.spans import McpTrace, carried_context, mcp_span

#: Text that may reach a span only when the operator opts in (the relay tool's argument and output).
MARKER = "zebra-marker-4471"


def mcp_tool(url: str) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "demo", "server_url": url, "require_approval": "never"}


def call(tool: str, **args: Any) -> str:
    return f"call demo.{tool} {json.dumps(args)}"


@contextmanager
def served(serve: ServerFactory, encoding: HarmonyEncoding, **tools: Any) -> Iterator[httpx.Client]:
    """A client of a server of its own with the tool settings ``tools``."""
    with serve(RecordingEcho(encoding), tools=ToolSettings(**tools)) as running:
        with httpx.Client(base_url=running.base_url, timeout=60) as http:
            yield http


def respond(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    return check_stream(stream_events(http, body))


def parent_of(value: str) -> tuple[str, str]:
    """(trace id, parent span id) of a W3C ``traceparent`` (its flags are the propagator's business)."""
    version, trace_id, span_id, _ = value.split("-")
    assert version == "00"
    return trace_id, span_id


def ids(span: ReceivedSpan) -> tuple[str, str]:
    return span.trace_id, span.span_id


def tool_calls_received(mcp: MCPTestServer, method: str) -> list[tuple[dict[str, str], dict[str, Any]]]:
    return [(h, m) for h, m in mcp.messages if isinstance(m, dict) and m.get("method") == method]


# -- off ---------------------------------------------------------------------------------------------


def test_off_a_tool_call_gets_the_shared_no_op() -> None:
    assert not tracing.enabled()
    scope = tool_span("demo", "add", mcp=True, call_id="mcp_1", arguments=MARKER)
    assert scope is tracing.span("anything")  # the one shared no-op, nothing built
    assert McpTrace.new("http://127.0.0.1:1/mcp") is None and carried_context() is None
    assert mcp_span("tools/call", None, "add") is scope


# -- MCP ---------------------------------------------------------------------------------------------


def test_an_mcp_call_is_an_execute_tool_span_over_its_mcp_requests(
    serve: ServerFactory, encoding: HarmonyEncoding, mcp: MCPTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    mcp.messages.clear()
    with traced(monkeypatch) as receiver:
        with served(serve, encoding, mcp_allowed_urls=(mcp.url,), tool_timeout=20.0) as http:
            response = respond(http, {"input": call("relay", text=MARKER), "tools": [mcp_tool(mcp.url)]})
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: len(named(got, "tools/call relay")) == 1)
    mcp_call = next(i for i in response["output"] if i["type"] == "mcp_call")
    assert mcp_call["output"] == MARKER
    executed = one(spans, "execute_tool relay")
    assert executed.kind == "internal" and executed.status == 0
    assert dict(executed.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "relay",
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.call.id": mcp_call["id"],
        "trtllm.mcp.server_label": "demo",
        "trtllm.tool.output_bytes": len(MARKER),
    }
    # The calls' session: initialize, then tools/call, both under the execute_tool span.
    port = int(mcp.url.split(":")[2].split("/")[0])
    called = one(spans, "tools/call relay")
    initialized = [s for s in named(spans, "initialize") if s.parent_span_id == executed.span_id]
    assert len(initialized) == 1 and called.parent_span_id == executed.span_id
    assert {called.trace_id, initialized[0].trace_id} == {executed.trace_id}
    assert called.kind == initialized[0].kind == "client"
    attributes = dict(called.attributes)
    assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == "relay"
    assert (attributes["server.address"], attributes["server.port"]) == ("127.0.0.1", port)
    assert attributes["mcp.protocol.version"] and attributes["mcp.session.id"]
    assert initialized[0].attributes["mcp.protocol.version"] == attributes["mcp.protocol.version"]
    # The listing at prepare: its own session, a tools/list request.
    (listed,) = named(spans, "tools/list")
    assert listed.kind == "client" and listed.attributes["mcp.method.name"] == "tools/list"
    assert listed.attributes["mcp.session.id"] != attributes["mcp.session.id"]
    # What the MCP server received: each request's trace context, in params._meta and its HTTP headers.
    ((headers, message),) = tool_calls_received(mcp, "tools/call")
    assert parent_of(message["params"]["_meta"]["traceparent"]) == ids(called)
    assert headers["traceparent"] == message["params"]["_meta"]["traceparent"]
    # tools/list: ours at prepare, and (mcp 2.x) the SDK's own in the calls' session, fetching the tool's
    # output schema inside our tools/call: each names the span it was made in.
    listings = tool_calls_received(mcp, "tools/list")
    assert [parent_of(m["params"]["_meta"]["traceparent"]) for _, m in listings] == [
        ids(listed),
        ids(called),
    ][: len(listings)]
    assert all(h["traceparent"] == m["params"]["_meta"]["traceparent"] for h, m in listings)
    if MCP_MAJOR >= 2:  # the SDK injects the current context into initialize's _meta itself
        initialize = [
            parent_of(m["params"]["_meta"]["traceparent"]) for _, m in tool_calls_received(mcp, "initialize")
        ]
        assert ids(initialized[0]) in initialize
    assert MARKER not in all_text(spans)  # no argument or output text by default


def test_arguments_and_results_only_when_the_operator_opts_in(
    serve: ServerFactory, encoding: HarmonyEncoding, mcp: MCPTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with traced(monkeypatch, capture=True) as receiver:
        with served(serve, encoding, mcp_allowed_urls=(mcp.url,), tool_timeout=20.0) as http:
            respond(http, {"input": call("relay", text=MARKER), "tools": [mcp_tool(mcp.url)]})
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: len(named(got, "execute_tool relay")) == 1)
    executed = one(spans, "execute_tool relay")
    assert json.loads(executed.attributes["gen_ai.tool.call.arguments"]) == {"text": MARKER}
    assert executed.attributes["gen_ai.tool.call.result"] == MARKER


def test_failed_calls_say_how_they_failed(
    serve: ServerFactory, encoding: HarmonyEncoding, mcp: MCPTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = steps(call("boom"), call("not_listed"), call("sleep", seconds=30), "Done.")
    with traced(monkeypatch) as receiver:
        with served(serve, encoding, mcp_allowed_urls=(mcp.url,), tool_timeout=1.5) as http:
            response = respond(http, {"input": script, "tools": [mcp_tool(mcp.url)]})
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: len(named(got, "execute_tool sleep")) == 1)
    assert [i["status"] for i in response["output"] if i["type"] == "mcp_call"] == ["failed"] * 3
    boom, refused, slept = (one(spans, f"execute_tool {name}") for name in ("boom", "not_listed", "sleep"))
    assert boom.attributes["error.type"] == "tool_error" and boom.status == 2  # isError: true
    assert refused.attributes["error.type"] == "-32602"  # not listed: refused before any request
    assert slept.attributes["error.type"] == "timeout"
    called = {s.attributes["gen_ai.tool.name"]: s for s in spans if s.name.startswith("tools/call")}
    assert sorted(called) == ["boom", "sleep"]  # the refused call made no request
    assert called["boom"].attributes["error.type"] == "tool_error" and called["boom"].status == 2
    assert called["sleep"].attributes["error.type"] == "cancelled"  # the loop's timeout cut it
    assert called["sleep"].parent_span_id == slept.span_id


def test_a_server_that_cannot_be_reached_fails_its_initialize(
    serve: ServerFactory, encoding: HarmonyEncoding, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = closed_port_url()
    with traced(monkeypatch) as receiver:
        with served(serve, encoding, mcp_allowed_urls=(url,), tool_timeout=10.0) as http:
            response = respond(http, {"input": "Hi", "tools": [mcp_tool(url)]})
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: bool(named(got, "initialize")))
    assert response["output"][0]["type"] == "mcp_list_tools" and response["output"][0]["error"]
    initialized = one(spans, "initialize")
    assert initialized.attributes["error.type"] == "ConnectError" and initialized.status == 2
    assert not named(spans, "tools/list")  # no session: no listing request


@pytest.fixture
def traced_mcp_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any]]:
    """Tracing on here, and the test MCP server in a process of its own tracing to the same receiver."""
    with traced(monkeypatch) as receiver:
        env = {**os.environ, **receiver.env(), "PYTHONPATH": f"{ROOT}:{TESTS}"}
        script = TESTS / "support" / "mcp_traced_server.py"
        with subprocess.Popen(
            [sys.executable, str(script)], stdout=subprocess.PIPE, env=env, text=True
        ) as proc:
            try:
                assert proc.stdout is not None
                yield proc.stdout.readline().strip(), receiver
            finally:
                proc.terminate()
                proc.wait(timeout=30)


def test_an_instrumented_mcp_server_continues_the_trace(
    serve: ServerFactory, encoding: HarmonyEncoding, traced_mcp_server: tuple[str, Any]
) -> None:
    url, receiver = traced_mcp_server
    with served(serve, encoding, mcp_allowed_urls=(url,), tool_timeout=20.0) as http:
        response = respond(http, {"input": call("add", a=2, b=3), "tools": [mcp_tool(url)]})
    assert response["output"][-1]["content"][0]["text"] == "demo.add returned: 5"

    def server_side(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        return [s for s in spans if s.resource.get("service.name") == SERVICE and s.name == "tools/call add"]

    tracing.shutdown()
    spans = receiver.wait_for(lambda got: bool(server_side(got)) and bool(named(got, "tools/call add")))
    (ours,) = [s for s in named(spans, "tools/call add") if s.resource.get("service.name") != SERVICE]
    (theirs,) = server_side(spans)
    assert theirs.kind == "server" and theirs.trace_id == ours.trace_id
    assert theirs.parent_span_id == ours.span_id  # the MCP server's span is our request span's child


# -- gpt-oss's built-in tools -----------------------------------------------------------------------


def test_a_browser_call_refused_by_the_address_guard(
    serve: ServerFactory, encoding: HarmonyEncoding, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"input": 'call browser.open {"id": "http://127.0.0.1:9/"}', "tools": [{"type": "web_search"}]}
    with traced(monkeypatch) as receiver:
        with served(serve, encoding, browser_backend="searxng:http://127.0.0.1:9", tool_timeout=10.0) as http:
            response = respond(http, body)
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: bool(named(got, "execute_tool browser.open")))
    assert [i["status"] for i in response["output"] if i["type"] == "web_search_call"] == ["failed"]
    opened = one(spans, "execute_tool browser.open")
    assert opened.attributes["error.type"] == "url_refused" and opened.status == 2
    assert opened.attributes["gen_ai.tool.type"] == "extension"
    assert "trtllm.mcp.server_label" not in opened.attributes
    assert opened.attributes["trtllm.tool.output_bytes"] > 0  # the refusal the model reads


def test_a_python_call(
    serve: ServerFactory, encoding: HarmonyEncoding, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = PythonLimits(timeout=5.0, cpu_seconds=2, memory_bytes=256 << 20, output_bytes=2000)
    try:
        setup_sandbox(limits)
    except SandboxUnavailable as exc:
        pytest.skip(f"the python sandbox cannot be set up here: {exc}")
    tools = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    with traced(monkeypatch) as receiver:
        with served(serve, encoding, python_tool="local", python_limits=limits, tool_timeout=20.0) as http:
            respond(http, {"input": f"call python print('{MARKER}')", "tools": tools})
            respond(http, {"input": "call python raise SystemExit(3)", "tools": tools})
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: len(named(got, "execute_tool python")) == 2)
    printed, exited = named(spans, "execute_tool python")
    assert printed.attributes["trtllm.tool.output_bytes"] == len(MARKER) + 1 and printed.status == 0
    assert exited.attributes["error.type"] == "exit_status"
    assert MARKER not in all_text(spans)


def test_captured_arguments_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """With content captured, a tool call's arguments in its span are cut at CONTENT_MAX_CHARS (the budget
    docs/limits.md states), a shorter one kept whole."""
    from trtllm_responses.tools.spans import CONTENT_MAX_CHARS, tool_span

    long, short = "x" * (CONTENT_MAX_CHARS + 500), '{"a": 1}'
    with traced(monkeypatch, capture=True) as receiver:
        with tool_span("fn", "big", mcp=False, call_id="c1", arguments=long):
            pass
        with tool_span("fn", "small", mcp=False, call_id="c2", arguments=short):
            pass
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: len(got) >= 2)
    big, small = one(spans, "execute_tool fn.big"), one(spans, "execute_tool fn.small")
    assert big.attributes["gen_ai.tool.call.arguments"] == "x" * CONTENT_MAX_CHARS + "…"
    assert small.attributes["gen_ai.tool.call.arguments"] == short
