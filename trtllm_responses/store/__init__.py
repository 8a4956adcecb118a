"""Stored responses: one protocol (``base``), three backends, one byte codec for the durable ones.

=========================  ==================================================================
``--store``                backend
=========================  ==================================================================
``memory``                 :class:`ConversationHistoryStore` (LRU in this process; the default)
``sqlite:///PATH``         :class:`SQLiteStore` (durable, WAL, LRU; one machine)
``redis://HOST:PORT/DB``   :class:`RedisStore` (shared by processes and replicas; TTL)
=========================  ==================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import resolver
from .base import (
    ConversationHead,
    ConversationItem,
    ConversationPage,
    ResponseStore,
    StoredConversation,
    StoredResponse,
    StoreStats,
    item_ids,
)
from .codec import CodecError, decode_entry, encode_entry
from .memory import ConversationHistoryStore

if TYPE_CHECKING:
    from .redis import RedisStore
    from .sqlite import SQLiteStore

__all__ = [
    "CodecError",
    "ConversationHead",
    "ConversationHistoryStore",
    "ConversationItem",
    "ConversationPage",
    "RedisStore",
    "ResponseStore",
    "SQLiteStore",
    "StoreStats",
    "StoredConversation",
    "StoredResponse",
    "decode_entry",
    "encode_entry",
    "item_ids",
    "open_store",
]

#: Resolved on first use: the durable backends, loaded where ``open_store`` (or a caller) picks them.
_ON_FIRST_USE = {
    "RedisStore": ".redis",
    "SQLiteStore": ".sqlite",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; this resolves them at run time
    __getattr__ = resolver(__name__, _ON_FIRST_USE)


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
