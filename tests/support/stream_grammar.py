"""A reusable checker of Responses event-stream grammar. Every stream in the tests goes through it.

``check_stream(events)`` asserts, and returns the terminal response:

- sequence numbers start at 0 and rise by 1;
- ``response.created`` then ``response.in_progress`` open the stream; exactly one
  terminal event (completed / incomplete / failed) closes it;
- output items are added in output_index order 0, 1, 2…, one open at a time, each
  closed by ``output_item.done`` with the same id; nothing touches an item after its done;
- ``response.compaction.compacting`` comes only inside a ``compaction`` item;
- content parts are added and done in pairs with content_index 0 inside their item;
- deltas concatenate to their done text (output text, reasoning text, function
  arguments, code, MCP arguments), and the done item carries that text;
- server-run tool items: ``mcp_list_tools`` items carry ``.in_progress`` then ``.completed``
  (no ``error``) or ``.failed`` (an ``error``); a run ``mcp_call`` carries ``.in_progress`` after
  its arguments are done (a call refused without running has only ``.failed``), then
  ``.completed``/``.failed`` agreeing with the done item's status
  (a failed tool call is an item status, never a failed response);
- reasoning summaries: inside a reasoning item, after its text part is done, each summary part is
  ``reasoning_summary_part.added`` (summary_index 0, 1, 2…, empty text), its
  ``reasoning_summary_text.delta``s, ``.done`` (their concatenation), ``reasoning_summary_part.done``
  (the same text), in that order; the done item's ``summary`` holds exactly those texts;
- ``output_text.annotation.added`` comes inside an open output_text part, numbered 0, 1, 2… per
  item, after the text it annotates was streamed; the done part and item carry the same annotations,
  each pointing inside the text;
- the terminal response's output equals the done items (ids, call ids, content),
  its id is the created id, and its status agrees with the terminal event;
- every event validates as the SDK's ResponseStreamEvent (and against the spec
  for the event types it lists); the terminal response as the spec's ResponseResource.
"""

from __future__ import annotations

from typing import Any

from support.contract import validate_event, validate_response

TERMINAL = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
DELTA_DONE = {
    "response.output_text.delta": ("response.output_text.done", "text"),
    "response.reasoning_text.delta": ("response.reasoning_text.done", "text"),
    "response.function_call_arguments.delta": ("response.function_call_arguments.done", "arguments"),
    "response.code_interpreter_call_code.delta": ("response.code_interpreter_call_code.done", "code"),
    "response.mcp_call_arguments.delta": ("response.mcp_call_arguments.done", "arguments"),
    "response.custom_tool_call_input.delta": ("response.custom_tool_call_input.done", "input"),
}
DONE_TYPES = {done: field for done, field in DELTA_DONE.values()}
#: Tool-run status events: event type → (the item type it belongs to, the phase it reports).
TOOL_STATUS = {
    "response.mcp_list_tools.in_progress": ("mcp_list_tools", "in_progress"),
    "response.mcp_list_tools.completed": ("mcp_list_tools", "completed"),
    "response.mcp_list_tools.failed": ("mcp_list_tools", "failed"),
    "response.mcp_call.in_progress": ("mcp_call", "in_progress"),
    "response.mcp_call.completed": ("mcp_call", "completed"),
    "response.mcp_call.failed": ("mcp_call", "failed"),
    "response.code_interpreter_call.in_progress": ("code_interpreter_call", "in_progress"),
    "response.code_interpreter_call.interpreting": ("code_interpreter_call", "running"),
    "response.code_interpreter_call.completed": ("code_interpreter_call", "completed"),
    "response.web_search_call.in_progress": ("web_search_call", "in_progress"),
    "response.web_search_call.searching": ("web_search_call", "running"),
    "response.web_search_call.completed": ("web_search_call", "completed"),
}
#: Item types whose failure is the item's own status inside a completed response.
TOOL_ITEMS = {"mcp_call", "code_interpreter_call", "web_search_call"}
#: Built-in tool items: ``.in_progress`` right after ``output_item.added``; when the server runs them,
#: ``.interpreting``/``.searching`` (after the code is done) then ``.completed`` (the item's status says
#: whether the run failed: these items have no failed event).
BUILTIN_ITEMS = {"code_interpreter_call", "web_search_call"}


def _item_text(item: dict[str, Any]) -> str | None:
    kind = item["type"]
    if kind == "message":
        return "".join(part.get("text", part.get("refusal", "")) for part in item["content"])
    if kind == "reasoning":
        return "".join(part["text"] for part in item.get("content") or [])
    if kind in ("function_call", "mcp_call", "mcp_approval_request"):
        return item["arguments"]
    if kind == "custom_tool_call":
        return item["input"]
    if kind == "code_interpreter_call":
        return item.get("code") or ""
    return None


def check_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Assert the grammar of a whole stream; return the terminal response."""
    assert events, "empty stream"
    for i, event in enumerate(events):
        assert event["sequence_number"] == i, f"sequence_number {event['sequence_number']} at position {i}"
        validate_event(event)
    assert events[0]["type"] == "response.created" and events[1]["type"] == "response.in_progress"
    created = events[0]["response"]
    assert created["status"] == "in_progress" and created["output"] == []
    terminals = [e for e in events if e["type"] in TERMINAL]
    assert len(terminals) == 1 and events[-1] is terminals[0], "exactly one terminal event, last"

    open_item: dict[str, Any] | None = None
    open_part: int | None = None
    done_items: list[dict[str, Any]] = []
    deltas: dict[str, list[str]] = {}
    for event in events[2:-1]:
        kind = event["type"]
        if kind == "response.output_item.added":
            assert open_item is None, "an item was added while another is open"
            assert event["output_index"] == len(done_items), "output_index out of order"
            open_item = event["item"]
            assert open_item["id"], "empty item id"
            assert open_item.get("status") in (None, "in_progress")
            deltas = {}
            summaries: list[str] = []  # done summary parts
            summary_open: list[str] | None = None  # the open summary part's deltas
            summary_text: str | None = None  # its done text
            phases: list[str] = []
            annotations: list[dict[str, Any]] = []
            continue
        assert open_item is not None, f"{kind} outside an item"
        if "output_index" in event:
            assert event["output_index"] == len(done_items), f"{kind} for another output_index"
        if "item_id" in event:
            assert event["item_id"] == open_item["id"], f"{kind} for item {event['item_id']}"
        if kind.startswith("response.reasoning_summary_"):
            assert open_item["type"] == "reasoning", f"{kind} outside a reasoning item"
            assert open_part is None, f"{kind} while a content part is open"
            assert event["summary_index"] == len(summaries), f"{kind}: summary_index out of order"
            if kind == "response.reasoning_summary_part.added":
                assert summary_open is None and event["part"] == {"type": "summary_text", "text": ""}
                summary_open, summary_text = [], None
            elif kind == "response.reasoning_summary_text.delta":
                assert summary_open is not None and summary_text is None, "summary delta outside its part"
                summary_open.append(event["delta"])
            elif kind == "response.reasoning_summary_text.done":
                assert summary_open is not None and summary_text is None
                assert "".join(summary_open) == event["text"], "summary deltas do not add up"
                summary_text = event["text"]
            elif kind == "response.reasoning_summary_part.done":
                assert summary_text is not None, "summary part done before its text"
                assert event["part"]["text"] == summary_text
                summaries.append(summary_text)
                summary_open, summary_text = None, None
            else:
                raise AssertionError(f"unexpected event {kind}")
        elif kind == "response.content_part.added":
            assert open_part is None and event["content_index"] == 0
            assert event["part"]["text"] == ""
            open_part = event["content_index"]
        elif kind == "response.content_part.done":
            assert open_part == event["content_index"]
            if event["part"]["type"] == "output_text":
                assert event["part"]["annotations"] == annotations, "the done part's annotations differ"
            open_part = None
        elif kind == "response.output_text.annotation.added":
            assert open_part == event["content_index"] == 0, "annotation outside its content part"
            assert event["annotation_index"] == len(annotations), "annotation_index out of order"
            annotation = event["annotation"]
            streamed_text = "".join(deltas.get("response.output_text.done", []))
            assert 0 <= annotation["start_index"] <= annotation["end_index"] <= len(streamed_text)
            annotations.append(annotation)
        elif kind in DELTA_DONE:
            if open_item["type"] in ("message", "reasoning"):
                assert open_part == event["content_index"], "delta outside its content part"
            deltas.setdefault(DELTA_DONE[kind][0], []).append(event["delta"])
        elif kind in DONE_TYPES:
            field = DONE_TYPES[kind]
            assert "".join(deltas.get(kind, [])) == event[field], f"{kind}: deltas do not add up"
            deltas[kind + "!"] = [event[field]]
        elif kind == "response.compaction.compacting":
            assert open_item["type"] == "compaction", "compacting outside a compaction item"
        elif kind in TOOL_STATUS:
            item_type, phase = TOOL_STATUS[kind]
            assert open_item["type"] == item_type, f"{kind} on a {open_item['type']} item"
            if item_type in BUILTIN_ITEMS:
                expected = {
                    "in_progress": [],
                    "running": ["in_progress"],
                    "completed": ["in_progress", "running"],
                }
                assert phases == expected[phase], f"{kind} after {phases}"
                if phase == "in_progress":
                    assert not deltas, f"{kind} after the code started"
                elif item_type == "code_interpreter_call":
                    assert "response.code_interpreter_call_code.done!" in deltas, (
                        "ran before its code was done"
                    )
            elif phase == "in_progress":
                assert not phases, f"{kind} twice or after the end"
                if item_type == "mcp_call":
                    assert "response.mcp_call_arguments.done!" in deltas, (
                        "the call ran before its arguments were done"
                    )
            elif item_type == "mcp_call" and phase == "failed" and not phases:
                assert "response.mcp_call_arguments.done!" in deltas  # refused without running (a limit)
            else:
                assert phases == ["in_progress"], f"{kind} without in_progress"
            phases.append(phase)
        elif kind == "response.output_item.done":
            assert open_part is None, "item done while a content part is open"
            assert summary_open is None, "item done while a summary part is open"
            item = event["item"]
            if item["type"] == "reasoning":
                assert [s["text"] for s in item["summary"]] == summaries, "the done item's summary differs"
            if item["type"] == "mcp_list_tools":
                assert phases in (["in_progress", "completed"], ["in_progress", "failed"]), phases
                assert (phases[-1] == "failed") == bool(item.get("error")), "list_tools status vs error"
            if item["type"] == "mcp_call" and phases:
                assert phases[-1] != "in_progress", "a tool call that started never ended"
                assert item["status"] == phases[-1], "the tool's end event disagrees with the item"
                assert (item["status"] == "failed") == (item.get("error") is not None)
            if item["type"] in BUILTIN_ITEMS:
                assert phases[:1] == ["in_progress"], f"{item['type']} without .in_progress"
                if len(phases) > 1:  # run by the server
                    assert phases == ["in_progress", "running", "completed"], phases
                    assert item["status"] in ("completed", "failed"), item["status"]
            assert item["id"] == open_item["id"] and item["type"] == open_item["type"]
            if item["type"] == "function_call":
                assert item["call_id"] == open_item["call_id"] and item["name"] == open_item["name"]
                assert item["call_id"], "empty call_id"
            if item["type"] == "message":
                assert [a for part in item["content"] for a in part.get("annotations", [])] == annotations
            text = _item_text(item)
            done_texts = [v[0] for k, v in deltas.items() if k.endswith("!")]
            if text is not None and done_texts:
                assert done_texts == [text], "the done item disagrees with its done event"
            done_items.append(item)
            open_item = None
        else:
            raise AssertionError(f"unexpected event {kind} inside an item")
    assert open_item is None, "an item was never done"

    terminal = events[-1]
    response = terminal["response"]
    validate_response(response)
    assert response["id"] == created["id"]
    # A cancelled background response ends with response.failed carrying status "cancelled"
    # (the SDK has no response.cancelled event), as retrieve and cancel return it.
    assert response["status"] == TERMINAL[terminal["type"]] or (
        terminal["type"] == "response.failed" and response["status"] == "cancelled"
    )
    assert response["output"] == done_items, "the final response's output differs from the streamed items"
    if response["status"] == "completed":
        assert response["incomplete_details"] is None and response["error"] is None
        assert all(
            item.get("status") in (None, "completed")
            or (item["type"] in TOOL_ITEMS and item["status"] == "failed")
            for item in done_items
        )
        assert response["completed_at"] is not None
    elif response["status"] == "incomplete":
        assert response["incomplete_details"]["reason"]
    elif response["status"] == "failed":
        assert response["error"]["message"]
    assert (
        response["usage"]["total_tokens"]
        == response["usage"]["input_tokens"] + response["usage"]["output_tokens"]
    )
    return response
