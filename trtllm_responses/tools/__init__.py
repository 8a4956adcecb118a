"""Tools the server runs inside a response: the provider seam, MCP servers, and the operator's limits."""

from .base import ApprovedCall, ServerTools, ToolNamespace, ToolOutcome, ToolProvider, truncate_output
from .settings import ToolSettings, url_allowed

__all__ = [
    "ApprovedCall",
    "ServerTools",
    "ToolNamespace",
    "ToolOutcome",
    "ToolProvider",
    "ToolSettings",
    "truncate_output",
    "url_allowed",
]
