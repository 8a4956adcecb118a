"""The foreign APIs this server speaks besides the Responses API, one edge each, over shared pieces.

Each dialect is its request translation (in ``request/``: ``chat.py``, ``anthropic.py``, the body into
the Responses request ``ResponsesService.prepare`` reads, and a service error's param back into the
dialect's field), its endpoint here (``chat.py``, ``messages.py``: prepare once, drive the runs) and
its event writer (``chat_chunks.py``, ``messages_events.py``: the stream state machine's typed events
into the dialect's frames or answer object). What they share is ``edge.py`` (the body read under the
one size rule, the runs driven and answered, stop strings); the routes are the app's table
(``router.py``).
"""

from __future__ import annotations

from .chat import CHAT_PATH, create_chat_completion
from .messages import (
    COUNT_TOKENS_PATH,
    MESSAGES_PATH,
    MessagesEdge,
    anthropic_error_response,
    anthropic_models,
    no_messages_route,
    wants_anthropic,
)

__all__ = [
    "CHAT_PATH",
    "COUNT_TOKENS_PATH",
    "MESSAGES_PATH",
    "MessagesEdge",
    "anthropic_error_response",
    "anthropic_models",
    "create_chat_completion",
    "no_messages_route",
    "wants_anthropic",
]
