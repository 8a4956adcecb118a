"""The one decision of which tools the model is shown and which calls it may, or must, make.

The request says what it wants in typed values (``request/``: its ``tools``, its ``tool_choice``, an
``allowed_tools`` list among them); ``tools.py`` renders its tools as gpt-oss is shown them. Here,
once, ``tool_choice`` applies to all of them and to the tools the server runs: MCP servers' listed
tools (``namespaces``) and gpt-oss's built-in ``python`` and ``browser`` (``builtin``: those whose
backend the operator turned on).

- ``none`` shows nothing; a named function or custom tool is shown alone and a call to it is required;
  a named MCP server (``{"type": "mcp", "server_label", "name"?}``) or built-in tool
  (``code_interpreter``, ``web_search_preview``) is shown alone and a call to it is required;
  forcing a built-in tool that is not declared, or whose backend is off, is a 400;
- ``required`` may be met by any call shown; ``allowed_tools`` shows only its tools (functions,
  built-in tool types, MCP servers by ``server_label``) and, with ``mode: "required"``, requires one.

The result (:class:`ChosenTools`) is every call shown (``calls``, each a ``CallOption``) and those
one of which is required (``required``): the request's ``Constraint`` is built from them.
:func:`builtin_types_shown` is the same rule for the built-in tools alone, which the server's tool
providers read before a prompt is built (``tools/builtin.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import InvalidRequestError
from ..request import (
    CODE_TOOLS,
    WEB_SEARCH_TOOLS,
    ChooseAllowed,
    ChooseHosted,
    ChooseMcp,
    ChooseTool,
    HostedTool,
    RequestTool,
    ToolChoice,
)
from .tools import (
    CallOption,
    DeclaredTools,
    GrammarCheck,
    RequestTools,
    Tool,
    call_options,
    declare_tools,
    server_call_options,
)

__all__ = ["ChosenTools", "builtin_types_shown", "choose_tools", "select_tools"]


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
    tools: Sequence[RequestTool],
    choice: ToolChoice,
    namespaces: Sequence[Mapping[str, Any]],
    builtin: Mapping[str, str] | None,
    *,
    check_grammar: GrammarCheck,
    logged: set[str] | None = None,
    loaded: Sequence[Tool] = (),
) -> ChosenTools:
    """Apply ``choice`` to ``tools`` and the server's; InvalidRequestError naming the field when it cannot be honoured.

    ``namespaces``: the MCP servers' listed tools (``{"name", "description", "tools"}``).
    ``builtin``: the built-in tools the server runs (``{"browser"|"python": text}``; None: none).
    ``check_grammar``, ``logged``, ``loaded``: as :func:`~.tools.declare_tools` takes them.
    """
    # Built-in tools (browser, python) are shown when the choice leaves them and the server runs them.
    kinds = builtin_types_shown(tools, choice)
    browser: bool | str = False
    python: bool | str = False
    if builtin is not None:
        browser = builtin.get("browser", False) if kinds & WEB_SEARCH_TOOLS else False
        python = builtin.get("python", False) if kinds & CODE_TOOLS else False
    declared = declare_tools(tools, logged, check_grammar=check_grammar, loaded=loaded)
    shown = select_tools(declared, choice, server_tools=bool(namespaces or browser or python))
    if isinstance(choice, ChooseMcp):
        namespaces = _chosen_namespace(choice, namespaces)
    elif isinstance(choice, ChooseHosted) and choice.builtin is not None and not (browser or python):
        raise _not_forceable(choice, tools)
    elif choice == "none" or (isinstance(choice, ChooseHosted) and choice.builtin is not None):
        namespaces = ()  # a built-in tool chosen is shown alone
    builtins = [name for name, on in (("python", python), ("browser", browser)) if on]
    calls = call_options(shown.tools) + server_call_options(namespaces, builtins)
    required = _required_calls(choice, shown, calls, namespaces, builtins)
    return ChosenTools(shown, namespaces, browser, python, calls, required)


def select_tools(declared: DeclaredTools, choice: ToolChoice, server_tools: bool = False) -> RequestTools:
    """The request's own tools shown after ``choice``; raise InvalidRequestError naming the field.

    ``server_tools``: the server runs tools of this request (MCP, python, browser), so a required
    call may go to one of them (:func:`choose_tools` checks that one exists). A server-run tool
    named as the choice (``mcp``, a built-in tool's type) hides them all.
    """
    shown, descriptions, hidden, later = (
        declared.shown,
        declared.descriptions,
        declared.hidden,
        declared.later,
    )
    if choice == "none":
        return RequestTools((), descriptions, False, hidden)
    if choice == "auto":
        return RequestTools(shown, descriptions, False, hidden, later)
    if choice == "required":
        if not shown and not server_tools:
            raise InvalidRequestError(
                "tool_choice is 'required' but no function, custom or namespace tool is declared.",
                param="tool_choice",
            )
        return RequestTools(shown, descriptions, True, hidden, later)
    if isinstance(choice, ChooseTool):
        chosen = [t for t in shown if choice.name in (t.name, t.recipient) and t.custom == choice.custom]
        if not chosen:
            kind = "custom" if choice.custom else "function"
            raise InvalidRequestError(
                f"tool_choice names {kind} {choice.name!r}, which is not in tools.", param="tool_choice.name"
            )
        return RequestTools((chosen[0],), descriptions, True, hidden)
    if isinstance(choice, ChooseAllowed):
        chosen = [t for t in shown if any(ref.names(t.namespace, t.name) for ref in choice.tools)]
        if choice.required and not chosen and not server_tools:
            raise InvalidRequestError(
                "tool_choice requires a call to one of its allowed tools, but none of them is in tools.",
                param="tool_choice.tools",
            )
        return RequestTools(tuple(chosen), descriptions, choice.required, hidden, later)
    if isinstance(choice, ChooseMcp) or choice.builtin is not None:  # that server-run tool alone
        return RequestTools((), descriptions, False, hidden)
    return RequestTools(shown, descriptions, False, hidden, later)  # a hosted type nobody here runs


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


def _not_forceable(choice: ChooseHosted, tools: Sequence[RequestTool]) -> InvalidRequestError:
    """The error for a built-in tool named as the choice that is not shown: undeclared, or its backend off."""
    declared = {t.builtin for t in tools if isinstance(t, HostedTool)}
    reason = (
        "this server does not run it (the operator left "
        + ("--python_tool" if choice.builtin == "python" else "--browser_backend")
        + " off)"
        if choice.builtin in declared
        else "'tools' does not declare it"
    )
    return InvalidRequestError(
        f"tool_choice names {choice.kind!r}, but {reason}: a call to it cannot be forced.",
        param="tool_choice",
    )


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
