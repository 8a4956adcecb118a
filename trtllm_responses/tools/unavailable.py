"""Calls to tools nobody runs: answered to the model, which then goes on in the same response.

gpt-oss calls tools it was not given: hallucinated namespaces (``repo_browser.open_file``,
``container.exec``), its own ``browser.*`` and ``python`` when the request did not declare them
or the operator left them off, an undeclared function. Such a call is neither the client's to
run nor the server's. The tool loop (``responses/tool_loop.py``) holds it like a server-run call and closes
it with :meth:`UnavailableTool.refuse`: a failed item of the call's own type (``mcp_call``,
``web_search_call``, ``code_interpreter_call``), whose error the model reads as the tool's answer,
one line naming the tools it does have; then it generates again.

Why the client sees a failed item rather than nothing: no item claims a call ran that did not
(``failed``, never ``completed``), the output is what the model read (a client that replays the
output statelessly gives the model the same history the server would), and the tokens it cost
are accounted for. Clients ignore item types they do not act on (Codex, the Agents SDK).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..harmony import MODEL_READ, ItemKind, ItemTarget
from .base import ToolOutcome
from .mcp import INVALID_PARAMS, protocol_error

__all__ = ["UNAVAILABLE_KINDS", "UnavailableTool", "recipient_of"]

#: The item kinds a call to a tool nobody runs becomes (``harmony/items.py``'s ``classify``).
UNAVAILABLE_KINDS = frozenset({ItemKind.MCP_CALL, ItemKind.WEB_SEARCH_CALL, ItemKind.CODE_INTERPRETER_CALL})
#: How many tool names the error lists before "…".
MAX_LISTED = 20


def recipient_of(target: ItemTarget) -> str:
    """The recipient the model wrote for ``target`` (``browser.search``, ``python``, ``NS.NAME``)."""
    if target.kind is ItemKind.CODE_INTERPRETER_CALL:
        return "python"
    if target.namespace and target.name and target.namespace != target.name:
        return f"{target.namespace}.{target.name}"
    return target.name or target.namespace or "?"


class UnavailableTool:
    """Answers calls to tools nobody runs; ``available`` are the recipients the model may call."""

    def __init__(self, available: Iterable[str]) -> None:
        self._available = list(dict.fromkeys(available))

    def message(self, target: ItemTarget) -> str:
        """The one-line error the model reads."""
        names = self._available[:MAX_LISTED]
        more = ", …" if len(self._available) > MAX_LISTED else ""
        listed = (
            f"The tools you can call: {', '.join(names)}{more}."
            if names
            else "You have no tools in this conversation."
        )
        return f"Tool '{recipient_of(target)}' is not available. {listed} Answer without it."

    def refuse(self, target: ItemTarget) -> ToolOutcome:
        """The failed item's fields for a call to ``target`` (the model reads the error)."""
        message = self.message(target)
        if target.kind is ItemKind.WEB_SEARCH_CALL:
            return ToolOutcome({}, failed=True, internal={MODEL_READ: f"Error: {message}"})
        if target.kind is ItemKind.CODE_INTERPRETER_CALL:
            logs = {"outputs": [{"type": "logs", "logs": f"Error: {message}"}]}
            return ToolOutcome({"container_id": "", "outputs": None}, failed=True, internal=logs)
        return protocol_error(message, INVALID_PARAMS)
