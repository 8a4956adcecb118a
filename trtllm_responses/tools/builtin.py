"""gpt-oss's built-in tools for one request: which are shown to the model, and their providers.

A request's ``code_interpreter`` tool is gpt-oss's ``python``, its ``web_search``
tool gpt-oss's ``browser``. Each is shown to the model (in the system message's
``# Tools`` section, with the instruction text the server's tool answers to) only
when the operator turned its backend on (``--python_tool``, ``--browser_backend``):
a tool the server would not run stays hidden, so the model never calls it in vain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core import InvalidRequestError
from ..harmony import builtin_types_shown
from ..request import CODE_TOOLS, WEB_SEARCH_TOOLS, HostedTool, RequestTool, ToolChoice
from .base import ServerTools, ToolProvider
from .python_tool import STATELESS_PYTHON_DESCRIPTION, LocalPython, MCPPython
from .settings import ToolSettings

__all__ = ["WEB_SEARCH_TOOLS", "builtin_shown", "external_web_access", "prepare_builtin_tools"]


def builtin_shown(
    tools: Sequence[RequestTool], tool_choice: ToolChoice, settings: ToolSettings
) -> dict[str, str]:
    """The built-in tools to show, ``{"python"|"browser": instruction text}``: declared and run by this server.

    The one rule for hiding them: a declared built-in tool whose backend is off is not shown.
    A ``tool_choice`` naming a tool narrows them: ``{"type": "code_interpreter"}`` or
    ``{"type": "web_search_preview"}`` shows only that one (and, in the adapter, no function or MCP
    tools), a function/custom/mcp choice none, ``allowed_tools`` those of its types.
    """
    kinds = builtin_types_shown(tools, tool_choice)
    shown: dict[str, str] = {}
    if settings.python_tool != "off" and kinds & CODE_TOOLS:
        shown["python"] = STATELESS_PYTHON_DESCRIPTION
    if settings.browser_backend != "off" and kinds & WEB_SEARCH_TOOLS:
        from .browser import browser_description

        shown["browser"] = browser_description(
            settings.browser_backend, external_web_access(tools), settings.browser_offline_backend
        )
    return shown


def external_web_access(tools: Sequence[RequestTool]) -> bool:
    """Whether the browser may reach the live web: not when a ``web_search`` tool says
    ``external_web_access: false`` (OpenAI's "offline/cache-only mode"; omitted means true)."""
    return not any(
        isinstance(tool, HostedTool)
        and tool.kind in WEB_SEARCH_TOOLS
        and tool.data.get("external_web_access") is False
        for tool in tools
    )


def _python_provider(settings: ToolSettings) -> ToolProvider:
    if settings.python_tool.startswith("mcp:"):
        return MCPPython(settings.python_tool[len("mcp:") :], settings)
    return LocalPython(settings.python_limits)


def prepare_builtin_tools(
    shown: Mapping[str, str],
    settings: ToolSettings,
    tools: ServerTools | None,
    calls: Mapping[str, str],
    *,
    web_access: bool = True,
) -> ServerTools | None:
    """``tools`` (or new ServerTools) with a provider for each built-in tool shown; None when there is none.
    ``web_access``: :func:`external_web_access` of the request's tools."""
    if not shown:
        return tools
    tools = tools if tools is not None else ServerTools()
    for name in shown:
        if name in tools.providers:
            raise InvalidRequestError(
                f"An mcp tool's server_label {name!r} is the name of gpt-oss's built-in tool; choose another.",
                param="tools",
            )
    tools.builtin = dict(shown)
    if "python" in shown:
        tools.providers["python"] = _python_provider(settings)
    if "browser" in shown:
        from .browser import BrowserProvider

        tools.providers["browser"] = BrowserProvider(settings, calls, external_web_access=web_access)
    return tools
