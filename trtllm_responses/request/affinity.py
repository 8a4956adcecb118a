"""Session identity: the headers that name an agent's session (docs/sessions-and-kv-cache.md#identity).

A session key names one agent thread for placement: a router in front of several replicas hashes it (nginx
``hash ... consistent``), and the engine places the thread's turns by it (``conversation_params``, an
attention-DP rank). A request's key is read from the first of these families that gives one, in this order:

1. TensorRT-LLM's serve edge: ``x-session-id``, ``x-correlation-id``, ``x-session-affinity``,
   ``x-multi-turn-session-id`` (``CONVERSATION_ID_HEADERS``, ``tensorrt_llm/serve/conversation_id.py``, in its
   order; the value stripped, an empty one skipped, as there);
2. Codex: ``thread-id`` (one thread), else ``session-id`` (Codex 0.171: the whole tree of an agent and its
   sub-agents; before, the thread); parent: ``x-codex-parent-thread-id``, else the tree's id;
3. Claude Code: ``x-claude-code-agent-id`` (a sub-agent, sent only by one), else ``x-claude-code-session-id``
   (the whole session, main thread and sub-agents); parent: ``x-claude-code-parent-agent-id``, else the session;
4. NVIDIA Dynamo: ``x-dynamo-session-id`` (one reasoning chain); parent: ``x-dynamo-parent-session-id``.

The thread, not the tree, is the key: measured in docs/sessions-and-kv-cache.md#thread-or-tree. The parent is
the key of the agent a sub-agent was spawned by (None for a root, or one equal to the key). Independently of
the family, ``x-dynamo-session-final: true`` says the session ends with this request.

A key is returned in a response header and handed to the engine, so it is never a way to inject a header:
every identity header read (the key's, the parent's, the final flag) is at most :data:`MAX_SESSION_KEY`
characters out of :data:`_KEY_CHARACTERS` (the flag: ``true``, ``false``, ``1`` or ``0``), else the request is a 400
``invalid_session_id`` naming the header, its value never echoed. Headers of a family that did not give
the key are not read. Nothing else a client sends (``Authorization``, cookies) is ever read as a key. A
``prompt_cache_key`` (any string of at most 64 characters, as OpenAI takes it) is the key as it is when it
is one, else a digest of it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..core import InvalidRequestError

__all__ = [
    "AFFINITY_HEADERS",
    "FINAL_HEADER",
    "MAX_SESSION_KEY",
    "NO_IDENTITY",
    "SESSION_HEADER",
    "SessionIdentity",
    "key_of_cache_key",
    "session_identity",
]


@dataclass(frozen=True, slots=True)
class _Family:
    """The headers one client family names a session with: ``thread`` (one agent thread), ``tree`` (the
    agent and its sub-agents), ``parent`` (the agent that spawned this one)."""

    thread: str
    tree: str | None = None
    parent: str | None = None


_FAMILIES = (
    _Family("x-session-id"),
    _Family("x-correlation-id"),
    _Family("x-session-affinity"),
    _Family("x-multi-turn-session-id"),
    _Family("thread-id", tree="session-id", parent="x-codex-parent-thread-id"),
    _Family(
        "x-claude-code-agent-id", tree="x-claude-code-session-id", parent="x-claude-code-parent-agent-id"
    ),
    _Family("x-dynamo-session-id", parent="x-dynamo-parent-session-id"),
)
#: The request headers a session key is read from, in order (above): what a router hashes.
AFFINITY_HEADERS = tuple(
    name for family in _FAMILIES for name in (family.thread, family.tree) if name is not None
)
#: Dynamo's end-of-session flag: ``true`` on a session's last request.
FINAL_HEADER = "x-dynamo-session-final"
#: The response header the session key is returned in (TensorRT-LLM reads it first).
SESSION_HEADER = "x-session-id"
#: The longest session key, in characters.
MAX_SESSION_KEY = 128
# Letters, digits and the punctuation ids and base64 use: no space, comma, semicolon, quote or control.
_KEY_CHARACTERS = re.compile(r"[A-Za-z0-9._:=+/@~-]+")
_READ = {
    name.encode(): name
    for family in _FAMILIES
    for name in (family.thread, family.tree, family.parent)
    if name is not None
}
_READ[FINAL_HEADER.encode()] = FINAL_HEADER
_FLAGS = {"true": True, "1": True, "false": False, "0": False}


@dataclass(frozen=True, slots=True)
class SessionIdentity:
    """Who a request says it is: ``key`` (the placement key: one agent thread; None when no header named
    one), ``parent`` (the key of the agent that spawned it), ``final`` (the session ends with it)."""

    key: str | None = None
    parent: str | None = None
    final: bool = False


#: A request whose headers name no session.
NO_IDENTITY = SessionIdentity()


def _is_key(value: str) -> bool:
    return len(value) <= MAX_SESSION_KEY and _KEY_CHARACTERS.fullmatch(value) is not None


def _refused(header: str, what: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"The '{header}' header is not {what}", param=header, code="invalid_session_id"
    )


def _checked(found: dict[str, str], header: str | None) -> str | None:
    """The stripped value of ``header`` if sent and not empty; InvalidRequestError if it is not a key."""
    if header is None:
        return None
    value = found.get(header, "").strip()
    if not value:
        return None
    if not _is_key(value):
        raise _refused(
            header,
            f"a session key: at most {MAX_SESSION_KEY} characters, each a letter, a digit or one of ._:=+/@~-",
        )
    return value


def _final(found: dict[str, str]) -> bool:
    value = found.get(FINAL_HEADER, "").strip().lower()
    if not value:
        return False
    flag = _FLAGS.get(value)
    if flag is None:
        raise _refused(FINAL_HEADER, "a flag: true, false, 1 or 0")
    return flag


def session_identity(headers: Iterable[tuple[bytes, bytes]]) -> SessionIdentity:
    """The session identity of ASGI ``headers`` (the order above); :data:`NO_IDENTITY` when they name none.
    InvalidRequestError (400 ``invalid_session_id``, ``param`` the header) for a header read that is not a key
    (too long, or a character outside letters, digits and ``._:=+/@~-``) or a final flag that is not one."""
    found: dict[str, str] = {}
    for name, raw in headers:
        header = _READ.get(name)
        if header is not None and header not in found:
            found[header] = raw.decode("latin-1")
    if not found:
        return NO_IDENTITY
    final = _final(found)
    for family in _FAMILIES:
        thread = _checked(found, family.thread)
        tree = _checked(found, family.tree)
        key = thread or tree
        if key is None:
            continue
        parent = None
        if thread is not None:  # a tree's id, or a named parent, is a parent only of another thread
            parent = _checked(found, family.parent) or tree
        return SessionIdentity(key, parent if parent != key else None, final)
    return SessionIdentity(final=final) if final else NO_IDENTITY


def key_of_cache_key(prompt_cache_key: str) -> str:
    """The session key a ``prompt_cache_key`` gives: itself when it is a key, else ``pck_`` and a digest."""
    value = prompt_cache_key.strip()
    if value and _is_key(value):
        return value
    return "pck_" + hashlib.blake2b(prompt_cache_key.encode(), digest_size=16).hexdigest()
