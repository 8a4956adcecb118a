"""The beta multi-agent actions as a server-run tool namespace (``multi_agent``).

The model sees six functions under ``namespace multi_agent``
(docs/agent-clients.md#multi-agent-responses-beta);
a call to one becomes a ``multi_agent_call`` item, its result a ``multi_agent_call_output``. This provider
only describes the actions, checks their arguments and hands them to a :class:`Coordinator` (the
response's team of sub-agents, ``responses/subagents.py``), which runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from ..harmony import ItemKind, ItemTarget
from ..request import MULTI_AGENT_NAMESPACE
from ..stream import AgentItem
from .base import ToolNamespace, ToolOutcome, ToolProvider

__all__ = ["ACTIONS", "Coordinator", "MultiAgentProvider"]

_NAME = {"type": "string", "description": "The agent's name, as spawn_agent returned it."}
_NAMES = {"type": "array", "items": {"type": "string"}, "description": "Agent names (default: every agent)."}

#: Each action: its description and parameters, as the model is shown them.
ACTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "spawn_agent": (
        "Start a sub-agent on a task; it works in parallel with you. Returns its name.",
        {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What the sub-agent should do."},
                "name": {"type": "string", "description": "A name for it (letters, digits, _ and -)."},
            },
            "required": ["task"],
        },
    ),
    "send_message": (
        "Send a message to a sub-agent: it reads it when its current task is done (at once if idle).",
        {
            "type": "object",
            "properties": {"agent": _NAME, "message": {"type": "string"}},
            "required": ["agent", "message"],
        },
    ),
    "followup_task": (
        "Give an idle sub-agent (its last task done) a new task in the same conversation.",
        {
            "type": "object",
            "properties": {"agent": _NAME, "task": {"type": "string"}},
            "required": ["agent", "task"],
        },
    ),
    "wait_agent": (
        "Wait until the named sub-agents finish their tasks or need the user's input (a wait that reported "
        "that waits for them to resume and finish), or timeout_seconds pass. Returns each one's status and "
        "final answer.",
        {
            "type": "object",
            "properties": {"agents": _NAMES, "timeout_seconds": {"type": "number"}},
        },
    ),
    "interrupt_agent": (
        "Stop a sub-agent's current task.",
        {"type": "object", "properties": {"agent": _NAME}, "required": ["agent"]},
    ),
    "list_agents": ("List the sub-agents with their status.", {"type": "object", "properties": {}}),
}


class Coordinator(Protocol):
    """Runs the multi-agent actions of one agent (``responses/subagents.py``)."""

    async def act(self, action: str, arguments: Mapping[str, Any]) -> tuple[str, Sequence[AgentItem]]:
        """Run ``action``: the text the model reads, and the items it produced (agent messages, sub-agents'
        items). Raises ValueError for a call that cannot run (its message is what the model reads)."""
        ...


class MultiAgentProvider(ToolProvider):
    """The ``multi_agent`` namespace of one agent of a multi-agent response."""

    namespace = MULTI_AGENT_NAMESPACE
    item_kind = ItemKind.MULTI_AGENT_CALL

    def __init__(self, coordinator: Coordinator) -> None:
        self._coordinator = coordinator

    def target(self, target: ItemTarget) -> ItemTarget:
        """A call to an action is a ``multi_agent_call``."""
        return ItemTarget(ItemKind.MULTI_AGENT_CALL, name=target.name, namespace=self.namespace)

    def describe(self) -> ToolNamespace:
        """The six actions, as a Harmony namespace."""
        return ToolNamespace(
            name=self.namespace,
            description="Sub-agents: other instances of you, each with its own conversation, run by the server.",
            tools=tuple(
                {"name": name, "description": description, "parameters": parameters}
                for name, (description, parameters) in ACTIONS.items()
            ),
        )

    def check(self, name: str, arguments: str) -> ToolOutcome | None:
        """A call to no action, or whose arguments are not a JSON object, fails without running."""
        if name not in ACTIONS:
            return self.failure(f"multi_agent has no action {name!r}; it has {', '.join(ACTIONS)}.")
        try:
            parsed = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return self.failure("The arguments must be a JSON object.")
        return None

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        """Run the action through the coordinator."""
        try:
            text, items = await self._coordinator.act(name, orjson.loads(arguments or "{}"))
        except ValueError as exc:
            return self.failure(str(exc))
        return ToolOutcome({"output": text}, items=items)

    def failure(self, message: str, code: int = -32603) -> ToolOutcome:
        """The call's output says what went wrong (the model reads it)."""
        return ToolOutcome({"output": f"Error: {message}"}, failed=True)
