"""How ``tool_choice`` applies to everything a request may call: what is shown, and what must be called.

The request's own tools are checked and narrowed by ``tools.select_tools``; here the choice also
reaches the tools the server runs: MCP servers' listed tools (``namespaces``) and gpt-oss's
built-in ``python`` and ``browser`` (``builtin``: those whose backend the operator turned on).

- ``none`` shows nothing; a named MCP server (``{"type": "mcp", "server_label", "name"?}``) or
  built-in tool (``code_interpreter``, ``web_search_preview``) is shown alone and a call to it is
  required; forcing a built-in tool that is not declared, or whose backend is off, is a 400;
- ``required`` may be met by any call shown; ``allowed_tools`` with ``mode: "required"`` by
  one of its tools (functions, built-in tool types, MCP servers by ``server_label``).

The result (:class:`ChosenTools`) is every call shown (``calls``, each a ``CallOption``) and
those one of which is required (``required``): the request's ``Constraint`` is built from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..constraints import check_grammar
from ..core import InvalidRequestError
from ..harmony import (
    CODE_TOOLS,
    WEB_SEARCH_TOOLS,
    CallOption,
    RequestTools,
    Tool,
    call_options,
    select_tools,
    server_call_options,
)
from ..request import (
    ChooseAllowed,
    ChooseHosted,
    ChooseMcp,
    HostedTool,
    RequestTool,
    ResponsesRequest,
    ToolChoice,
)

__all__ = ["ChosenTools", "builtin_types_shown", "choose_tools"]


@dataclass(frozen=True, slots=True)
class ChosenTools:
    """What the model is shown after ``tool_choice``, and which calls it must make."""

    tools: RequestTools  # the request's function, custom and namespace tools shown
    namespaces: Sequence[Mapping[str, Any]]  # the server-run MCP namespaces shown
    browser: bool | str  # gpt-oss's browser: False, or its instruction text
    python: bool | str  # gpt-oss's python: False, or its instruction text
    calls: tuple[CallOption, ...]  # every call shown
    required: tuple[CallOption, ...] | None  # one of these must be called (None: no call is required)


def choose_tools(
    request: ResponsesRequest,
    namespaces: Sequence[Mapping[str, Any]],
    builtin: Mapping[str, str] | None,
    logged: set[str] | None = None,
    loaded: Sequence[Tool] = (),
) -> ChosenTools:
    """Apply the request's ``tool_choice``; InvalidRequestError naming the field when it cannot be honoured.

    ``builtin``: the built-in tools the server runs (``{"browser"|"python": text}``; None: none).
    ``logged``: hosted tool types already logged as not shown (the adapter's set).
    ``loaded``: tools the conversation's tool searches loaded (callable, not shown).
    """
    choice = request.tool_choice
    # Built-in tools (browser, python) are shown when the choice leaves them and the server runs them.
    kinds = builtin_types_shown(request.tools, choice)
    browser: bool | str = False
    python: bool | str = False
    if builtin is not None:
        browser = builtin.get("browser", False) if kinds & WEB_SEARCH_TOOLS else False
        python = builtin.get("python", False) if kinds & CODE_TOOLS else False
    tools = select_tools(
        request.tools,
        choice,
        logged,
        server_tools=bool(namespaces or browser or python),
        check_grammar=check_grammar,
        loaded=loaded,
    )
    if isinstance(choice, ChooseMcp):
        tools = RequestTools((), tools.namespace_descriptions, False, tools.hidden)
        namespaces = _chosen_namespace(choice, namespaces)
    elif choice == "none":
        namespaces = ()
    elif isinstance(choice, ChooseHosted) and choice.builtin is not None:
        # A built-in tool chosen: shown alone, if the server runs it.
        if not (browser or python):
            declared = {t.builtin for t in request.tools if isinstance(t, HostedTool)}
            reason = (
                "this server does not run it (the operator left "
                + ("--python_tool" if choice.builtin == "python" else "--browser_backend")
                + " off)"
                if choice.builtin in declared
                else "'tools' does not declare it"
            )
            raise InvalidRequestError(
                f"tool_choice names {choice.kind!r}, but {reason}: a call to it cannot be forced.",
                param="tool_choice",
            )
        tools = RequestTools((), tools.namespace_descriptions, False, tools.hidden)
        namespaces = ()
    builtins = [name for name, shown in (("python", python), ("browser", browser)) if shown]
    calls = call_options(tools.tools) + server_call_options(namespaces, builtins)
    required = _required_calls(choice, tools, calls, namespaces, builtins)
    return ChosenTools(tools, namespaces, browser, python, calls, required)


def builtin_types_shown(tools: Sequence[RequestTool], choice: ToolChoice) -> frozenset[str]:
    """The declared built-in tool types (web search, code interpreter) ``tool_choice`` leaves shown.

    ``none``, and a choice naming a function, custom or MCP tool, hide them; a built-in tool named
    as the choice leaves only its kind; ``allowed_tools`` those of its types.
    """
    if choice == "none":
        return frozenset()
    kinds = {t.kind for t in tools if isinstance(t, HostedTool) and t.builtin is not None}
    if isinstance(choice, ChooseAllowed):
        kinds &= choice.kinds
    elif isinstance(choice, ChooseHosted) and choice.builtin == "python":
        kinds &= CODE_TOOLS
    elif isinstance(choice, ChooseHosted) and choice.builtin == "browser":
        kinds &= WEB_SEARCH_TOOLS
    elif not isinstance(choice, str):  # function, custom, mcp, a tool type nobody here runs
        return frozenset()
    return frozenset(kinds)


def _required_calls(
    choice: ToolChoice,
    tools: RequestTools,
    calls: tuple[CallOption, ...],
    namespaces: Sequence[Mapping[str, Any]],
    builtins: Sequence[str],
) -> tuple[CallOption, ...] | None:
    """The calls one of which ``tool_choice`` requires (None: no call is required).

    ``calls`` are every call shown (the request's tools, then the server-run ones);
    ``tools``, ``namespaces`` and ``builtins`` are already narrowed by the choice.
    """
    if isinstance(choice, ChooseMcp) or (isinstance(choice, ChooseHosted) and choice.builtin is not None):
        return calls  # shown alone: every call shown is the chosen tool's
    if not tools.required:
        return None
    if choice == "required":
        required = calls
    elif isinstance(choice, ChooseAllowed):
        labels = {ref.mcp_label for ref in choice.tools} - {None}
        chosen = [ns for ns in namespaces if ns["name"] in labels]
        required = call_options(tools.tools) + server_call_options(chosen, builtins)
    else:  # a named function or custom tool
        required = call_options(tools.tools)
    if not required:
        raise InvalidRequestError(
            "tool_choice requires a call, but none of the tools it allows is declared or run by this server.",
            param="tool_choice",
        )
    return required


def _chosen_namespace(choice: ChooseMcp, namespaces: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``tool_choice: {"type": "mcp", "server_label", "name"?}`` shows the model only that server (or tool)."""
    label, name = choice.server_label, choice.name
    chosen = [ns for ns in namespaces if ns["name"] == label]
    if not chosen:
        raise InvalidRequestError(
            f"tool_choice names MCP server {label!r}, which has no listed tools here.",
            param="tool_choice.server_label",
        )
    if name is not None:
        chosen = [{**ns, "tools": [t for t in ns["tools"] if t["name"] == name]} for ns in chosen]
        if not chosen[0]["tools"]:
            raise InvalidRequestError(
                f"tool_choice names tool {name!r}, which MCP server {label!r} does not list.",
                param="tool_choice.name",
            )
    return chosen
