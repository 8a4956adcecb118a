"""The HTTP server: app factory, routes, SSE framing, error mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face
from .app import create_app
from .config import MAX_SERVE_FRONTENDS, ServerConfig
from .group import frontend_socket_path, group_metrics_dir
from .http_limits import HTTPLimits

if TYPE_CHECKING:
    from .http_protocol import uvicorn_config

#: Resolved on first use: uvicorn's protocol settings, for ``serve`` alone.
__all__ = lazy_face(globals())
