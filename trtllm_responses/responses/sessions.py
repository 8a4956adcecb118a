"""Which session a response belongs to (docs/stores-and-frontends.md#session-affinity).

One session key per response, the first of:

1. the client's affinity header (``request/affinity.py``: TensorRT-LLM's four, then Codex's ``session-id``);
2. its ``prompt_cache_key`` (Codex sends its thread id there too);
3. its ``conversation`` id;
4. the key of the response it continues (``previous_response_id``), which was decided the same way when
   that one was made and is stored with it: the root of the chain, never found by walking the chain,
   on whichever replica stored it;
5. its own id, when it can be continued (stored, or on a WebSocket): it is the root of its chain.

A Chat Completion without a header or ``prompt_cache_key`` has none. The key is returned in the
``x-session-id`` header (a router hashes it) and goes to the engine with every generation of the response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from ..adapter import ConversationHistory
from ..request import ResponsesRequest, key_of_cache_key

__all__ = ["Chain", "HistoryLookup", "session_key"]


@dataclass(frozen=True, slots=True)
class Chain:
    """A response that can be continued: its conversation so far, and its session key (None for a response
    stored before keys were kept)."""

    history: ConversationHistory
    session_key: str | None = None


#: Finds a ``previous_response_id`` somewhere other than the store (a WebSocket's own responses).
HistoryLookup: TypeAlias = Callable[[str], Chain | None]


def session_key(
    request: ResponsesRequest,
    *,
    header: str | None,
    conversation: str | None,
    previous: Chain | None,
    own_id: str | None,
) -> str | None:
    """The session key of a response to ``request`` (the order above).

    ``header``: the client's key from its headers, already checked; ``previous``: what
    ``previous_response_id`` continues; ``own_id``: the response's id if it can be continued, else None.
    """
    if header is not None:
        return header
    if request.prompt_cache_key is not None:
        return key_of_cache_key(request.prompt_cache_key)
    if conversation is not None:
        return conversation
    if previous is not None:
        # A response stored before keys were kept: the chain is rooted at it from here on.
        return previous.session_key or request.previous_response_id
    return own_id
