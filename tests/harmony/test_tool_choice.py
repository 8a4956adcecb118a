"""The one decision of which tools are shown and which calls are allowed (``harmony/tool_choice.py``), on its own.

No adapter, no server: typed ``tools`` and ``tool_choice`` (as ``request/`` parses them) and the tools
the server runs go in; what the model is shown and what it must call come out.
"""

from __future__ import annotations

from typing import Any

import pytest

from trtllm_responses.core import InvalidRequestError
from trtllm_responses.harmony import ChosenTools, builtin_types_shown, choose_tools
from trtllm_responses.request.tool_choice import parse_tool_choice
from trtllm_responses.request.tools import parse_tools

LOOKUP = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
SHELL = {"type": "custom", "name": "shell"}
CODE = {"type": "code_interpreter", "container": {"type": "auto"}}
WEB = {"type": "web_search"}
MCP = [{"name": "demo", "description": "", "tools": [{"name": "relay"}, {"name": "echo"}]}]
BUILTIN = {"python": "Run python.", "browser": "Browse."}


def no_grammar_check(syntax: str, definition: str, param: str) -> None:
    """Every grammar compiles (no custom tool here declares one)."""


def choose(
    tools: list[dict[str, Any]],
    choice: Any,
    namespaces: list[dict[str, Any]] | None = None,
    builtin: dict[str, str] | None = None,
) -> ChosenTools:
    return choose_tools(
        parse_tools(tools),
        parse_tool_choice(choice),
        namespaces or [],
        builtin,
        check_grammar=no_grammar_check,
    )


def recipients(calls: Any) -> list[str] | None:
    return None if calls is None else [c.recipient for c in calls]


def test_auto_shows_everything_and_requires_nothing() -> None:
    chosen = choose([LOOKUP, SHELL, CODE], "auto", MCP, BUILTIN)
    assert [t.recipient for t in chosen.tools.tools] == ["functions.lookup", "functions.shell"]
    assert chosen.python == "Run python." and chosen.browser is False  # no web_search declared
    assert recipients(chosen.calls) == [
        "functions.lookup",
        "functions.shell",
        "demo.relay",
        "demo.echo",
        "python",
    ]
    assert chosen.required is None


def test_none_shows_nothing() -> None:
    chosen = choose([LOOKUP, CODE], "none", MCP, BUILTIN)
    assert chosen.tools.tools == () and chosen.namespaces == () and not chosen.python
    assert chosen.calls == () and chosen.required is None


def test_required_may_be_met_by_any_call_shown_including_the_servers() -> None:
    chosen = choose([LOOKUP], "required", MCP)
    assert recipients(chosen.required) == ["functions.lookup", "demo.relay", "demo.echo"]
    assert recipients(choose([CODE], "required", builtin=BUILTIN).required) == ["python"]
    with pytest.raises(InvalidRequestError) as raised:
        choose([CODE], "required")  # a built-in tool the server does not run: nothing to call
    assert raised.value.param == "tool_choice"


def test_a_named_function_is_shown_alone_and_required() -> None:
    chosen = choose([LOOKUP, SHELL], {"type": "function", "name": "lookup"}, MCP, BUILTIN)
    assert [t.name for t in chosen.tools.tools] == ["lookup"] and chosen.namespaces == MCP
    assert recipients(chosen.required) == ["functions.lookup"]
    with pytest.raises(InvalidRequestError) as raised:
        choose([LOOKUP], {"type": "custom", "name": "lookup"})  # the name, but not a custom tool
    assert raised.value.param == "tool_choice.name"


def test_allowed_tools_narrows_what_is_shown_and_in_required_mode_what_is_called() -> None:
    allowed = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "mcp", "server_label": "demo"}],
    }
    chosen = choose([LOOKUP, CODE], allowed, MCP, BUILTIN)
    assert chosen.tools.tools == () and chosen.python is False  # neither the function nor code_interpreter
    assert recipients(chosen.required) == ["demo.relay", "demo.echo"]
    auto = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "lookup"}]}
    chosen = choose([LOOKUP, SHELL], auto)
    assert [t.name for t in chosen.tools.tools] == ["lookup"] and chosen.required is None


def test_a_named_mcp_server_or_tool_is_shown_alone_and_required() -> None:
    chosen = choose([LOOKUP], {"type": "mcp", "server_label": "demo", "name": "echo"}, MCP, BUILTIN)
    assert chosen.tools.tools == () and recipients(chosen.required) == ["demo.echo"]
    for choice, param in (
        ({"type": "mcp", "server_label": "other"}, "tool_choice.server_label"),
        ({"type": "mcp", "server_label": "demo", "name": "nope"}, "tool_choice.name"),
    ):
        with pytest.raises(InvalidRequestError) as raised:
            choose([LOOKUP], choice, MCP)
        assert raised.value.param == param


def test_a_named_built_in_tool_is_shown_alone_when_the_server_runs_it() -> None:
    chosen = choose([LOOKUP, CODE, WEB], {"type": "web_search"}, MCP, BUILTIN)
    assert chosen.tools.tools == () and chosen.namespaces == () and chosen.python is False
    assert recipients(chosen.required) == ["browser.search", "browser.open", "browser.find"]
    for tools, builtin, says in (([CODE], None, "--python_tool"), ([LOOKUP], BUILTIN, "does not declare")):
        with pytest.raises(InvalidRequestError, match=says):
            choose(tools, {"type": "code_interpreter"}, builtin=builtin)


@pytest.mark.parametrize(
    ("choice", "kinds"),
    [
        ("auto", {"code_interpreter", "web_search"}),
        ("none", set()),
        ({"type": "code_interpreter"}, {"code_interpreter"}),
        ({"type": "function", "name": "lookup"}, set()),
        ({"type": "allowed_tools", "tools": [{"type": "web_search"}]}, {"web_search"}),
        ({"type": "file_search"}, set()),
    ],
)
def test_builtin_types_shown_is_the_same_rule_for_the_built_in_tools_alone(
    choice: Any, kinds: set[str]
) -> None:
    assert builtin_types_shown(parse_tools([LOOKUP, CODE, WEB]), parse_tool_choice(choice)) == kinds
