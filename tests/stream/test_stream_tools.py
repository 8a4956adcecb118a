"""ResponseStream's server-run tool transitions, and the grammar checker's rules for them (it must fail)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from openai.types.responses import Response
from openai.types.responses.response_output_item import McpListTools, McpListToolsTool
from support.stream_grammar import check_stream

from trtllm_responses.core.wire import to_dict
from trtllm_responses.harmony.items import ItemKind, ItemTarget
from trtllm_responses.harmony.parser import MessageHeader
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.responses.prepared import initial_response
from trtllm_responses.stream import ResponseStream, StreamStateError, make_usage


def snapshot() -> Response:
    """The in_progress response the service would start from (its own snapshot builder)."""
    return initial_response("resp_test", parse_request({"input": "x"}), "m")


ADD = ItemTarget(ItemKind.MCP_CALL, name="add", namespace="demo")


def loop_events(failed: bool = False) -> list[dict[str, Any]]:
    """A stream: a listing, a model-written call that is held, run and finished, then completion."""
    stream = ResponseStream(snapshot())
    stream.hold_calls(frozenset({ItemKind.MCP_CALL}))
    events = stream.start()
    tool = McpListToolsTool(name="add", input_schema={"type": "object"})
    events += stream.list_tools_item(
        McpListTools(id="mcpl_1", type="mcp_list_tools", server_label="demo", tools=[tool])
    )
    events += stream.message_started(
        MessageHeader(role="assistant", channel="commentary", recipient="demo.add")
    )
    events += stream.content_delta('{"a": 1}')
    events += stream.message_ended("completed")
    assert stream.held is not None and stream.held[0] == ADD
    events += stream.tool_started()
    if failed:
        error = {"type": "mcp_protocol_error", "code": -32001, "message": "timed out"}
        events += stream.tool_finished("failed", output=None, error=error)
    else:
        events += stream.tool_finished("completed", output="2", error=None)
    events += stream.complete(make_usage(10, 5, 0, 0))
    return [to_dict(e) for e in events]


def test_the_loop_transitions_make_a_valid_stream() -> None:
    response = check_stream(loop_events())
    assert [i["type"] for i in response["output"]] == ["mcp_list_tools", "mcp_call"]
    assert response["output"][1]["output"] == "2"
    failed = check_stream(loop_events(failed=True))
    assert failed["status"] == "completed" and failed["output"][1]["status"] == "failed"


def test_an_approved_call_streams_its_arguments() -> None:
    stream = ResponseStream(snapshot())
    events = stream.start()
    events += stream.tool_item(ADD, '{"a": 1}', approval_request_id="mcpr_1")
    events += stream.tool_started()
    events += stream.tool_finished("completed", output="1", error=None)
    events += stream.complete(make_usage(1, 1, 0, 0))
    response = check_stream([to_dict(e) for e in events])
    assert response["output"][0]["approval_request_id"] == "mcpr_1"


def test_a_held_call_is_closed_incomplete_if_the_response_fails() -> None:
    stream = ResponseStream(snapshot())
    stream.hold_calls(frozenset({ItemKind.MCP_CALL}))
    events = stream.start()
    events += stream.message_started(
        MessageHeader(role="assistant", channel="commentary", recipient="demo.add")
    )
    events += stream.message_ended("completed")
    events += stream.fail("boom", make_usage(1, 1, 0, 0))
    response = check_stream([to_dict(e) for e in events])
    assert response["output"][0]["status"] == "incomplete"


def test_illegal_tool_transitions_raise() -> None:
    stream = ResponseStream(snapshot())
    stream.start()
    with pytest.raises(StreamStateError):
        stream.tool_started()
    stream.tool_item(ADD, "{}")
    with pytest.raises(StreamStateError):
        stream.tool_item(ADD, "{}")


def _without(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    out = [copy.deepcopy(e) for e in events if e["type"] != kind]
    for i, event in enumerate(out):
        event["sequence_number"] = i
    return out


@pytest.mark.parametrize(
    "broken",
    [
        lambda ev: _without(ev, "response.mcp_list_tools.in_progress"),
        lambda ev: _without(ev, "response.mcp_list_tools.completed"),
        lambda ev: _without(ev, "response.mcp_call.completed"),
        lambda ev: [
            {**e, "type": "response.mcp_call.failed"} if e["type"] == "response.mcp_call.completed" else e
            for e in ev
        ],
    ],
)
def test_the_checker_rejects_broken_tool_streams(broken: Any) -> None:
    with pytest.raises(AssertionError):
        check_stream(broken(loop_events()))


def test_a_tool_read_carrier_follows_the_item_the_client_sees_less_of() -> None:
    from trtllm_responses.responses.sealing import ContentSealer, unseal_items

    sealer = ContentSealer(b"t" * 32)
    stream = ResponseStream(snapshot(), sealer.seal_reasoning, seal_tool_read=sealer.seal_tool_read)
    stream.hold_calls(frozenset({ItemKind.WEB_SEARCH_CALL}))
    events = stream.start()
    events += stream.message_started(
        MessageHeader(role="assistant", channel="analysis", recipient="browser.search")
    )
    events += stream.content_delta('{"query": "tides"}')
    events += stream.message_ended("completed")
    events += stream.tool_started()
    read = {
        "model_read": "[0] tides\nL0: Tides explained",
        "browser_page": {"url": "", "title": "tides", "text": "x"},
    }
    events += stream.tool_finished("completed", internal=read)
    # Nothing hidden (internal equal to what is shown): no carrier.
    events += stream.message_started(
        MessageHeader(role="assistant", channel="analysis", recipient="browser.find")
    )
    events += stream.content_delta('{"pattern": "moon"}')
    events += stream.message_ended("completed")
    events += stream.tool_started()
    events += stream.tool_finished("completed")
    events += stream.complete(make_usage(10, 5, 0, 0))
    response = check_stream([to_dict(e) for e in events])
    output = response["output"]
    assert [i["type"] for i in output] == ["web_search_call", "reasoning", "web_search_call"]
    carrier = output[1]
    assert carrier["summary"] == [] and "content" not in carrier and carrier["id"].startswith("rs_")
    assert "model_read" not in output[0]
    assert [to_dict(i) for i in stream.model_output][0]["model_read"] == read["model_read"]
    opened = unseal_items([output[0], carrier], sealer)
    assert opened[0] == {**output[0], **read} and opened[1] == {"type": "reasoning", "summary": []}
