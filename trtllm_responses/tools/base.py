"""The seam between the in-response tool loop and the tools the server runs.

A :class:`ToolProvider` is one server-run tool namespace of one response (an MCP
server, later python and browser). It describes itself to the model as a
Harmony namespace and runs calls; it knows nothing of streams, prompts or
limits. The loop (``responses/tool_loop.py``) owns all of that: it times calls out
(``--tool_timeout``), cancels them when the client goes away, turns an
exception into a failed item, and tells the model what happened by rendering
the finished item back into the conversation.

:class:`ServerTools` is what a request's server-run tools became for one
response: the providers by namespace, the items to open the response with
(``mcp_list_tools``), the calls approved in this request, and the approval rule.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openai.types.responses import ResponseOutputItem

from ..harmony import ItemKind, ItemTarget
from ..stream import AgentItem, TextRewriter

__all__ = [
    "ApprovedCall",
    "ServerTools",
    "ToolNamespace",
    "ToolOutcome",
    "ToolProvider",
    "truncate_output",
]


@dataclass(frozen=True, slots=True)
class ToolNamespace:
    """How a provider is shown to the model: a Harmony namespace of typed tools (the developer message)."""

    name: str
    description: str
    tools: tuple[Mapping[str, Any], ...]  # {"name", "description", "parameters"}

    def as_json(self) -> dict[str, Any]:
        """A plain, hashable-when-dumped form (the adapter caches renders by it)."""
        return {"name": self.name, "description": self.description, "tools": list(self.tools)}


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """How a call ended: the fields its output item gets (``output``, ``error``…) and whether it failed.

    The model reads the finished item rendered back as a Harmony tool message
    (``harmony/input_messages.py``), so what it reads and what the client sees never differ.
    """

    fields: Mapping[str, Any]
    failed: bool = False
    #: Fields shown only when the request's ``include`` names them: include name → field overrides
    #: (``{"code_interpreter_call.outputs": {"outputs": [...]}}``). The model always reads them.
    optional: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Fields the model reads that no client sees (kept on the stored item only, e.g. a browser page).
    internal: Mapping[str, Any] = field(default_factory=dict)
    #: Whole items the call produced besides its own, added after it (``stream/agent_items.py``): a
    #: multi-agent call's ``agent_message`` items and its sub-agents' items, each with its agent's name.
    items: Sequence[AgentItem] = ()
    #: How a failed call failed, in a few words a dashboard can group by (its span's ``error.type``: a
    #: JSON-RPC error code, an HTTP status, ``timeout``, ``url_refused``…); None: ``tool_error``.
    error_type: str | None = None


class ToolProvider(abc.ABC):
    """One server-run tool namespace for one response."""

    #: The Harmony recipient namespace its tools are called under (``LABEL`` in ``to=LABEL.tool``).
    namespace: str
    #: The item kind its calls become.
    item_kind: ItemKind = ItemKind.MCP_CALL

    def target(self, target: ItemTarget) -> ItemTarget:
        """The item a call to this provider becomes (its ``item_kind``'s; an MCP call's by default)."""
        return target

    def describe(self) -> ToolNamespace | None:
        """The namespace shown to the model (None: nothing to show, e.g. the listing failed)."""
        return None

    def needs_approval(self, name: str) -> bool:
        """Whether a call to ``name`` waits for the client's approval instead of running."""
        return False

    def check(self, name: str, arguments: str) -> ToolOutcome | None:
        """A failure for a call that cannot run (tool not listed, malformed arguments), else None."""
        return None

    async def connect(self) -> ToolOutcome | None:
        """Open the connection calls use, if not open (a failure if it cannot be).

        The loop calls it outside the call's timeout scope, in the task that will
        close it (:meth:`aclose`): anyio's cancel scopes must nest.
        """
        return None

    @abc.abstractmethod
    async def call(self, name: str, arguments: str) -> ToolOutcome:
        """Run one checked call. May raise (the loop turns it into :meth:`failure`); must be cancellable."""

    @abc.abstractmethod
    def failure(self, message: str, code: int = -32603) -> ToolOutcome:
        """The outcome of a call that could not run or did not finish (timeout, refused, raised)."""

    def resume(self, calls: Mapping[str, str]) -> None:
        """Before the first call: the conversation's ``calls`` map as the prompt holds it (the history
        and this request's input, so items a stateless client replayed count too)."""

    def text_rewriter(self) -> Callable[[], TextRewriter] | None:
        """A factory of rewriters for the response's message text (the browser's citations), or None."""
        return None

    async def reset(self) -> None:
        """Drop any connection a call left behind (after a timeout or an error); the next call reconnects."""

    async def aclose(self) -> None:
        """Release what the provider holds (its connection). Called once, by the task that made the calls."""


@dataclass(frozen=True, slots=True)
class ApprovedCall:
    """A call the client approved (``mcp_approval_response``), run before the response's first generation."""

    target: ItemTarget
    arguments: str
    approval_request_id: str


@dataclass(slots=True)
class ServerTools:
    """A request's server-run tools, ready for one response."""

    providers: dict[str, ToolProvider] = field(default_factory=dict)
    opening_items: list[ResponseOutputItem] = field(default_factory=list)
    approved: list[ApprovedCall] = field(default_factory=list)
    #: gpt-oss's built-in tools shown to the model (``"python"``/``"browser"`` → instruction text).
    builtin: dict[str, str] = field(default_factory=dict)

    @property
    def held_kinds(self) -> frozenset[ItemKind]:
        """The item kinds of the calls this response runs."""
        return frozenset(p.item_kind for p in self.providers.values())

    @property
    def namespaces(self) -> Sequence[ToolNamespace]:
        """What the model is shown, in declaration order."""
        return [d for d in (p.describe() for p in self.providers.values()) if d is not None]

    def provider_for(self, target: ItemTarget) -> ToolProvider | None:
        """The provider a call goes to (None: nobody runs it, see ``unavailable.py``)."""
        return self.providers.get(target.namespace or "")


def truncate_output(text: str, max_bytes: int) -> str:
    """``text`` cut to ``max_bytes`` of UTF-8 (on a character boundary), with a note saying so."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    kept = data[:max_bytes].decode(errors="ignore")
    return f"{kept}\n[output truncated: {len(data)} bytes, over the limit of {max_bytes} bytes]"
