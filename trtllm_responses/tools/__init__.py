"""Tools the server runs inside a response: the provider seam, MCP servers, and the operator's limits."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import ApprovedCall, ServerTools, ToolNamespace, ToolOutcome, ToolProvider, truncate_output
from .settings import DEFAULT_TOOL_TIMEOUT, PythonLimits, ToolSettings, url_allowed

if TYPE_CHECKING:
    from .fetch import parse_allow_private
    from .prepare import prepare_server_tools
    from .sandbox import SandboxUnavailable, setup_sandbox
    from .unavailable import UNAVAILABLE_KINDS, UnavailableTool

__all__ = [
    "ApprovedCall",
    "DEFAULT_TOOL_TIMEOUT",
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
    "prepare_server_tools": ".prepare",
    "SandboxUnavailable": ".sandbox",
    "setup_sandbox": ".sandbox",
    "UNAVAILABLE_KINDS": ".unavailable",
    "UnavailableTool": ".unavailable",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; this resolves them at run time

    def __getattr__(name: str) -> Any:
        module = _ON_FIRST_USE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
