"""Tools the server runs inside a response: the provider seam, MCP servers, and the operator's limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import resolver
from .base import ApprovedCall, ServerTools, ToolNamespace, ToolOutcome, ToolProvider, truncate_output
from .settings import DEFAULT_TOOL_TIMEOUT, PythonLimits, ToolSettings, url_allowed

if TYPE_CHECKING:
    from .fetch import parse_allow_private
    from .multi_agent import Coordinator, MultiAgentProvider
    from .prepare import prepare_server_tools
    from .sandbox import SandboxUnavailable, setup_sandbox
    from .unavailable import UNAVAILABLE_KINDS, UnavailableTool

__all__ = [
    "ApprovedCall",
    "Coordinator",
    "DEFAULT_TOOL_TIMEOUT",
    "MultiAgentProvider",
    "PythonLimits",
    "SandboxUnavailable",
    "ServerTools",
    "ToolNamespace",
    "ToolOutcome",
    "ToolProvider",
    "ToolSettings",
    "UNAVAILABLE_KINDS",
    "UnavailableTool",
    "parse_allow_private",
    "prepare_server_tools",
    "setup_sandbox",
    "truncate_output",
    "url_allowed",
]

#: Resolved on first use: MCP's client (``prepare``, ``unavailable``) costs seconds to import, the
#: sandbox and the guarded fetch are for the server and its flags.
_ON_FIRST_USE = {
    "parse_allow_private": ".fetch",
    "Coordinator": ".multi_agent",
    "MultiAgentProvider": ".multi_agent",
    "prepare_server_tools": ".prepare",
    "SandboxUnavailable": ".sandbox",
    "setup_sandbox": ".sandbox",
    "UNAVAILABLE_KINDS": ".unavailable",
    "UnavailableTool": ".unavailable",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; this resolves them at run time
    __getattr__ = resolver(__name__, _ON_FIRST_USE)
