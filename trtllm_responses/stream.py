"""ResponseStream: Harmony transitions in, typed Responses stream events out.

A transport-free state machine. It holds one current item (kind, ids,
output_index) and the items already done, and stamps every event with the next
``sequence_number`` in one place (``_emit``). Its methods map 1:1 to what the
Harmony parser reports and to how a generation ends:

    start()                 → response.created, response.in_progress
    message_started(header) → output_item.added (+ content_part.added)
    content_delta(text)     → output_text / reasoning_text / function_call_arguments / … .delta
    message_ended(status)   → … .done (+ content_part.done), output_item.done
                              (a server-run tool call is held open instead, see below)
    complete(usage)         → response.completed
    incomplete(usage)       → response.incomplete  (max_output_tokens, or steered at a message boundary)
    fail(message, usage)    → response.failed

Server-run tools (``tool_loop.py``) use a few more, all at message boundaries:
``hold_calls`` makes calls of the given item kinds stay open after their
arguments are done; ``tool_started`` / ``tool_finished`` stream the run of the
held call (``response.mcp_call.in_progress`` … ``.completed``/``.failed``, then
``output_item.done`` with the output, then, when encrypted reasoning was asked for and
the model read more of the item than the client is shown, a tool-read carrier: a
reasoning item sealing the rest, see ``sealing.py``); ``tool_item`` opens a call the model did
not write in this response (an approved call); ``list_tools_item`` adds an
``mcp_list_tools`` item with its events. ``rewrite_messages`` installs a per-message text
rewriter (the browser's citations → ``url_citation`` annotations, streamed as
``response.output_text.annotation.added``); ``model_output`` is the output as the model
read it (tool items with the fields no client asked for, for the next turn and the store).

Each returns the list of events it caused; an illegal transition raises
:class:`StreamStateError`. The final response is assembled from the items the
stream emitted, so ids in the stream and in the final response always agree.

:class:`TokenStreamProcessor` drives a ResponseStream from executor token deltas
through the Harmony parser, and counts usage.
"""

from __future__ import annotations

import time
import typing
from collections.abc import Callable
from typing import Any

from openai.types.responses import (
    Response,
    ResponseCodeInterpreterCallCodeDeltaEvent,
    ResponseCodeInterpreterCallCodeDoneEvent,
    ResponseCodeInterpreterCallCompletedEvent,
    ResponseCodeInterpreterCallInProgressEvent,
    ResponseCodeInterpreterCallInterpretingEvent,
    ResponseCompactionItem,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseCustomToolCallInputDeltaEvent,
    ResponseCustomToolCallInputDoneEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseMcpCallArgumentsDeltaEvent,
    ResponseMcpCallArgumentsDoneEvent,
    ResponseMcpCallCompletedEvent,
    ResponseMcpCallFailedEvent,
    ResponseMcpCallInProgressEvent,
    ResponseMcpListToolsCompletedEvent,
    ResponseMcpListToolsFailedEvent,
    ResponseMcpListToolsInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputText,
    ResponseOutputTextAnnotationAddedEvent,
    ResponseReasoningItem,
    ResponseReasoningTextDeltaEvent,
    ResponseReasoningTextDoneEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
    ResponseWebSearchCallCompletedEvent,
    ResponseWebSearchCallInProgressEvent,
    ResponseWebSearchCallSearchingEvent,
)
from openai.types.responses.response import IncompleteDetails
from openai.types.responses.response_compaction_compacting_event import ResponseCompactionCompactingEvent
from openai.types.responses.response_content_part_added_event import PartReasoningText as AddedReasoningPart
from openai.types.responses.response_content_part_done_event import PartReasoningText as DoneReasoningPart
from openai.types.responses.response_error import ResponseError
from openai.types.responses.response_output_item import McpListTools
from openai.types.responses.response_output_text import AnnotationURLCitation
from openai.types.responses.response_output_text_annotation_added_event import (
    AnnotationURLCitation as AddedURLCitation,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

from .errors import HarmonyFormatError
from .executors.base import TokenDelta
from .harmony.encoding import HarmonyEncoding
from .harmony.items import ItemKind, ItemTarget, build_output_item, classify, new_item_ids
from .harmony.parser import ContentDelta, HarmonyStreamParser, MessageHeader, MessageStarted
from .harmony.tools import RequestTools
from .tools.base import TextRewriter
from .wire import to_dict

__all__ = ["ResponseStream", "StreamStateError", "TokenStreamProcessor", "make_usage"]


class StreamStateError(RuntimeError):
    """A transition that the stream's state does not allow (a bug in the caller)."""


class _Item:
    """The item being streamed, and the fixed fields of its delta events (computed once per item)."""

    __slots__ = (
        "call_id",
        "chunks",
        "delta_fields",
        "delta_type",
        "fields",
        "id",
        "output_index",
        "rewriter",
        "target",
    )

    def __init__(self, target: ItemTarget, item_id: str, call_id: str | None, output_index: int) -> None:
        self.target = target
        self.id = item_id
        self.call_id = call_id
        self.output_index = output_index
        self.chunks: list[str] = []
        self.fields: dict[str, Any] = {}  # extra fields of the done item (tool items)
        self.rewriter: TextRewriter | None = None  # messages: rewrites their text (citations)
        self.delta_type: type[Any] | None = _DELTA_EVENTS.get(target.kind)
        fields: dict[str, Any] = {}
        if self.delta_type is not None:
            fields = {
                "type": _event_type_name(self.delta_type),
                "item_id": item_id,
                "output_index": output_index,
            }
            if target.kind in (ItemKind.MESSAGE, ItemKind.REASONING):
                fields["content_index"] = 0
            if target.kind is ItemKind.MESSAGE:
                fields["logprobs"] = []
        self.delta_fields = fields


def make_usage(
    input_tokens: int, output_tokens: int, reasoning_tokens: int, cached_tokens: int
) -> ResponseUsage:
    """A Responses usage object."""
    return ResponseUsage(
        input_tokens=input_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=cached_tokens, cache_write_tokens=0),
        output_tokens=output_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning_tokens),
        total_tokens=input_tokens + output_tokens,
    )


class ResponseStream:
    """The event state machine of one response. ``response`` is its initial (in_progress) snapshot.

    ``tools`` are the request's tools, which decide what a call becomes (a namespaced
    function call, a custom tool call).
    """

    def __init__(
        self,
        response: Response,
        seal_reasoning: Callable[[str], str] | None = None,
        redact_reasoning: bool = False,
        tools: RequestTools | None = None,
        seal_tool_read: Callable[[str, dict[str, Any]], str | None] | None = None,
    ) -> None:
        self._response = response
        self._tools = tools
        # Reasoning items get ``encrypted_content`` from ``seal_reasoning``; redacted, they stream no text.
        self._seal_reasoning = seal_reasoning
        self._redact_reasoning = redact_reasoning
        # Given (encrypted reasoning asked for): a tool item the client sees less of than the model
        # read is followed by a tool-read carrier (sealing.py), so a stateless replay reads it all.
        self._seal_tool_read = seal_tool_read
        self._sequence = 0
        self._started = False
        self._terminal: Response | None = None
        self._item: _Item | None = None
        self._output: list[ResponseOutputItem] = []
        self._hold: frozenset[ItemKind] = frozenset()
        self._resolve: Callable[[ItemTarget], ItemTarget] | None = None
        self._held: _Item | None = None
        self._internal: dict[int, ResponseOutputItem] = {}  # output_index → the item as the model read it
        self._rewriter: Callable[[], TextRewriter] | None = None

    # -- state --------------------------------------------------------------------------------

    def snapshot(self) -> Response:
        """The response as it stands: the terminal one, or the in_progress one with the items done so far."""
        if self._terminal is not None:
            return self._terminal
        return self._response.model_copy(update={"output": list(self._output)})

    @property
    def item_open(self) -> bool:
        """Whether an output item is being streamed (False between Harmony messages)."""
        return self._item is not None

    @property
    def final_response(self) -> Response | None:
        """The response the terminal event carried, once there was one."""
        return self._terminal

    @property
    def output(self) -> list[ResponseOutputItem]:
        """The items done so far, in output_index order (read-only for callers)."""
        return self._output

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
        return None if item is None else (item.target, item.id, "".join(item.chunks))

    def hold_calls(
        self, kinds: frozenset[ItemKind], resolve: Callable[[ItemTarget], ItemTarget] | None = None
    ) -> None:
        """Hold calls of ``kinds`` open when their message ends; ``resolve`` may re-target a call at its start."""
        self._hold = kinds
        self._resolve = resolve

    def rewrite_messages(self, factory: Callable[[], TextRewriter]) -> None:
        """Rewrite the text of every message from now on (``factory`` makes one rewriter per message)."""
        self._rewriter = factory

    def _emit(self, event_type: type[Any], **fields: Any) -> ResponseStreamEvent:
        fields["type"] = _event_type_name(event_type)
        return self._stamp(event_type, fields)

    def _stamp(self, event_type: type[Any], fields: dict[str, Any]) -> ResponseStreamEvent:
        """The one place an event gets its sequence number."""
        fields["sequence_number"] = self._sequence
        self._sequence += 1
        return _construct(event_type, fields)

    def _check_open(self) -> None:
        if not self._started:
            raise StreamStateError("start() must come first")
        if self._terminal is not None:
            raise StreamStateError("the response has already ended")

    # -- transitions --------------------------------------------------------------------------

    def start(self) -> list[ResponseStreamEvent]:
        """``response.created`` and ``response.in_progress``."""
        if self._started:
            raise StreamStateError("start() called twice")
        self._started = True
        return [
            self._emit(ResponseCreatedEvent, response=self._response),
            self._emit(ResponseInProgressEvent, response=self._response),
        ]

    def compacted(self, item: ResponseCompactionItem) -> list[ResponseStreamEvent]:
        """The conversation was compacted before generating: its ``compaction`` item, added and done."""
        self._check_open()
        if self._item is not None:
            raise StreamStateError("compaction while a message is open")
        index = len(self._output)
        self._output.append(item)
        return [
            self._emit(ResponseOutputItemAddedEvent, output_index=index, item=item),
            self._emit(ResponseCompactionCompactingEvent, item_id=item.id, output_index=index),
            self._emit(ResponseOutputItemDoneEvent, output_index=index, item=item),
        ]

    def message_started(self, header: MessageHeader) -> list[ResponseStreamEvent]:
        """A model message begins: open its output item."""
        self._check_open()
        if self._item is not None:
            raise StreamStateError("a message started while another is open")
        if header.role != "assistant":
            raise HarmonyFormatError(f"the model wrote a message as {header.role!r}")
        if self._held is not None:
            raise HarmonyFormatError("the model kept writing after a tool call instead of stopping")
        target = classify(header, self._tools)
        if self._resolve is not None and target.kind in self._hold:
            target = self._resolve(target)
        item_id, call_id = new_item_ids(target.kind)
        item = self._item = _Item(target, item_id, call_id, len(self._output))
        redacted = self._redact_reasoning and target.kind is ItemKind.REASONING
        if redacted:
            item.delta_type = None
        if self._rewriter is not None and target.kind is ItemKind.MESSAGE:
            item.rewriter = self._rewriter()
        events = [
            self._emit(
                ResponseOutputItemAddedEvent,
                output_index=item.output_index,
                item=build_output_item(target, item_id, "", "in_progress", call_id),
            )
        ]
        started = _ADDED_EVENTS.get(target.kind)
        if started is not None:
            events.append(self._emit(started, item_id=item_id, output_index=item.output_index))
        part = None if redacted else _empty_part(target.kind)
        if part is not None:
            events.append(
                self._emit(
                    ResponseContentPartAddedEvent,
                    item_id=item_id,
                    output_index=item.output_index,
                    content_index=0,
                    part=part,
                )
            )
        return events

    def content_delta(self, text: str) -> list[ResponseStreamEvent]:
        """Text for the open item."""
        item = self._item
        if item is None:
            raise StreamStateError("content arrived outside a message")
        if item.rewriter is not None:
            return self._rewritten_delta(item, *item.rewriter.feed(text))
        item.chunks.append(text)
        if item.delta_type is None:  # web_search_call: its action is known only when done
            return []
        fields = item.delta_fields.copy()
        if "logprobs" in fields:
            fields["logprobs"] = []  # each event owns its list
        fields["delta"] = text
        return [self._stamp(item.delta_type, fields)]

    def _rewritten_delta(
        self, item: _Item, text: str, annotations: list[dict[str, Any]]
    ) -> list[ResponseStreamEvent]:
        """A message delta whose text was rewritten, and the annotations it completed."""
        events: list[ResponseStreamEvent] = []
        if text:
            item.chunks.append(text)
            fields = item.delta_fields.copy()
            fields["logprobs"] = []
            fields["delta"] = text
            events.append(self._stamp(ResponseTextDeltaEvent, fields))
        assert item.rewriter is not None
        first = len(item.rewriter.annotations) - len(annotations)
        for i, annotation in enumerate(annotations):
            events.append(
                self._emit(
                    ResponseOutputTextAnnotationAddedEvent,
                    item_id=item.id,
                    output_index=item.output_index,
                    content_index=0,
                    annotation_index=first + i,
                    annotation=AddedURLCitation.model_validate(annotation),
                )
            )
        return events

    def message_ended(self, status: str = "completed") -> list[ResponseStreamEvent]:
        """The open item is done (``completed``, or ``incomplete`` when output was cut off)."""
        item = self._item
        if item is None:
            raise StreamStateError("no message is open")
        events: list[ResponseStreamEvent] = []
        annotations: list[Any] = []
        if item.rewriter is not None:
            events += self._rewritten_delta(item, item.rewriter.flush(), [])
            annotations = [AnnotationURLCitation.model_validate(a) for a in item.rewriter.annotations]
        self._item = None
        text = "".join(item.chunks)
        kind = item.target.kind
        where = {"item_id": item.id, "output_index": item.output_index}
        if kind is ItemKind.MESSAGE:
            events.append(self._emit(ResponseTextDoneEvent, content_index=0, text=text, logprobs=[], **where))
            part: Any = ResponseOutputText(
                type="output_text", text=text, annotations=annotations, logprobs=[]
            )
            events.append(self._emit(ResponseContentPartDoneEvent, content_index=0, part=part, **where))
        elif kind is ItemKind.REASONING and not self._redact_reasoning:
            events.append(self._emit(ResponseReasoningTextDoneEvent, content_index=0, text=text, **where))
            part = DoneReasoningPart(type="reasoning_text", text=text)
            events.append(self._emit(ResponseContentPartDoneEvent, content_index=0, part=part, **where))
        elif kind is ItemKind.FUNCTION_CALL:
            events.append(self._emit(ResponseFunctionCallArgumentsDoneEvent, arguments=text, **where))
        elif kind is ItemKind.CUSTOM_TOOL_CALL:
            events.append(self._emit(ResponseCustomToolCallInputDoneEvent, input=text, **where))
        elif kind is ItemKind.CODE_INTERPRETER_CALL:
            events.append(self._emit(ResponseCodeInterpreterCallCodeDoneEvent, code=text, **where))
        elif kind is ItemKind.MCP_CALL:
            events.append(self._emit(ResponseMcpCallArgumentsDoneEvent, arguments=text, **where))
        if kind in self._hold and status == "completed":
            self._held = item  # the tool loop runs it, then closes it with tool_finished
            return events
        done = build_output_item(item.target, item.id, text, status, item.call_id)
        if kind is ItemKind.REASONING and self._seal_reasoning is not None:
            sealed: dict[str, Any] = {"encrypted_content": self._seal_reasoning(text)}
            if self._redact_reasoning:
                sealed["content"] = []
            done = done.model_copy(update=sealed)
        if annotations:
            done.content[0].annotations = annotations  # type: ignore[union-attr,index]
        self._output.append(done)
        events.append(self._emit(ResponseOutputItemDoneEvent, output_index=item.output_index, item=done))
        return events

    # -- server-run tools (message boundaries only) ----------------------------------------------

    def tool_item(self, target: ItemTarget, arguments: str, **fields: Any) -> list[ResponseStreamEvent]:
        """Open and hold a call the model did not write in this response (an approved call)."""
        self._check_open()
        if self._item is not None or self._held is not None:
            raise StreamStateError("a tool item opened while another item is open")
        item_id, call_id = new_item_ids(target.kind)
        item = _Item(target, item_id, call_id, len(self._output))
        item.chunks.append(arguments)
        item.fields = fields
        self._held = item
        added = _with_fields(build_output_item(target, item_id, arguments, "in_progress", call_id), fields)
        where = {"item_id": item_id, "output_index": item.output_index}
        events = [self._emit(ResponseOutputItemAddedEvent, output_index=item.output_index, item=added)]
        started = _ADDED_EVENTS.get(target.kind)
        if started is not None:
            events.append(self._emit(started, **where))
        if target.kind is ItemKind.MCP_CALL:  # the arguments, streamed as for a call the model writes
            events.append(self._emit(ResponseMcpCallArgumentsDeltaEvent, delta=arguments, **where))
            events.append(self._emit(ResponseMcpCallArgumentsDoneEvent, arguments=arguments, **where))
        return events

    def tool_started(self) -> list[ResponseStreamEvent]:
        """The held call starts running."""
        item = self._require_held()
        started = _TOOL_EVENTS[item.target.kind][0]
        return [self._emit(started, item_id=item.id, output_index=item.output_index)]

    def tool_finished(
        self, status: str, internal: dict[str, Any] | None = None, **fields: Any
    ) -> list[ResponseStreamEvent]:
        """The held call ended (``completed`` or ``failed``); ``fields`` (output, error…) go on its item.

        ``internal``, when given, are the fields of the item as the model read it
        (``model_output``), a superset of what the client is shown; with ``seal_tool_read``
        the fields the client is not shown follow as a tool-read carrier (its own reasoning
        item, added and done, at the next output_index).
        """
        item = self._require_held()
        self._held = None
        _, completed, failed = _TOOL_EVENTS[item.target.kind]
        base = build_output_item(item.target, item.id, "".join(item.chunks), status, item.call_id)
        done = _with_fields(base, {**item.fields, **fields})
        if internal is not None:
            self._internal[item.output_index] = _with_fields(base, {**item.fields, **internal})
        self._output.append(done)
        where = {"item_id": item.id, "output_index": item.output_index}
        events = [
            self._emit(completed if status == "completed" else failed, **where),
            self._emit(ResponseOutputItemDoneEvent, output_index=item.output_index, item=done),
        ]
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

    def _require_held(self) -> _Item:
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

    def complete(self, usage: ResponseUsage) -> list[ResponseStreamEvent]:
        """``response.completed``: the model finished on its own."""
        return self._end(ResponseCompletedEvent, "completed", usage)

    def incomplete(
        self, usage: ResponseUsage, reason: str = "max_output_tokens"
    ) -> list[ResponseStreamEvent]:
        """``response.incomplete``: output was cut off (an open item is closed as incomplete)."""
        details = IncompleteDetails(reason=reason)  # type: ignore[arg-type]
        return self._end(ResponseIncompleteEvent, "incomplete", usage, incomplete_details=details)

    def fail(self, message: str, usage: ResponseUsage | None = None) -> list[ResponseStreamEvent]:
        """``response.failed`` with a server_error (an open item is closed as incomplete)."""
        error = ResponseError(code="server_error", message=message)
        return self._end(ResponseFailedEvent, "failed", usage, error=error)

    def fail_instead(self, message: str) -> ResponseStreamEvent:
        """``response.failed`` in place of the terminal event just made, which must not have been sent.

        For when the finished response cannot be stored or serialized: the
        client gets a terminal event with the same sequence number either way.
        """
        terminal = self._terminal
        if terminal is None:
            raise StreamStateError("there is no terminal event to replace")
        self._terminal = None
        self._sequence -= 1
        return self.fail(message, terminal.usage)[-1]

    def _end(
        self, event_type: type[Any], status: str, usage: ResponseUsage | None, **fields: Any
    ) -> list[ResponseStreamEvent]:
        self._check_open()
        events = self.message_ended("incomplete") if self._item is not None else []
        if self._held is not None:  # a tool call that never ran
            item, self._held = self._held, None
            done = build_output_item(item.target, item.id, "".join(item.chunks), "incomplete", item.call_id)
            done = _with_fields(done, item.fields)
            self._output.append(done)
            events.append(self._emit(ResponseOutputItemDoneEvent, output_index=item.output_index, item=done))
        update: dict[str, Any] = {
            "status": status,
            "output": list(self._output),
            "usage": usage,
            "completed_at": int(time.time()) if status == "completed" else None,
            **fields,
        }
        self._terminal = self._response.model_copy(update=update)
        events.append(self._emit(event_type, response=self._terminal))
        return events


def _with_fields(item: Any, fields: dict[str, Any]) -> Any:
    """``item`` with more fields (a tool's output, error…), validated into the SDK's types (once per call)."""
    if not fields:
        return item
    return type(item).model_validate({**item.model_dump(), **fields})


def _construct(model_type: type[BaseModel], fields: dict[str, Any]) -> Any:
    """An SDK model from fields that already have their exact types, without revalidating them.

    What pydantic's ``model_construct`` does, minus the openai SDK's override of it,
    which re-walks every field's type annotation (tens of microseconds an event, on
    the per-token path). Every value ResponseStream passes is built to the SDK's
    types; the tests validate every emitted event against the SDK.
    """
    model = _new(model_type)
    _set_attr(model, "__dict__", fields)
    _set_fields_set(model, set(fields))
    _set_extra(model, None)
    _set_private(model, None)
    return model


# BaseModel's own slots, set through their descriptors (half the cost of object.__setattr__).
_new = object.__new__
_set_attr = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


_event_type_names: dict[type[Any], str] = {}


def _event_type_name(event_type: type[Any]) -> str:
    """The wire name of an SDK event class, read from its ``type`` Literal (cached)."""
    name = _event_type_names.get(event_type)
    if name is None:
        (literal,) = typing.get_args(event_type.model_fields["type"].annotation)
        name = _event_type_names[event_type] = str(literal)
    return name


_DELTA_EVENTS: dict[ItemKind, type[Any]] = {
    ItemKind.MESSAGE: ResponseTextDeltaEvent,
    ItemKind.REASONING: ResponseReasoningTextDeltaEvent,
    ItemKind.FUNCTION_CALL: ResponseFunctionCallArgumentsDeltaEvent,
    ItemKind.CUSTOM_TOOL_CALL: ResponseCustomToolCallInputDeltaEvent,
    ItemKind.CODE_INTERPRETER_CALL: ResponseCodeInterpreterCallCodeDeltaEvent,
    ItemKind.MCP_CALL: ResponseMcpCallArgumentsDeltaEvent,
}


#: Per server-run call kind: its started, completed and failed events.
#: code_interpreter_call and web_search_call have no failed event: a failed run ends with ``.completed``
#: and the item's ``status: failed`` (the SDK's types define no other).
_TOOL_EVENTS: dict[ItemKind, tuple[type[Any], type[Any], type[Any]]] = {
    ItemKind.MCP_CALL: (
        ResponseMcpCallInProgressEvent,
        ResponseMcpCallCompletedEvent,
        ResponseMcpCallFailedEvent,
    ),
    ItemKind.CODE_INTERPRETER_CALL: (
        ResponseCodeInterpreterCallInterpretingEvent,
        ResponseCodeInterpreterCallCompletedEvent,
        ResponseCodeInterpreterCallCompletedEvent,
    ),
    ItemKind.WEB_SEARCH_CALL: (
        ResponseWebSearchCallSearchingEvent,
        ResponseWebSearchCallCompletedEvent,
        ResponseWebSearchCallCompletedEvent,
    ),
}
#: Items whose ``.in_progress`` event follows ``output_item.added`` (as OpenAI streams them).
_ADDED_EVENTS: dict[ItemKind, type[Any]] = {
    ItemKind.CODE_INTERPRETER_CALL: ResponseCodeInterpreterCallInProgressEvent,
    ItemKind.WEB_SEARCH_CALL: ResponseWebSearchCallInProgressEvent,
}


def _empty_part(kind: ItemKind) -> Any:
    if kind is ItemKind.MESSAGE:
        return ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[])
    if kind is ItemKind.REASONING:
        return AddedReasoningPart(type="reasoning_text", text="")
    return None


class TokenStreamProcessor:
    """Feeds executor token deltas through the Harmony parser into a ResponseStream; counts usage.

    ``process`` returns the events a delta caused; the delta carrying a finish
    reason also yields the terminal event. ``fail`` ends the stream on an
    executor error. Malformed model output ends it with ``response.failed``.
    """

    def __init__(
        self,
        stream: ResponseStream,
        encoding: HarmonyEncoding,
        prompt_tokens: int,
        stop_requested: Callable[[], str | None] | None = None,
    ) -> None:
        self.stream = stream
        # Asked between Harmony messages (never per token): a reason to end the response there.
        self._stop_requested = stop_requested
        self._parser_encoding = encoding
        self._parser = HarmonyStreamParser(encoding)
        self._prompt_tokens = prompt_tokens
        self._output_tokens = 0
        self._reasoning_tokens = 0
        self._in_reasoning = False
        self._cached_tokens = 0  # this generation's
        self._cached_before = 0  # earlier generations' (the tool loop's turns)
        self.done = False
        # When the executor's first delta came (perf_counter): set by the service's generation loop, so
        # nothing here checks it per token.
        self.first_token_at: float | None = None

    def start(self) -> list[ResponseStreamEvent]:
        """The opening events."""
        return self.stream.start()

    @property
    def output_tokens(self) -> int:
        """Tokens the executor has produced so far."""
        return self._output_tokens

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the engine reported reusing from its KV cache (every generation of the response)."""
        return self._cached_before + self._cached_tokens

    def count_extra(self, input_tokens: int, output_tokens: int, reasoning_tokens: int) -> None:
        """Add another generation's usage to this response's (automatic compaction's summary run)."""
        self._prompt_tokens += input_tokens
        self._output_tokens += output_tokens
        self._reasoning_tokens += reasoning_tokens

    def usage(self) -> ResponseUsage:
        """Usage so far."""
        return make_usage(
            self._prompt_tokens,
            self._output_tokens,
            self._reasoning_tokens,
            self._cached_before + self._cached_tokens,
        )

    @property
    def awaiting_tool(self) -> bool:
        """The generation stopped on a held tool call: the tool loop runs it and starts the next turn."""
        return self.done and self.stream.final_response is None

    def add_prompt_tokens(self, count: int) -> None:
        """Count ``count`` more input tokens (the prompt grew before the first generation)."""
        self._prompt_tokens += count

    def next_turn(self, prompt_tokens: int) -> None:
        """Get ready for the next generation of the same response (its prompt counts as input)."""
        if not self.awaiting_tool:
            raise StreamStateError("next_turn() without a held tool call")
        self._parser = HarmonyStreamParser(self._parser_encoding)
        self._prompt_tokens += prompt_tokens
        self._cached_before += self._cached_tokens
        self._cached_tokens = 0
        self.done = False

    def process(self, delta: TokenDelta) -> list[ResponseStreamEvent]:
        """Events for one engine step."""
        if self.done:
            raise StreamStateError("the response has already ended")
        tokens = delta.token_ids
        self._output_tokens += len(tokens)
        if delta.cached_tokens is not None:
            self._cached_tokens = delta.cached_tokens
        if delta.finish_reason is None:
            text = self._parser.feed_body(tokens)
            if text is not None:  # the common step: one token of text inside a message
                return self.stream.content_delta(text) if text else []
        events: list[ResponseStreamEvent] = []
        try:
            if tokens:
                # A step that finishes the response is applied whole; others may stop at a boundary.
                stop = self._stop_requested if delta.finish_reason is None else None
                reason = self._apply(self._parser.feed(tokens), events, "completed", stop)
                if reason is not None:  # ended at a message boundary (steering): the step's rest is dropped
                    self.done = True
                    events += self.stream.incomplete(self.usage(), reason)
                    return events
            if delta.finish_reason is not None:
                self._finish(delta, events)
        except HarmonyFormatError as exc:
            events += self.fail(f"The model's output broke the Harmony format: {exc}")
        return events

    def _apply(
        self,
        parsed: list[Any],
        events: list[ResponseStreamEvent],
        cut_status: str,
        stop: Callable[[], str | None] | None = None,
    ) -> str | None:
        """Apply parser events; after each message that ends, ``stop`` may give a reason to end there."""
        stream = self.stream
        for event in parsed:
            kind = type(event)
            if kind is ContentDelta:
                events += stream.content_delta(event.text)
            elif kind is MessageStarted:
                events += stream.message_started(event.header)
                self._in_reasoning = event.header.channel == "analysis" and not event.header.recipient
            else:
                events += stream.message_ended("completed" if event.terminator is not None else cut_status)
                if self._in_reasoning:
                    self._reasoning_tokens += event.num_tokens
                    self._in_reasoning = False
                if stop is not None:
                    reason = stop()
                    if reason is not None:
                        return reason
        return None

    def _finish(self, delta: TokenDelta, events: list[ResponseStreamEvent]) -> None:
        reason = delta.finish_reason
        if reason == "error":
            events += self.fail(delta.error or "The executor failed.")
            return
        if reason == "cancelled":
            events += self.fail("The generation was cancelled.")
            return
        # On "stop" an open message is whole (the engine kept its stop token to itself);
        # on "length" it was cut off.
        whole = reason == "stop" and not self._parser.in_header
        self._apply(self._parser.finish(), events, "completed" if whole else "incomplete")
        self.done = True
        if whole and self.stream.held is not None:
            return  # a server-run tool call: the tool loop goes on (awaiting_tool)
        events += self.stream.complete(self.usage()) if whole else self.stream.incomplete(self.usage())

    def fail(self, message: str) -> list[ResponseStreamEvent]:
        """End the response as failed (executor error or malformed output)."""
        self.done = True
        return self.stream.fail(message, self.usage())
