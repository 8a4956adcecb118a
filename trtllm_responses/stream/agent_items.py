"""Whole items added to a ResponseStream at a message boundary, possibly another agent's.

The beta multi-agent surface (``responses/subagents.py``) puts into the response what its calls
produced besides their own item: the ``multi_agent_call_output``, the ``agent_message`` items routed
between agents, and the sub-agents' own output items. Each is added whole (``output_item.added`` then
``output_item.done``); one another agent produced carries ``agent: {agent_name}`` on the item and on
both events (the SDK's beta event types). ``close_with`` registers what to add just before the
terminal event (sub-agents still running when the response ends, reported as interrupted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from openai.types.beta import (
    BetaResponseOutputItemAddedEvent,
    BetaResponseOutputItemDoneEvent,
    BetaResponseOutputText,
)
from openai.types.beta.beta_response_output_item import MultiAgentCallOutput
from openai.types.beta.beta_response_output_item_added_event import Agent as AddedAgent
from openai.types.beta.beta_response_output_item_done_event import Agent as DoneAgent
from openai.types.responses import (
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseStreamEvent,
)

from ..core import new_id
from ..harmony import build_output_item
from .item import OpenItem, StreamStateError

__all__ = ["AgentItem", "AgentItemTransitions"]

#: An item to add, and the name of the agent that produced it (None: this response's own agent).
AgentItem = tuple[Any, str | None]


#: The added and done events of an item: this response's own, and another agent's (with its ``agent`` type).
_PLAIN: tuple[tuple[type[Any], Any], ...] = (
    (ResponseOutputItemAddedEvent, None),
    (ResponseOutputItemDoneEvent, None),
)
_STAMPED: tuple[tuple[type[Any], Any], ...] = (
    (BetaResponseOutputItemAddedEvent, AddedAgent),
    (BetaResponseOutputItemDoneEvent, DoneAgent),
)


class AgentItemTransitions:
    """ResponseStream's transitions for whole items added at a boundary (see the module docstring).

    A base class of :class:`~trtllm_responses.stream.response.ResponseStream`, which owns the state it uses.
    """

    _output: list[ResponseOutputItem]
    _item: OpenItem | None
    _held: OpenItem | None
    _closing: Callable[[], Sequence[AgentItem]] | None

    if TYPE_CHECKING:  # ResponseStream's

        def _emit(self, event_type: type[Any], **fields: Any) -> ResponseStreamEvent: ...

        def _check_open(self) -> None: ...

    def add_items(self, items: Sequence[AgentItem]) -> list[ResponseStreamEvent]:
        """Each item added and done, in order, after the items done so far (none may be open)."""
        self._check_open()
        if self._item is not None or self._held is not None:
            raise StreamStateError("items added while another item is open")
        events: list[ResponseStreamEvent] = []
        for item, agent in items:
            index = len(self._output)
            self._output.append(item)
            for event_type, agent_type in _PLAIN if agent is None else _STAMPED:
                fields: dict[str, Any] = {"output_index": index, "item": item}
                if agent_type is not None:
                    fields["agent"] = agent_type(agent_name=agent)
                events.append(self._emit(event_type, **fields))
        return events

    def _multi_agent_finished(self, item: OpenItem, arguments: str, output: str) -> list[ResponseStreamEvent]:
        """A held ``multi_agent_call`` ran: the call is done, then its ``multi_agent_call_output`` (whole)."""
        done = build_output_item(item.target, item.id, arguments, "completed", item.call_id)
        self._output.append(done)
        events = [self._emit(ResponseOutputItemDoneEvent, output_index=item.output_index, item=done)]
        assert item.call_id is not None and item.target.name is not None
        result = MultiAgentCallOutput(
            id=new_id("maco"),
            type="multi_agent_call_output",
            action=item.target.name,  # type: ignore[arg-type]
            call_id=item.call_id,
            output=[BetaResponseOutputText(type="output_text", text=output, annotations=[])],
        )
        return events + self.add_items([(result, None)])

    def close_with(self, closing: Callable[[], Sequence[AgentItem]] | None) -> None:
        """Items to add when the response ends, before its terminal event (None: nothing)."""
        self._closing = closing

    def _closing_events(self) -> list[ResponseStreamEvent]:
        """What ``close_with`` registered, added (once); called by ``_end`` once no item is open."""
        closing, self._closing = self._closing, None
        if closing is None:
            return []
        return self.add_items(closing())
