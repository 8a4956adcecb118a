"""The HTTP server: app factory, routes, SSE framing, error mapping."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .app import create_app
from .config import ServerConfig
from .http_limits import HTTPLimits

if TYPE_CHECKING:
    from .http_protocol import uvicorn_config

__all__ = [
    "HTTPLimits",
    "ServerConfig",
    "create_app",
    "uvicorn_config",
]

#: Resolved on first use: uvicorn's protocol settings, for ``serve`` alone.
_ON_FIRST_USE = {
    "uvicorn_config": ".http_protocol",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; this resolves them at run time

    def __getattr__(name: str) -> Any:
        module = _ON_FIRST_USE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
