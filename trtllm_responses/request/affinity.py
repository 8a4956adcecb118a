"""Session keys: what keeps a multi-turn session on one replica (docs/stores-and-frontends.md#session-affinity).

A session key names a conversation for placement: a router in front of several replicas hashes it
(nginx ``hash ... consistent``), and TensorRT-LLM takes it as ``conversation_params`` where its
``generate_async`` has that argument. The client may give one in a header; these are read, first
non-empty one wins:

- ``x-session-id``, ``x-correlation-id``, ``x-session-affinity``, ``x-multi-turn-session-id``: the
  headers TensorRT-LLM's own serve edge reads, in its order (``CONVERSATION_ID_HEADERS``,
  ``tensorrt_llm/serve/conversation_id.py``; the value stripped, an empty one skipped, as there);
- ``session-id``: what Codex sends on every Responses request (0.169: its thread id, also sent as
  ``prompt_cache_key``).

A key is echoed in a response header and handed to the engine, so it is never a way to inject a
header: at most :data:`MAX_SESSION_KEY` characters out of :data:`_KEY_CHARACTERS`; a header that is
not such a key is a 400 naming it. Nothing else a client sends (``Authorization``, cookies) is ever
read as a key. A ``prompt_cache_key`` (any string of at most 64 characters, as OpenAI takes it) is the
key as it is when it is one, else a digest of it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ..core import InvalidRequestError

__all__ = [
    "AFFINITY_HEADERS",
    "MAX_SESSION_KEY",
    "SESSION_HEADER",
    "key_of_cache_key",
    "session_key_from_headers",
]

#: The request headers a session key is read from, in order (above).
AFFINITY_HEADERS = (
    "x-session-id",
    "x-correlation-id",
    "x-session-affinity",
    "x-multi-turn-session-id",
    "session-id",
)
#: The response header the session key is returned in (TensorRT-LLM reads it first).
SESSION_HEADER = "x-session-id"
#: The longest session key, in characters.
MAX_SESSION_KEY = 128
# Letters, digits and the punctuation ids and base64 use: no space, comma, semicolon, quote or control.
_KEY_CHARACTERS = re.compile(r"[A-Za-z0-9._:=+/@~-]+")
_HEADER_BYTES = {name.encode(): name for name in AFFINITY_HEADERS}


def _is_key(value: str) -> bool:
    return len(value) <= MAX_SESSION_KEY and _KEY_CHARACTERS.fullmatch(value) is not None


def session_key_from_headers(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The client's session key from ASGI ``headers``; None when it sent none. InvalidRequestError for a
    header that is not a key (too long, or a character outside letters, digits and ``._:=+/@~-``)."""
    found: dict[str, bytes] = {}
    for name, raw in headers:
        header = _HEADER_BYTES.get(name)
        if header is not None and header not in found:
            found[header] = raw
    if not found:
        return None
    for header in AFFINITY_HEADERS:
        given = found.get(header)
        if given is None:
            continue
        value = given.decode("latin-1").strip()
        if not value:
            continue
        if not _is_key(value):
            raise InvalidRequestError(
                f"The '{header}' header is not a session key: at most {MAX_SESSION_KEY} characters, each a "
                "letter, a digit or one of ._:=+/@~-",
                param=header,
                code="invalid_session_id",
            )
        return value
    return None


def key_of_cache_key(prompt_cache_key: str) -> str:
    """The session key a ``prompt_cache_key`` gives: itself when it is a key, else ``pck_`` and a digest."""
    value = prompt_cache_key.strip()
    if value and _is_key(value):
        return value
    return "pck_" + hashlib.blake2b(prompt_cache_key.encode(), digest_size=16).hexdigest()
