"""Tools the server runs inside a response: the provider seam, MCP servers, and the operator's limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face
from .base import ApprovedCall, ServerTools, ToolNamespace, ToolOutcome, ToolProvider, truncate_output
from .settings import DEFAULT_TOOL_TIMEOUT, PythonLimits, ToolSettings, url_allowed

if TYPE_CHECKING:
    from .fetch import parse_allow_private
    from .multi_agent import Coordinator, MultiAgentProvider
    from .prepare import prepare_server_tools
    from .sandbox import SandboxUnavailable, setup_sandbox
    from .spans import agent_session, agent_span, finish_tool_span, tool_span
    from .unavailable import UNAVAILABLE_KINDS, UnavailableTool

#: Resolved on first use: MCP's client (``prepare``, ``unavailable``) costs seconds to import, the
#: sandbox and the guarded fetch are for the server and its flags.
__all__ = lazy_face(globals())
