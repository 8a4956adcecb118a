"""The reasoning-summary transitions of a ResponseStream (``responses/generation.py`` drives them).

When summaries are asked for (``reasoning.summary``), a reasoning item that ends whole is
*parked* instead of closed: its text events are out (``reasoning_text.done``,
``content_part.done``) but not its ``output_item.done``, and ``summary_due`` names it. The
generation loop then runs the summary's side generation and streams it into the same item:

    summary_delta(text) → reasoning_summary_part.added (before the first delta),
                          reasoning_summary_text.delta
    summary_ended(cut)  → reasoning_summary_text.done, reasoning_summary_part.done
                          (``status: incomplete`` when the summary was cut at its token budget),
                          output_item.done with ``summary: [{"type": "summary_text", "text"}]``

(OpenAI's order, as the SDK's event types describe it: each summary part is added, its
text streams and is done, then the part is done; all inside the reasoning item, before its
``output_item.done``.) A summary that produced no text closes the item with ``summary: []``
and no part events. No other item opens while one is parked (the loop holds the main
generation's tokens meanwhile); a terminal event closes a parked item with what its summary
had so far.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openai.types.responses import (
    ResponseOutputItem,
    ResponseOutputItemDoneEvent,
    ResponseReasoningItem,
    ResponseReasoningSummaryPartAddedEvent,
    ResponseReasoningSummaryPartDoneEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningSummaryTextDoneEvent,
    ResponseStreamEvent,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_reasoning_summary_part_added_event import Part as AddedPart
from openai.types.responses.response_reasoning_summary_part_done_event import Part as DonePart

from .events import event_type_name
from .item import StreamStateError, TextParts

__all__ = ["MAX_SUMMARIES", "ParkedReasoning", "SummaryTransitions"]

#: Reasoning items one response summarizes (docs/limits.md#hostile-input-and-limits); later ones keep
#: ``summary: []``. Each summary is a side generation whose prompt (the analysis it reads, up to
#: 16 KiB) is not in the response's ``input_tokens``: this bounds what a response costs beyond its usage.
MAX_SUMMARIES = 16


class ParkedReasoning:
    """A reasoning item whose text is done, waiting for its summary (``text``: what to summarize)."""

    __slots__ = ("chunks", "done", "item_id", "output_index", "started", "text")

    def __init__(self, done: ResponseReasoningItem, output_index: int, text: str) -> None:
        self.done = done
        self.item_id = done.id
        self.output_index = output_index
        self.text = text
        self.chunks = TextParts()
        self.started = False


class SummaryTransitions:
    """ResponseStream's reasoning-summary transitions (see the module docstring).

    A base class of :class:`~trtllm_responses.stream.response.ResponseStream`, which owns the state it uses.
    """

    _output: list[ResponseOutputItem]
    #: The parked reasoning item whose summary is due (None: nothing to summarize now).
    summary_due: ParkedReasoning | None
    #: Reasoning items parked for a summary so far in this response.
    _summaries_parked: int

    if TYPE_CHECKING:  # ResponseStream's

        def _emit(self, event_type: type[Any], **fields: Any) -> ResponseStreamEvent: ...

        def _stamp(self, event_type: type[Any], fields: dict[str, Any]) -> ResponseStreamEvent: ...

    def _park(self, done: ResponseReasoningItem, output_index: int, text: str) -> bool:
        """Park a reasoning item for its summary; False (nothing parked) past :data:`MAX_SUMMARIES`."""
        if self.summary_due is not None:
            raise StreamStateError("a reasoning item is already waiting for its summary")
        if self._summaries_parked >= MAX_SUMMARIES:
            return False
        self._summaries_parked += 1
        self.summary_due = ParkedReasoning(done, output_index, text)
        return True

    def _parked(self) -> ParkedReasoning:
        parked = self.summary_due
        if parked is None:
            raise StreamStateError("no reasoning item is waiting for a summary")
        return parked

    def summary_delta(self, text: str) -> list[ResponseStreamEvent]:
        """Summary text for the parked reasoning item (its part is added before the first delta)."""
        parked = self._parked()
        events: list[ResponseStreamEvent] = []
        where = {"item_id": parked.item_id, "output_index": parked.output_index, "summary_index": 0}
        if not parked.started:
            parked.started = True
            part = AddedPart(type="summary_text", text="")
            events.append(self._emit(ResponseReasoningSummaryPartAddedEvent, part=part, **where))
        if text:
            parked.chunks.append(text)
            fields = {"type": _DELTA_TYPE, **where, "delta": text}
            events.append(self._stamp(ResponseReasoningSummaryTextDeltaEvent, fields))
        return events

    def summary_ended(self, cut: bool = False) -> list[ResponseStreamEvent]:
        """The summary is done (``cut``: stopped by its token budget): close the parked item."""
        parked = self._parked()
        self.summary_due = None
        events: list[ResponseStreamEvent] = []
        text = parked.chunks.text()
        done = parked.done
        if parked.started:
            where = {"item_id": parked.item_id, "output_index": parked.output_index, "summary_index": 0}
            events.append(self._emit(ResponseReasoningSummaryTextDoneEvent, text=text, **where))
            status = {"status": "incomplete"} if cut else {}
            part = DonePart(type="summary_text", text=text)
            events.append(self._emit(ResponseReasoningSummaryPartDoneEvent, part=part, **where, **status))
            done = done.model_copy(update={"summary": [Summary(type="summary_text", text=text)]})
        self._output.append(done)
        events.append(self._emit(ResponseOutputItemDoneEvent, output_index=parked.output_index, item=done))
        return events


_DELTA_TYPE = event_type_name(ResponseReasoningSummaryTextDeltaEvent)
