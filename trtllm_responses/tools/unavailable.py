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

A call to an undeclared *function* (``functions.nope``, a bare ``nope``) is the exception: it has no
item (:meth:`UnavailableTool.answer` is what the model reads, as that function's output). Its own item
type, ``function_call``, is an order to the client (the Agents SDK raises on a name it does not know,
Codex answers "unsupported call"), and an ``mcp_call`` labelled ``functions`` would name an MCP server
the request does not have. The model's mistaken call and its answer stay out of the history a client
replays, as if the model had not made it; its tokens are counted.

The error names near misses first (``get-weather`` for ``get_weather``: "did you mean
functions.get_weather?") and then does not tell the model to answer without the tool.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..harmony import MODEL_READ, ItemKind, ItemTarget
from .base import ToolOutcome
from .mcp import INVALID_PARAMS, protocol_error

__all__ = ["UNAVAILABLE_KINDS", "UnavailableTool", "recipient_of"]

#: The item kinds a call to a tool nobody runs becomes (``harmony/items.py``'s ``classify``).
UNAVAILABLE_KINDS = frozenset(
    {
        ItemKind.MCP_CALL,
        ItemKind.WEB_SEARCH_CALL,
        ItemKind.CODE_INTERPRETER_CALL,
        ItemKind.UNDECLARED_FUNCTION,
    }
)
#: How many tool names the error lists before "…".
MAX_LISTED = 20
#: How close a name must be to a declared one to be named as a near miss (difflib's ratio).
NEAR_MISS = 0.75


def recipient_of(target: ItemTarget) -> str:
    """The recipient the model wrote for ``target`` (``browser.search``, ``python``, ``NS.NAME``)."""
    if target.kind is ItemKind.CODE_INTERPRETER_CALL:
        return "python"
    if target.kind is ItemKind.UNDECLARED_FUNCTION:
        return f"{target.namespace}.{target.name}"
    if target.namespace and target.name and target.namespace != target.name:
        return f"{target.namespace}.{target.name}"
    return target.name or target.namespace or "?"


class UnavailableTool:
    """Answers calls to tools nobody runs; ``available`` are the recipients the model may call."""

    def __init__(self, available: Iterable[str]) -> None:
        self._available = list(dict.fromkeys(available))

    def near_misses(self, recipient: str) -> list[str]:
        """The recipients the model may call that ``recipient`` nearly names (``get-weather``, ``GetWeather``)."""

        def key(name: str) -> str:
            return name.lower().replace("-", "_").replace(" ", "_")

        wrote = key(recipient)
        bare = wrote.rpartition(".")[2]
        found = []
        for name in self._available:
            full = key(name)
            score = max(
                difflib.SequenceMatcher(None, wrote, full).ratio(),
                difflib.SequenceMatcher(None, bare, full.rpartition(".")[2]).ratio(),
            )
            if score >= NEAR_MISS:
                found.append((score, name))
        return [name for _, name in sorted(found, key=lambda f: -f[0])[:3]]

    def message(self, target: ItemTarget) -> str:
        """The one-line error the model reads."""
        wrote = recipient_of(target)
        names = self._available[:MAX_LISTED]
        more = ", …" if len(self._available) > MAX_LISTED else ""
        listed = (
            f"The tools you can call: {', '.join(names)}{more}."
            if names
            else "You have no tools in this conversation."
        )
        near = self.near_misses(wrote)
        if near:
            return f"Tool '{wrote}' is not available; did you mean {' or '.join(near)}? {listed}"
        return f"Tool '{wrote}' is not available. {listed} Answer without it."

    def answer(self, target: ItemTarget) -> str:
        """What the model reads as the output of an undeclared function it called (no item shows it)."""
        return f"Error: {self.message(target)}"

    def refuse(self, target: ItemTarget) -> ToolOutcome:
        """The failed item's fields for a call to ``target`` (the model reads the error)."""
        message = self.message(target)
        if target.kind is ItemKind.WEB_SEARCH_CALL:
            return ToolOutcome({}, failed=True, internal={MODEL_READ: f"Error: {message}"})
        if target.kind is ItemKind.CODE_INTERPRETER_CALL:
            logs = {"outputs": [{"type": "logs", "logs": f"Error: {message}"}]}
            return ToolOutcome({"container_id": "", "outputs": None}, failed=True, internal=logs)
        return protocol_error(message, INVALID_PARAMS)
