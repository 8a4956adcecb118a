"""The one entry point from the service: a request's server-run tools, ready for one response.

Today that is its MCP servers (``mcp_request.py``); python and browser
providers join here, so the service and the loop never learn which providers
exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidRequestError
from ..protocol import ResponsesRequest
from .base import ServerTools
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
    if any(tool.get("type") == "mcp" for tool in request.tools):
        return await prepare_mcp_tools(request.tools, request.input, history_calls, settings)
    if _approves_a_call(request.input):
        raise InvalidRequestError(
            "An mcp_approval_response approves a call, but tools declares no mcp tool to run it with.",
            param="tools",
        )
    return None


def _approves_a_call(input_items: Any) -> bool:
    return isinstance(input_items, list) and any(
        isinstance(item, dict) and item.get("type") == "mcp_approval_response" and item.get("approve") is True
        for item in input_items
    )
