"""The HTTP server: app factory, routes, SSE framing, error mapping."""

from .app import create_app

__all__ = ["create_app"]
