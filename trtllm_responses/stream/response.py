"""ResponseStream: Harmony transitions in, typed Responses stream events out.

See the package docstring (``trtllm_responses.stream``) for its transitions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from openai.types.responses import (
    Response,
    ResponseCodeInterpreterCallCodeDoneEvent,
    ResponseCompactionItem,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseCustomToolCallInputDoneEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseMcpCallArgumentsDoneEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputText,
    ResponseOutputTextAnnotationAddedEvent,
    ResponseReasoningTextDoneEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from openai.types.responses.response import IncompleteDetails
from openai.types.responses.response_compaction_compacting_event import ResponseCompactionCompactingEvent
from openai.types.responses.response_content_part_done_event import PartReasoningText as DoneReasoningPart
from openai.types.responses.response_error import ResponseError
from openai.types.responses.response_output_text import AnnotationURLCitation
from openai.types.responses.response_output_text_annotation_added_event import (
    AnnotationURLCitation as AddedURLCitation,
)

from ..core import HarmonyFormatError
from ..harmony import (
    ItemKind,
    ItemTarget,
    MessageHeader,
    RequestTools,
    build_output_item,
    callable_header,
    classify,
    new_item_ids,
)
from .agent_items import AgentItem, AgentItemTransitions
from .events import (
    ADDED_EVENTS,
    construct,
    empty_part,
    event_type_name,
    with_fields,
)
from .item import PACK, OpenItem, StreamStateError, TextRewriter
from .summary import ParkedReasoning, SummaryTransitions
from .tool_items import ToolItemTransitions

__all__ = ["ResponseStream"]

logger = logging.getLogger(__name__)

#: Output items that are calls for the client to run: a turn may end with one.
CLIENT_CALLS = frozenset({"function_call", "custom_tool_call", "tool_search_call"})


class ResponseStream(ToolItemTransitions, SummaryTransitions, AgentItemTransitions):
    """The event state machine of one response. ``response`` is its initial (in_progress) snapshot.

    ``tools`` are the request's tools, which decide what a call becomes (a namespaced
    function call, a custom tool call). ``summarize``: reasoning items that end whole wait
    for their summary (``summary.py``) before they are done.
    """

    def __init__(
        self,
        response: Response,
        seal_reasoning: Callable[[str], str] | None = None,
        redact_reasoning: bool = False,
        tools: RequestTools | None = None,
        seal_tool_read: Callable[[str, dict[str, Any]], str | None] | None = None,
        summarize: bool = False,
    ) -> None:
        self._response = response
        self._summarize = summarize
        self.summary_due: ParkedReasoning | None = None
        self._summaries_parked = 0
        self._tools = tools
        # Reasoning items get ``encrypted_content`` from ``seal_reasoning``; redacted, they stream no text.
        self._seal_reasoning = seal_reasoning
        self._redact_reasoning = redact_reasoning
        # Given (encrypted reasoning asked for): a tool item the client sees less of than the model
        # read is followed by a tool-read carrier (responses/sealing.py), so a stateless replay reads it all.
        self._seal_tool_read = seal_tool_read
        self._sequence = 0
        self._started = False
        self._terminal: Response | None = None
        self._item: OpenItem | None = None
        self._output: list[ResponseOutputItem] = []
        self._hold: frozenset[ItemKind] = frozenset()
        self._resolve: Callable[[ItemTarget], ItemTarget] | None = None
        self._runs: Callable[[str], bool] | None = None
        self._held: OpenItem | None = None
        #: The end of the last message's or reasoning item's text (a recipient glued to it: the processor).
        self.last_text = ""
        self._internal: dict[int, ResponseOutputItem] = {}  # output_index → the item as the model read it
        self._rewriter: Callable[[], TextRewriter] | None = None
        self._closing: Callable[[], Sequence[AgentItem]] | None = None  # agent_items.py

    # -- state --------------------------------------------------------------------------------

    def snapshot(self, settled: bool = True) -> Response:
        """The response as it stands: the terminal one, or the in_progress one with the items done so far.

        ``settled=False``: its end is not final yet (the run is still storing it, and a failed store write
        turns it into ``failed``): an ended stream still shows ``in_progress``."""
        if self._terminal is not None and settled:
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
    def open_kind(self) -> ItemKind | None:
        """The kind of the item being streamed (None between Harmony messages)."""
        return self._item.target.kind if self._item is not None else None

    @property
    def open_text(self) -> str:
        """The text of the item being streamed so far (message boundaries only: it joins the chunks)."""
        return self._item.chunks.text() if self._item is not None else ""

    @property
    def called(self) -> bool:
        """Whether the last item done is a call for the client to run (a function, custom tool or tool search call)."""
        return bool(self._output) and self._output[-1].type in CLIENT_CALLS

    @property
    def answered(self) -> bool:
        """Whether the last item done is one a turn may end with: a final answer, a client tool call."""
        if not self._output:
            return False
        last = self._output[-1]
        if last.type == "message":
            return last.phase != "commentary"
        return last.type in CLIENT_CALLS

    def opens_client_call(self, header: MessageHeader) -> bool:
        """Whether a message with ``header`` would be a call for the client to run (:data:`CLIENT_CALLS`)."""
        kind = classify(callable_header(header, self._tools, self._runs), self._tools).kind
        return kind.value in CLIENT_CALLS and kind not in self._hold

    @property
    def output(self) -> list[ResponseOutputItem]:
        """The items done so far, in output_index order (read-only for callers)."""
        return self._output

    def rewrite_messages(self, factory: Callable[[], TextRewriter]) -> None:
        """Rewrite the text of every message from now on (``factory`` makes one rewriter per message)."""
        self._rewriter = factory

    def _emit(self, event_type: type[Any], **fields: Any) -> ResponseStreamEvent:
        fields["type"] = event_type_name(event_type)
        return self._stamp(event_type, fields)

    def _stamp(self, event_type: type[Any], fields: dict[str, Any]) -> ResponseStreamEvent:
        """The one place an event gets its sequence number."""
        fields["sequence_number"] = self._sequence
        self._sequence += 1
        return construct(event_type, fields)

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
        if self.summary_due is not None:
            raise StreamStateError("a message started while a reasoning item waits for its summary")
        if header.role != "assistant":
            raise HarmonyFormatError(f"the model wrote a message as {header.role!r}")
        if self._held is not None:
            raise HarmonyFormatError("the model kept writing after a tool call instead of stopping")
        target = classify(callable_header(header, self._tools, self._runs), self._tools)
        if self._resolve is not None and target.kind in self._hold:
            target = self._resolve(target)
        item_id, call_id = new_item_ids(target.kind)
        item = self._item = OpenItem(target, item_id, call_id, len(self._output))
        if target.kind is ItemKind.UNDECLARED_FUNCTION:
            return []  # no item: the tool loop answers it to the model (tools/unavailable.py)
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
        started = ADDED_EVENTS.get(target.kind)
        if started is not None:
            events.append(self._emit(started, item_id=item_id, output_index=item.output_index))
        part = None if redacted else empty_part(target.kind)
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
        if item.cutter is not None:
            text = item.cutter.feed(text)
            if not text:
                return []
        if item.rewriter is not None:
            return self._rewritten_delta(item, *item.rewriter.feed(text))
        parts = item.chunks.parts  # item.chunks.append(text), inlined: this runs once a token
        parts.append(text)
        if len(parts) >= PACK:
            item.chunks.pack()
        if item.delta_type is None:  # web_search_call: its action is known only when done
            return []
        fields = item.delta_fields.copy()
        if "logprobs" in fields:
            fields["logprobs"] = []  # each event owns its list
        fields["delta"] = text
        return [self._stamp(item.delta_type, fields)]

    def _rewritten_delta(
        self, item: OpenItem, text: str, annotations: list[dict[str, Any]]
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
        text = item.chunks.text()
        kind = item.target.kind
        if item.cutter is not None and item.cutter.dropped:
            logger.info(
                "Dropped what the model wrote after the arguments of %s: %.200r",
                item.target.name,
                "".join(item.cutter.dropped),
            )
        self.last_text = text[-200:] if kind is ItemKind.MESSAGE or kind is ItemKind.REASONING else ""
        if kind is ItemKind.UNDECLARED_FUNCTION:  # no item: held for the tool loop, or dropped
            if kind in self._hold and status == "completed":
                self._held = item
            else:
                logger.info("Dropped a call to the undeclared function %s: %.200r", item.target.name, text)
            return events
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
        if (
            kind is ItemKind.REASONING
            and self._summarize
            and status == "completed"
            and text.strip()
            and self._park(done, item.output_index, text)  # type: ignore[arg-type]
        ):
            return events
        self._output.append(done)
        events.append(self._emit(ResponseOutputItemDoneEvent, output_index=item.output_index, item=done))
        return events

    # -- server-run tools (message boundaries only) ----------------------------------------------

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

    def cancel(self, usage: ResponseUsage | None = None) -> list[ResponseStreamEvent]:
        """A client cancelled the response: ``response.failed`` carrying status ``cancelled`` and no error
        (the terminal event OpenAI sends for a cancelled background response)."""
        return self._end(ResponseFailedEvent, "cancelled", usage, error=None)

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
        if self.summary_due is not None:  # its summary did not finish: the item keeps what it had
            events += self.summary_ended(cut=True)
        if self._held is not None and self._held.target.kind is ItemKind.UNDECLARED_FUNCTION:
            self._held = None  # never shown: nothing to close
        if self._held is not None:  # a tool call that never ran
            item, self._held = self._held, None
            done = build_output_item(item.target, item.id, item.chunks.text(), "incomplete", item.call_id)
            done = with_fields(done, item.fields)
            self._output.append(done)
            events.append(self._emit(ResponseOutputItemDoneEvent, output_index=item.output_index, item=done))
        if self._closing is not None:
            events += self._closing_events()
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
