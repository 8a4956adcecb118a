"""Sub-agents of a multi-agent response (the beta surface): responses the server runs itself.

A response created with ``openai-beta: responses_multi_agent=v1`` and ``multi_agent.enabled`` gets a
:class:`Team`. The model (the root agent) calls the ``multi_agent`` actions (``tools/multi_agent.py``);
each sub-agent it spawns is a conversation of its own whose turns are responses this server prepares and
drives like any other (:class:`SubagentHost`: the service), on the same executor, not stored, continued
turn to turn by ``previous_response_id`` through the team's own lookup. What the sub-agents produce
(their output items, stamped ``agent: {agent_name}``, and the ``agent_message`` items routed between
agents) is added to the root response at its next multi-agent call, or before its terminal event.

Budgets (:class:`SubagentLimits`, docs/agent-clients.md#multi-agent-responses-beta): sub-agents running at
once per
response (``max_concurrent_subagents``) and in the process, spawned per response, depth, one task's
time, one wait's time. A sub-agent still running when the response ends (or its client goes) is
cancelled and reported ``interrupted``; one whose task fails or times out is reported ``failed``.

Each turn of a sub-agent is an ``invoke_agent {name}`` span (the GenAI conventions' agent span), child of
what was current when it started (the ``execute_tool`` span of the action that started it), its response's
own spans under it: docs/tracing-and-dashboards.md#tool-spans.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from openai.types.beta import BetaResponseOutputItem
from pydantic import TypeAdapter

from ..core import APIError, InvalidRequestError, new_id
from ..ops import tracing
from ..request import ROOT_AGENT, MultiAgentConfig
from ..stream import AgentItem
from ..tenants import OPEN, Tenant
from ..tools import Coordinator, agent_session, agent_span
from .sessions import Chain
from .subagent_limits import SubagentHost, SubagentPool

__all__ = ["Team"]

logger = logging.getLogger(__name__)

_ITEM = TypeAdapter(BetaResponseOutputItem)
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Fields of the root's request a sub-agent's turns are made with (its tools, model and reasoning).
_INHERITED = (
    "model",
    "tools",
    "reasoning",
    "max_output_tokens",
    "temperature",
    "top_p",
    "parallel_tool_calls",
)
#: The client tool outputs ``response.inject`` takes.
_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
#: Output item types that stop a sub-agent's turn for the client (answered by ``response.inject``).
_CLIENT_CALLS = ("function_call", "custom_tool_call")


@dataclass(eq=False)
class _Agent:
    """One sub-agent: its conversation, status and what it has not yet reported to the root."""

    name: str
    parent: str
    depth: int
    task: str
    status: str = "running"
    output: str = ""
    last_id: str | None = None  # its last response, continued by its next turn
    running: asyncio.Task[None] | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    inbox: list[str] = field(default_factory=list)  # send_message while it ran: its next turn's input
    pending_calls: dict[str, str] = field(default_factory=dict)  # client calls it waits on: call_id → name
    answered: list[dict[str, Any]] = field(default_factory=list)  # outputs injected for some of them
    session_key: str | None = None  # its conversation's session key, once its first turn is done

    def summary(self) -> dict[str, Any]:
        """What the model reads about it."""
        described: dict[str, Any] = {"agent": self.name, "status": self.status, "output": self.output}
        if self.pending_calls:
            described["waiting_for"] = sorted(self.pending_calls.values())
        return described


class Team:
    """The sub-agents of one multi-agent response (see the module docstring)."""

    def __init__(
        self,
        host: SubagentHost,
        pool: SubagentPool,
        config: MultiAgentConfig,
        template: Mapping[str, Any],
        tool_timeout: float = float("inf"),
        tenant: Tenant = OPEN,
    ) -> None:
        self._host = host
        #: Whose response it is: its sub-agents' turns are this tenant's (docs/tenants.md#isolation).
        self._tenant = tenant
        #: A wait ends before the tool loop's timeout would fail the call (``--tool_timeout``).
        self._max_wait = min(pool.limits.wait_seconds, tool_timeout * 0.9)
        self._pool = pool
        self.limits = pool.limits
        self._max_running = config.max_concurrent_subagents
        self._template = {k: template[k] for k in _INHERITED if template.get(k) is not None}
        self._instructions = (
            template.get("instructions") if isinstance(template.get("instructions"), str) else None
        )
        self._agents: dict[str, _Agent] = {}
        self._spawned = 0
        self._calls = 0  # multi-agent calls made by the team's agents, all together
        self._unreported: list[AgentItem] = []  # for the root's next call, or its end
        self._chains: dict[str, Chain] = {}  # the sub-agents' last responses, by id (their lookup)
        self.closed = False
        #: Adds a sub-agent turn's usage to the root response's (the generation's processor sets it).
        self.count_usage: Callable[[int, int, int], None] | None = None
        #: The root response's session key, once decided (``prepare.continue_chain``): its sub-agents' spans'
        #: ``session.previous_id``.
        self.session_key: str | None = None

    # -- the coordinators ------------------------------------------------------------------------

    def coordinator(self, agent: str = ROOT_AGENT, depth: int = 0) -> Coordinator | None:
        """The actions of ``agent`` (None: at ``max_depth`` it spawns nothing, so it is not shown them)."""
        if agent != ROOT_AGENT and depth >= self.limits.max_depth:
            return None
        return _Seat(self, agent, depth)

    async def act(
        self, agent: str, depth: int, action: str, arguments: Mapping[str, Any]
    ) -> tuple[str, Sequence[AgentItem]]:
        """Run one action of ``agent`` (``tools/multi_agent.py``'s Coordinator); ValueError (the call's
        ``Error: ...`` output) past the response's ``calls_per_response``, before anything runs."""
        if self._calls >= self.limits.calls_per_response:
            raise ValueError(
                f"This response has made its maximum of {self.limits.calls_per_response} multi-agent calls:"
                " no more run. Answer with what you have."
            )
        self._calls += 1
        items: list[AgentItem] = []
        if action == "spawn_agent":
            result = self._spawn(agent, depth, arguments, items)
        elif action == "send_message":
            result = self._send(agent, arguments, items)
        elif action == "followup_task":
            result = self._followup(agent, arguments, items)
        elif action == "interrupt_agent":
            child = self._child(agent, arguments.get("agent"))
            if child.running is not None:
                child.running.cancel()
                await asyncio.wait({child.running})
            elif child.status == "waiting":  # on the client: its calls are no longer answered
                child.pending_calls, child.answered = {}, []
                child.status, child.output = "interrupted", "Interrupted while it waited for the client."
                self._report(child)
            result = child.summary()
        elif action == "list_agents":
            result = {"agents": [a.summary() | {"task": a.task} for a in self._children(agent)]}
        else:  # wait_agent (the provider checked the name)
            result = await self._wait(agent, arguments)
        if agent == ROOT_AGENT:  # what the sub-agents did meanwhile joins the root's output now
            items += self._unreported
            self._unreported = []
        return orjson.dumps(result).decode(), items

    def _spawn(
        self, parent: str, depth: int, arguments: Mapping[str, Any], items: list[AgentItem]
    ) -> dict[str, Any]:
        task = _text(arguments, "task")
        if self._spawned >= self.limits.per_response:
            raise ValueError(
                f"This response has spawned its maximum of {self.limits.per_response} sub-agents."
            )
        name = arguments.get("name")
        if name is None:
            name = f"agent_{self._spawned + 1}"
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name == ROOT_AGENT:
            raise ValueError("'name' must be 1 to 64 letters, digits, _ or -, and not 'root'.")
        if name in self._agents:
            raise ValueError(f"There is already an agent named {name!r}.")
        self._check_room()
        self._spawned += 1
        child = self._agents[name] = _Agent(name=name, parent=parent, depth=depth + 1, task=task)
        items.append(self._message(parent, name, task))
        self._start(child, [{"role": "user", "content": task}])
        return {"agent": name, "status": child.status}

    def _send(self, sender: str, arguments: Mapping[str, Any], items: list[AgentItem]) -> dict[str, Any]:
        child = self._child(sender, arguments.get("agent"))
        message = _text(arguments, "message")
        items.append(self._message(sender, child.name, message))
        if child.status == "running" or child.pending_calls:
            child.inbox.append(message)  # read with its next turn's input
            return {"agent": child.name, "status": child.status, "delivered": "queued"}
        self._check_room()
        self._start(child, [{"role": "user", "content": message}])
        return {"agent": child.name, "status": child.status, "delivered": "now"}

    def _followup(self, sender: str, arguments: Mapping[str, Any], items: list[AgentItem]) -> dict[str, Any]:
        child = self._child(sender, arguments.get("agent"))
        task = _text(arguments, "task")
        if child.status == "running":
            raise ValueError(f"{child.name} is still running; wait for it or interrupt it first.")
        self._check_room()
        child.task = task
        items.append(self._message(sender, child.name, task))
        self._start(child, [{"role": "user", "content": task}])  # it supersedes calls left unanswered
        return {"agent": child.name, "status": child.status}

    async def _wait(self, agent: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        names = arguments.get("agents")
        if names is None:
            waited = self._children(agent)
        elif isinstance(names, list):
            waited = [self._child(agent, name) for name in names]
        else:
            raise ValueError("'agents' must be a list of agent names.")
        timeout = arguments.get("timeout_seconds", self.limits.wait_seconds)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError("'timeout_seconds' must be a number of at least 0.")
        timeout = min(float(timeout), self._max_wait)
        timed_out = False
        try:
            with anyio.fail_after(timeout):
                for child in waited:
                    await child.idle.wait()
        except TimeoutError:
            timed_out = True
        for child in waited:
            if child.status == "waiting":  # reported once: the next wait waits for it to resume and finish
                child.idle.clear()
        return {"agents": [child.summary() for child in waited], "timed_out": timed_out}

    def _child(self, parent: str, name: Any) -> _Agent:
        child = self._agents.get(name) if isinstance(name, str) else None
        if child is None or child.parent != parent:
            known = ", ".join(a.name for a in self._children(parent)) or "none"
            raise ValueError(f"You have no sub-agent named {name!r} (yours: {known}).")
        return child

    def _children(self, parent: str) -> list[_Agent]:
        return [a for a in self._agents.values() if a.parent == parent]

    def _check_room(self) -> None:
        if self.closed:
            raise ValueError("The response is ending: no sub-agent can start.")
        running = sum(1 for a in self._agents.values() if a.status == "running")
        if running >= self._max_running:
            raise ValueError(
                f"{running} sub-agents are running, the most this response allows "
                "(multi_agent.max_concurrent_subagents); wait for one or interrupt one first."
            )
        if self._pool.running >= self.limits.server_running:
            raise ValueError(
                f"The server runs its maximum of {self.limits.server_running} sub-agents; try again later."
            )

    # -- a sub-agent's turns ---------------------------------------------------------------------

    def _start(self, child: _Agent, new_input: list[dict[str, Any]]) -> None:
        """Start a turn of ``child`` with ``new_input`` (its queued messages first) as a task of the team's.

        Client calls it waited on and did not get every output for are dropped: the turn goes on without."""
        if not self._pool.acquire():  # _check_room saw room; the event loop did not run since
            raise ValueError(f"The server runs its maximum of {self.limits.server_running} sub-agents.")
        new_input = [{"role": "user", "content": m} for m in child.inbox] + new_input
        child.inbox = []
        child.status = "running"
        child.output = ""
        child.pending_calls, child.answered = {}, []
        child.idle.clear()
        task = child.running = asyncio.ensure_future(self._turn(child, new_input))
        task.add_done_callback(lambda _: self._turn_done(child, task))

    def _turn_done(self, child: _Agent, task: asyncio.Task[None]) -> None:
        """A turn's task ended, however (even cancelled before it started): its count and waiters released."""
        self._pool.release()
        if child.running is task:
            child.running = None
        if child.status == "running":  # cancelled before it ran
            child.status, child.output = "interrupted", "Interrupted before it started."
            self._report(child)
        if child.inbox and child.status in ("completed", "incomplete") and not self.closed:
            try:  # messages sent while it ran: its next turn reads them
                self._start(child, [])
            except ValueError as exc:
                child.status, child.output = "failed", f"Could not read its messages: {exc}"
                self._report(child)
        if child.running is None:
            child.idle.set()

    async def _turn(self, child: _Agent, new_input: list[dict[str, Any]]) -> None:
        body: dict[str, Any] = {**self._template, "input": new_input, "store": False}
        instructions = (
            f"You are {child.name}, a sub-agent of {child.parent}. Do the task you are given and answer with "
            "its result: your final answer is what it reads."
        )
        body["instructions"] = (
            f"{self._instructions}\n\n{instructions}" if self._instructions else instructions
        )
        if child.last_id is not None:
            body["previous_response_id"] = child.last_id
        final: dict[str, Any] | None = None
        try:
            with anyio.fail_after(self.limits.task_seconds), self._span(child) as span:
                final, response_id, chain = await self._host.run_subagent_turn(
                    body, self._chains.get, self.coordinator(child.name, child.depth), self._tenant
                )
                if chain is not None and chain.session_key is not None:
                    child.session_key = chain.session_key
                    agent_session(span, chain.session_key)
                if final.get("status") == "failed":
                    tracing.fail(span, "the sub-agent's turn failed", error_type="failed")
            if chain is not None and response_id is not None:
                if child.last_id is not None:
                    self._chains.pop(child.last_id, None)
                self._chains[response_id] = chain
                child.last_id = response_id
            self._ended(child, final)
        except asyncio.CancelledError:
            if child.status != "interrupted":  # close() reported it already
                child.status, child.output = "interrupted", "Interrupted before it finished."
                self._report(child)
            raise
        except TimeoutError:
            child.status = "failed"
            child.output = f"Stopped: its task ran past {self.limits.task_seconds:g} s."
            self._report(child)
        except APIError as exc:
            child.status, child.output = "failed", f"Could not start: {exc.message}"
            self._report(child)
        except Exception as exc:  # a bug: the agent fails, the response goes on
            logger.exception("Sub-agent %s failed", child.name)
            child.status, child.output = "failed", f"The server had an error: {type(exc).__name__}"
            self._report(child)

    def _span(self, child: _Agent) -> AbstractContextManager[tracing.SpanLike]:
        """The ``invoke_agent`` span of a turn of ``child`` (``tools/spans.py``), its parent's session key
        known once decided (the root's) or its first turn done (a sub-agent's)."""
        parent = self._agents.get(child.parent)
        parent_key = self.session_key if parent is None else parent.session_key
        return agent_span(child.name, child.depth, parent_key, child.session_key)

    def _ended(self, child: _Agent, final: dict[str, Any]) -> None:
        """A turn's response ended: its status, final text, client calls; its items reported to the root."""
        usage = final.get("usage")
        if usage and self.count_usage is not None:  # the whole tree's tokens are the response's
            details = usage.get("output_tokens_details") or {}
            self.count_usage(
                usage["input_tokens"], usage["output_tokens"], details.get("reasoning_tokens", 0)
            )
        output = final.get("output") or []
        texts = [
            part.get("text", "")
            for item in output
            if item.get("type") == "message" and "agent" not in item
            for part in item.get("content") or []
            if part.get("type") == "output_text"
        ]
        child.output = texts[-1] if texts else ""
        calls = {
            item["call_id"]: item.get("name", "")
            for item in output
            if item.get("type") in _CLIENT_CALLS and "agent" not in item
        }
        child.pending_calls = calls
        status = final.get("status")
        if calls:
            child.status = "waiting"
        elif status == "failed":
            error = final.get("error") or {}
            child.status, child.output = "failed", str(error.get("message", "")) or child.output
        else:
            child.status = str(status or "completed")
        for item in output:
            stamped = dict(item)
            stamped.setdefault("agent", {"agent_name": child.name})
            self._unreported.append((_ITEM.validate_python(stamped), stamped["agent"]["agent_name"]))
        self._report(child)

    def _report(self, child: _Agent) -> None:
        """The agent_message carrying ``child``'s result to its parent (with its status)."""
        text = (
            child.output if child.status in ("completed", "waiting") else f"[{child.status}] {child.output}"
        )
        self._unreported.append(self._message(child.name, child.parent, text))

    def _message(self, author: str, recipient: str, text: str) -> AgentItem:
        """An ``agent_message`` item, stamped with its author unless it is the root."""
        data: dict[str, Any] = {
            "id": new_id("amsg"),
            "type": "agent_message",
            "author": author,
            "recipient": recipient,
            "content": [{"type": "input_text", "text": text}],
        }
        if author != ROOT_AGENT:
            data["agent"] = {"agent_name": author}
        return _ITEM.validate_python(data), None if author == ROOT_AGENT else author

    # -- the client and the end ------------------------------------------------------------------

    def inject(self, items: Sequence[Any]) -> None:
        """Commit client tool outputs to the sub-agents waiting on them, all or none (``response.inject``).

        Raises InvalidRequestError naming the item that cannot be committed.
        """
        if not isinstance(items, list) or not items:
            raise InvalidRequestError("'input' must be a non-empty list of tool outputs.", param="input")
        by_agent: dict[str, list[dict[str, Any]]] = {}
        for i, item in enumerate(items):
            where = f"input[{i}]"
            if not isinstance(item, dict) or item.get("type") not in _OUTPUT_TYPES:
                raise InvalidRequestError(
                    f"'{where}' must be a function_call_output or custom_tool_call_output: response.inject "
                    "takes client tool outputs for a waiting agent.",
                    param=f"{where}.type",
                )
            call_id = item.get("call_id")
            owner = next((a for a in self._agents.values() if call_id in a.pending_calls), None)
            if owner is None or owner.status != "waiting":
                raise InvalidRequestError(
                    f"No agent of this response waits for the output of call {call_id!r}.",
                    param=f"{where}.call_id",
                )
            by_agent.setdefault(owner.name, []).append(item)
        if self.closed:
            raise InvalidRequestError("The response is ending: no sub-agent can resume.", param="input")
        for name, outputs in by_agent.items():
            child = self._agents[name]
            for output in outputs:
                child.pending_calls.pop(output["call_id"], None)
            child.answered += outputs
            if not child.pending_calls:  # every call it made is answered: it goes on
                answered, child.answered = child.answered, []
                self._start(child, answered)

    def close(self) -> list[AgentItem]:
        """The response ends: every running sub-agent is cancelled and reported; what is unreported, added."""
        self.closed = True
        for child in self._agents.values():
            if child.running is not None:
                child.status, child.output = "interrupted", "The response ended before it finished."
                self._report(child)
                child.running.cancel()
            elif child.status == "waiting":
                child.status = "interrupted"
                child.output = "The response ended while it waited for the client's tool output."
                self._report(child)
        items, self._unreported = self._unreported, []
        return items

    def shutdown(self) -> None:
        """Cancel whatever still runs (the response's drive ended, however)."""
        self.closed = True
        for child in self._agents.values():
            if child.running is not None:
                child.running.cancel()

    @property
    def running(self) -> int:
        """Sub-agents running now (for tests and /stats)."""
        return sum(1 for a in self._agents.values() if a.running is not None)


@dataclass(frozen=True, slots=True)
class _Seat:
    """One agent's view of its team: its Coordinator."""

    team: Team
    agent: str
    depth: int

    async def act(self, action: str, arguments: Mapping[str, Any]) -> tuple[str, Sequence[AgentItem]]:
        return await self.team.act(self.agent, self.depth, action, arguments)


def _text(arguments: Mapping[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"'{key}' must be a non-empty string.")
    return value
