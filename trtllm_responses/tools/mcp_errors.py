"""How an MCP exchange failed: the ``mcp_protocol_error`` of a failed call, a short message for the model and
the log, and the ``error.type`` of its span (``tools/spans.py``)."""

from __future__ import annotations

import asyncio

from .base import ToolOutcome
from .mcp_sdk import http, protocol_error_code, protocol_error_message
from .mcp_session import SessionFailed

__all__ = [
    "CONNECTION_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "REQUEST_TIMEOUT",
    "URLNotAllowed",
    "describe_exception",
    "error_type",
    "protocol_error",
]

# JSON-RPC / MCP error codes used in mcp_protocol_error items.
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_TIMEOUT = -32001
CONNECTION_ERROR = -32000


class URLNotAllowed(Exception):
    """A request of an MCP session went outside the allowed prefixes (a redirect, an SSE endpoint)."""


def protocol_error(message: str, code: int) -> ToolOutcome:
    """The outcome of a call the MCP protocol refused: an ``mcp_call`` item's ``mcp_protocol_error``."""
    return ToolOutcome(
        {"output": None, "error": {"type": "mcp_protocol_error", "code": code, "message": message}},
        failed=True,
        error_type=str(code),
    )


def _innermost(exc: BaseException) -> BaseException:
    """What a failed MCP exchange failed of: past a closed session and the SDK's exception groups."""
    while True:
        if isinstance(exc, SessionFailed) and exc.__cause__ is not None:
            exc = exc.__cause__
        elif isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
            exc = exc.exceptions[0]  # type: ignore[attr-defined]
        else:
            return exc


def error_type(exc: BaseException) -> tuple[str, int | None]:
    """A failed MCP exchange's ``error.type`` (the JSON-RPC error code of an error answer, the HTTP status of
    a refused request, ``url_not_allowed``, else the innermost exception's class), and its JSON-RPC code."""
    exc = _innermost(exc)
    code = protocol_error_code(exc)
    if code is not None:
        return str(code), code
    if isinstance(exc, http.HTTPStatusError):
        return str(exc.response.status_code), None
    if isinstance(exc, URLNotAllowed):
        return "url_not_allowed", None
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled", None
    return type(exc).__qualname__, None


def describe_exception(exc: BaseException) -> tuple[str, int | None]:
    """A short message for a failed MCP exchange (the innermost cause), and its HTTP status if any."""
    exc = _innermost(exc)
    if isinstance(exc, SessionFailed):
        return "the connection to the MCP server failed", None
    if isinstance(exc, http.HTTPStatusError):
        return f"the MCP server answered HTTP {exc.response.status_code}", exc.response.status_code
    if isinstance(exc, http.ConnectError):
        return "could not connect to the MCP server", None
    if isinstance(exc, http.TimeoutException):
        return "the MCP server did not answer in time", None
    protocol = protocol_error_message(exc)
    if protocol is not None:
        return f"the MCP server returned an error: {protocol}", None
    if isinstance(exc, URLNotAllowed):
        return str(exc), None
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, None
