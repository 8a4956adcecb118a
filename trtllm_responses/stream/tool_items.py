"""The server-run tool transitions of a ResponseStream (``responses/tool_loop.py`` drives them).

All at message boundaries, never per token:

- ``hold_calls`` makes calls of the given item kinds stay open after their arguments are done
  (``message_ended`` holds them instead of closing them);
- ``tool_started`` / ``tool_finished`` stream the run of the held call (``response.mcp_call.in_progress``
  ... ``.completed``/``.failed``, then ``output_item.done`` with the output, then, when encrypted
  reasoning was asked for and the model read more of the item than the client is shown, a tool-read
  carrier: a reasoning item sealing the rest, see ``responses/sealing.py``);
- ``tool_item`` opens a call the model did not write in this response (an approved call);
- ``list_tools_item`` adds an ``mcp_list_tools`` item with its events;
- ``model_output`` is the output as the model read it (tool items with the fields no client
  asked for), for the next turn and the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openai.types.responses import (
    ResponseMcpCallArgumentsDeltaEvent,
    ResponseMcpCallArgumentsDoneEvent,
    ResponseMcpListToolsCompletedEvent,
    ResponseMcpListToolsFailedEvent,
    ResponseMcpListToolsInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningItem,
    ResponseStreamEvent,
)
from openai.types.responses.response_output_item import McpListTools

from ..core import to_dict
from ..harmony import ItemKind, ItemTarget, build_output_item, new_item_ids
from .events import (
    ADDED_EVENTS,
    TOOL_EVENTS,
    with_fields,
)
from .item import OpenItem, StreamStateError

__all__ = ["ToolItemTransitions"]


class ToolItemTransitions:
    """ResponseStream's transitions for server-run tool items (see the module docstring).

    A base class of :class:`~trtllm_responses.stream.response.ResponseStream`, which owns the state it uses.
    """

    _output: list[ResponseOutputItem]
    _item: OpenItem | None
    _held: OpenItem | None
    _hold: frozenset[ItemKind]
    _resolve: Callable[[ItemTarget], ItemTarget] | None
    _runs: Callable[[str], bool] | None
    _internal: dict[int, ResponseOutputItem]
    _seal_tool_read: Callable[[str, dict[str, Any]], str | None] | None

    if TYPE_CHECKING:  # ResponseStream's

        def _emit(self, event_type: type[Any], **fields: Any) -> ResponseStreamEvent: ...

        def _check_open(self) -> None: ...

        def _multi_agent_finished(
            self, item: OpenItem, arguments: str, output: str
        ) -> list[ResponseStreamEvent]: ...

    @property
    def model_output(self) -> list[ResponseOutputItem]:
        """The items done so far as the model read them: tool items with the fields no client asked for.

        What the conversation continues from (the tool loop's next turn, the stored history).
        """
        if not self._internal:
            return self._output
        return [self._internal.get(i, item) for i, item in enumerate(self._output)]

    @property
    def held(self) -> tuple[ItemTarget, str, str] | None:
        """The held tool call (target, item id, arguments), if one waits to be run."""
        item = self._held
        return None if item is None else (item.target, item.id, item.chunks.text())

    def hold_calls(
        self,
        kinds: frozenset[ItemKind],
        resolve: Callable[[ItemTarget], ItemTarget] | None = None,
        runs: Callable[[str], bool] | None = None,
    ) -> None:
        """Hold calls of ``kinds`` open when their message ends; ``resolve`` may re-target a call at its start.

        ``runs`` tells whether a recipient names a tool the server runs in this response (a stray word
        where the recipient goes is a call only to a declared tool or one of those).
        """
        self._hold = kinds
        self._resolve = resolve
        self._runs = runs

    def drop_held(self) -> tuple[ItemTarget, str]:
        """Take the held call that has no item (an undeclared function): its target and arguments."""
        item = self._require_held()
        if item.target.kind is not ItemKind.UNDECLARED_FUNCTION:
            raise StreamStateError("the held call has an item: close it with tool_finished")
        self._held = None
        return item.target, item.chunks.text()

    def tool_item(self, target: ItemTarget, arguments: str, **fields: Any) -> list[ResponseStreamEvent]:
        """Open and hold a call the model did not write in this response (an approved call)."""
        self._check_open()
        if self._item is not None or self._held is not None:
            raise StreamStateError("a tool item opened while another item is open")
        item_id, call_id = new_item_ids(target.kind)
        item = OpenItem(target, item_id, call_id, len(self._output))
        item.chunks.append(arguments)
        item.fields = fields
        self._held = item
        added = with_fields(build_output_item(target, item_id, arguments, "in_progress", call_id), fields)
        where = {"item_id": item_id, "output_index": item.output_index}
        events = [self._emit(ResponseOutputItemAddedEvent, output_index=item.output_index, item=added)]
        started = ADDED_EVENTS.get(target.kind)
        if started is not None:
            events.append(self._emit(started, **where))
        if target.kind is ItemKind.MCP_CALL:  # the arguments, streamed as for a call the model writes
            events.append(self._emit(ResponseMcpCallArgumentsDeltaEvent, delta=arguments, **where))
            events.append(self._emit(ResponseMcpCallArgumentsDoneEvent, arguments=arguments, **where))
        return events

    def tool_started(self) -> list[ResponseStreamEvent]:
        """The held call starts running."""
        item = self._require_held()
        kind_events = TOOL_EVENTS.get(item.target.kind)
        if kind_events is None:  # a multi_agent_call: the beta surface has no status events for it
            return []
        return [self._emit(kind_events[0], item_id=item.id, output_index=item.output_index)]

    def tool_finished(
        self, status: str, internal: dict[str, Any] | None = None, ran: bool = True, **fields: Any
    ) -> list[ResponseStreamEvent]:
        """The held call ended (``completed`` or ``failed``); ``fields`` (output, error…) go on its item.

        ``internal``, when given, are the fields of the item as the model read it
        (``model_output``), a superset of what the client is shown; with ``seal_tool_read``
        the fields the client is not shown follow as a tool-read carrier (its own reasoning
        item, added and done, at the next output_index).
        """
        item = self._require_held()
        self._held = None
        if item.target.kind is ItemKind.MULTI_AGENT_CALL:
            return self._multi_agent_finished(item, item.chunks.text(), str(fields.get("output", "")))
        _, completed, failed = TOOL_EVENTS.get(item.target.kind, (None, None, None))
        base = build_output_item(item.target, item.id, item.chunks.text(), status, item.call_id)
        done = with_fields(base, {**item.fields, **fields})
        if internal is not None:
            self._internal[item.output_index] = with_fields(base, {**item.fields, **internal})
        self._output.append(done)
        where = {"item_id": item.id, "output_index": item.output_index}
        events = []
        # A call that never started (``ran=False``: nobody runs it) of a kind with no failed event (web
        # search, code interpreter) gets no status event: their "completed" event would say it ran.
        ended = completed if status == "completed" else failed
        if ended is not None and (ran or status == "completed" or failed is not completed):
            events.append(self._emit(ended, **where))
        events.append(self._emit(ResponseOutputItemDoneEvent, output_index=item.output_index, item=done))
        if internal is not None and self._seal_tool_read is not None:
            hidden = [key for key, value in internal.items() if key not in fields or fields[key] != value]
            events += self._tool_read(self._internal[item.output_index], hidden)
        return events

    def _tool_read(self, read: ResponseOutputItem, hidden: list[str]) -> list[ResponseStreamEvent]:
        """The tool-read carrier after a tool item: a reasoning item sealing its ``hidden`` fields as read."""
        assert self._seal_tool_read is not None
        model = to_dict(read)
        fields = {key: model[key] for key in hidden if key in model}
        blob = self._seal_tool_read(model["type"], fields) if fields else None
        if blob is None:
            return []
        item_id, _ = new_item_ids(ItemKind.REASONING)
        index = len(self._output)
        added = ResponseReasoningItem(id=item_id, type="reasoning", summary=[], status="in_progress")
        done = ResponseReasoningItem(
            id=item_id, type="reasoning", summary=[], encrypted_content=blob, status="completed"
        )
        self._output.append(done)
        return [
            self._emit(ResponseOutputItemAddedEvent, output_index=index, item=added),
            self._emit(ResponseOutputItemDoneEvent, output_index=index, item=done),
        ]

    def _require_held(self) -> OpenItem:
        self._check_open()
        if self._held is None:
            raise StreamStateError("no tool call is held")
        return self._held

    def list_tools_item(self, item: McpListTools) -> list[ResponseStreamEvent]:
        """An ``mcp_list_tools`` item whose listing is done (``error`` set: it failed)."""
        self._check_open()
        if self._item is not None or self._held is not None:
            raise StreamStateError("a list_tools item added while another item is open")
        index = len(self._output)
        where = {"item_id": item.id, "output_index": index}
        added = item.model_copy(update={"tools": [], "error": None})
        self._output.append(item)
        return [
            self._emit(ResponseOutputItemAddedEvent, output_index=index, item=added),
            self._emit(ResponseMcpListToolsInProgressEvent, **where),
            self._emit(
                ResponseMcpListToolsFailedEvent if item.error else ResponseMcpListToolsCompletedEvent, **where
            ),
            self._emit(ResponseOutputItemDoneEvent, output_index=index, item=item),
        ]
