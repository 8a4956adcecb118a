"""The store a ``--store`` URL names (the table in ``store/__init__.py``): the durable backends are
imported only when a URL picks them."""

from __future__ import annotations

from .base import ResponseStore
from .memory import ConversationHistoryStore

__all__ = ["open_store"]


def open_store(url: str, *, max_responses: int, max_bytes: int, ttl: int = 0) -> ResponseStore:
    """The store a ``--store`` URL names; ValueError for one that names none."""
    if url == "memory":
        return ConversationHistoryStore(max_responses, max_bytes)
    if url.startswith("sqlite://"):
        # As SQLAlchemy spells it: sqlite:///rel/path.db, sqlite:////abs/path.db.
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
        if not path:
            raise ValueError("--store sqlite:///PATH needs a file path")
        from .sqlite import SQLiteStore

        return SQLiteStore(path, max_responses, max_bytes)
    if url.startswith(("redis://", "rediss://", "unix://")):
        from .redis import RedisStore

        return RedisStore(url, ttl=ttl, max_bytes=max_bytes)
    raise ValueError(f"--store {url!r}: use memory, sqlite:///PATH or redis://HOST:PORT/DB")
