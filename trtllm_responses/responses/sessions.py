"""Which session a response belongs to (docs/sessions-and-kv-cache.md#identity).

One session key per response, the first of:

1. the client's identity headers (``request/affinity.py``: TensorRT-LLM's four, Codex's, Claude Code's,
   Dynamo's), with the parent agent they name;
2. its ``prompt_cache_key`` (Codex 0.171 sends its tree's id there);
3. its ``conversation`` id;
4. the key of the response it continues (``previous_response_id``), which was decided the same way when
   that one was made and is stored with it: the root of the chain, never found by walking the chain,
   on whichever replica stored it;
5. its own id, when it can be continued (stored, or on a WebSocket): it is the root of its chain.

A Chat Completion or a Message without a header or ``prompt_cache_key`` has none. The key is returned in
the ``x-session-id`` header (a router hashes it) and goes to the engine with every generation of the
response, with the parent and the end-of-session flag the headers gave (only headers give those: a key
from the body has no parent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from ..adapter import ConversationHistory
from ..request import ResponsesRequest, SessionIdentity, key_of_cache_key

__all__ = ["Chain", "HistoryLookup", "session_of"]


@dataclass(frozen=True, slots=True)
class Chain:
    """A response that can be continued: its conversation so far, and its session key (None for a response
    stored before keys were kept)."""

    history: ConversationHistory
    session_key: str | None = None


#: Finds a ``previous_response_id`` somewhere other than the store (a WebSocket's own responses).
HistoryLookup: TypeAlias = Callable[[str], Chain | None]


def session_of(
    request: ResponsesRequest,
    *,
    identity: SessionIdentity,
    conversation: str | None,
    previous: Chain | None,
    own_id: str | None,
) -> SessionIdentity:
    """The session of a response to ``request`` (the order above): ``identity`` with its key decided.

    ``identity``: what the client's headers say, already checked; ``previous``: what
    ``previous_response_id`` continues; ``own_id``: the response's id if it can be continued, else None.
    """
    if identity.key is not None:
        return identity
    return SessionIdentity(_body_key(request, conversation, previous, own_id), final=identity.final)


def _body_key(
    request: ResponsesRequest, conversation: str | None, previous: Chain | None, own_id: str | None
) -> str | None:
    if request.prompt_cache_key is not None:
        return key_of_cache_key(request.prompt_cache_key)
    if conversation is not None:
        return conversation
    if previous is not None:
        # A response stored before keys were kept: the chain is rooted at it from here on.
        return previous.session_key or request.previous_response_id
    return own_id
