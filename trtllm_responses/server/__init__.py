"""The HTTP server: app factory, routes, SSE framing, error mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import resolver
from .app import create_app
from .config import MAX_SERVE_FRONTENDS, ServerConfig
from .group import frontend_socket_path, group_metrics_dir
from .http_limits import HTTPLimits

if TYPE_CHECKING:
    from .http_protocol import uvicorn_config

__all__ = [
    "HTTPLimits",
    "MAX_SERVE_FRONTENDS",
    "ServerConfig",
    "frontend_socket_path",
    "group_metrics_dir",
    "create_app",
    "uvicorn_config",
]

#: Resolved on first use: uvicorn's protocol settings, for ``serve`` alone.
_ON_FIRST_USE = {
    "uvicorn_config": ".http_protocol",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; this resolves them at run time
    __getattr__ = resolver(__name__, _ON_FIRST_USE)
