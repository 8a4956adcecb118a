"""The budgets of the beta multi-agent surface's sub-agents, the process's count of them, and the seam
through which a team runs one (docs/agent-clients.md#multi-agent-responses-beta; ``subagents.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..tenants import Tenant
from ..tools import Coordinator
from .sessions import Chain

__all__ = ["Lookup", "SubagentHost", "SubagentLimits", "SubagentPool"]

#: Finds a sub-agent's last response by id (``prepared.HistoryLookup``'s shape).
Lookup = Callable[[str], Chain | None]


@dataclass(frozen=True, slots=True)
class SubagentLimits:
    """The server's budgets for sub-agents (docs/agent-clients.md#multi-agent-responses-beta)."""

    #: Sub-agents running at once in the process, every response's together.
    server_running: int = 32
    #: Sub-agents one response may spawn in all (its whole tree).
    per_response: int = 16
    #: Multi-agent calls one response's agents may make in all (its whole tree); each past it is answered
    #: with an error the model reads, and runs nothing. Four for each sub-agent it may spawn (a task, a
    #: message, a follow-up, a wait): 1,000 ``send_message`` calls in one request kept a server busy 69 s.
    calls_per_response: int = 64
    #: Levels of sub-agents below the root: 1 means sub-agents cannot spawn their own.
    max_depth: int = 1
    #: Seconds one task (turn) of a sub-agent may run before it is stopped and reported failed.
    task_seconds: float = 300.0
    #: The longest ``wait_agent`` (a longer ``timeout_seconds`` is cut to it); below ``--tool_timeout``.
    wait_seconds: float = 30.0


class SubagentPool:
    """The process's count of running sub-agents, bounded by ``SubagentLimits.server_running``."""

    def __init__(self, limits: SubagentLimits | None = None) -> None:
        self.limits = limits or SubagentLimits()
        self.running = 0

    def acquire(self) -> bool:
        """Count one more running sub-agent; False when the process runs its maximum already."""
        if self.running >= self.limits.server_running:
            return False
        self.running += 1
        return True

    def release(self) -> None:
        """One running sub-agent ended."""
        self.running -= 1


class SubagentHost(Protocol):
    """Runs one turn of a sub-agent: the service's (``ResponsesService.run_subagent_turn``)."""

    async def run_subagent_turn(
        self, body: dict[str, Any], lookup: Lookup, coordinator: Coordinator | None, tenant: Tenant
    ) -> tuple[dict[str, Any], str | None, Chain | None]:
        """Prepare and drive the response ``body`` asks for, as ``tenant``'s; its final JSON, id and
        continuation (None: it cannot be continued). Raises APIError when it cannot be prepared."""
        ...
