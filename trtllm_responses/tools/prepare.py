"""The one entry point from the service: a request's server-run tools, ready for one response.

Its MCP servers (``mcp_request.py``) and gpt-oss's python and browser
(``builtin.py``) join here, so the service and the loop never learn which
providers exist.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core import InvalidRequestError
from ..request import InputItem, McpApprovalResponse, McpTool, ResponsesRequest
from .base import ServerTools
from .builtin import builtin_shown, external_web_access, prepare_builtin_tools
from .mcp_request import prepare_mcp_tools
from .settings import ToolSettings

__all__ = ["prepare_server_tools"]


async def prepare_server_tools(
    request: ResponsesRequest, history_calls: Mapping[str, str], settings: ToolSettings
) -> ServerTools | None:
    """The request's server-run tools (listed or reused), or None when it has none: no tool loop.

    Raises InvalidRequestError for a tool the request cannot have, or an
    approval with no tool to run the approved call.
    """
    tools = None
    if any(isinstance(tool, McpTool) for tool in request.tools):
        tools = await prepare_mcp_tools(request.tools, request.input, history_calls, settings)
    elif _approves_a_call(request.input):
        raise InvalidRequestError(
            "An mcp_approval_response approves a call, but tools declares no mcp tool to run it with.",
            param="tools",
        )
    # gpt-oss's python and browser: shown and run only when the operator turned their backends on.
    shown = builtin_shown(request.tools, request.tool_choice, settings)
    return prepare_builtin_tools(
        shown, settings, tools, history_calls, web_access=external_web_access(request.tools)
    )


def _approves_a_call(input_items: str | tuple[InputItem, ...]) -> bool:
    """Whether an ``mcp_approval_response`` among the items approves a call (a string input holds none: read
    as items, a 1 MB one was a million characters looked at on the event loop, ~80 ms)."""
    if isinstance(input_items, str):
        return False
    return any(isinstance(item, McpApprovalResponse) and item.approves for item in input_items)
