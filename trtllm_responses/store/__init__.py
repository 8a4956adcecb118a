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

from ..core import lazy_face
from .base import (
    ConversationHead,
    ConversationItem,
    ConversationPage,
    Parent,
    ResponseStore,
    StoredConversation,
    StoredResponse,
    StoreStats,
    item_ids,
)
from .codec import CodecError, decode_entry, encode_entry
from .from_url import open_store
from .memory import ConversationHistoryStore
from .scoped import ScopedStore, scoped

if TYPE_CHECKING:
    from .redis import RedisStore
    from .sqlite import SQLiteStore

#: Resolved on first use: the durable backends, loaded where ``open_store`` (or a caller) picks them.
__all__ = lazy_face(globals())
