"""Encrypted content: reasoning and compaction summaries a stateless client carries between turns.

A blob is ``v1.`` + base64url(nonce ‖ AES-256-GCM ciphertext ‖ tag) of a small
JSON payload. The item kind (``reasoning``, ``compaction``) is authenticated as
associated data, so a reasoning blob cannot be replayed as a compaction summary.
Anything that does not decrypt under this server's key (tampered, truncated,
another server's, another kind) is a 400 ``invalid_encrypted_content`` naming the
item. Replicas sharing a key read each other's blobs.

The key (32 bytes, base64 in text form) comes from, in order: ``--encryption_key_file``,
``$TRTLLM_RESPONSES_ENCRYPTION_KEY``, else a key generated once into the cache
folder (``encryption.key``, mode 0600) and reused by later starts.

``unseal_items`` turns input items that carry encrypted content into the plain
items the Harmony adapter reads: a reasoning item gets its ``content`` back; a
``compaction`` item becomes a user message holding the handoff summary
(:data:`SUMMARY_PREFIX` + summary), read by the model where it stands.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import InvalidRequestError

__all__ = [
    "ENV_ENCRYPTION_KEY",
    "SUMMARY_PREFIX",
    "ContentSealer",
    "load_key",
    "unseal_items",
]

logger = logging.getLogger(__name__)

ENV_ENCRYPTION_KEY = "TRTLLM_RESPONSES_ENCRYPTION_KEY"
KEY_FILENAME = "encryption.key"
_VERSION = "v1."
_NONCE_BYTES = 12
_AAD = b"trtllm-responses/v1/"
#: How a compaction summary reads to the model (a user message, where the compaction item stands).
SUMMARY_PREFIX = (
    "Another model worked on this conversation before you and left this handoff summary of "
    "everything before this point; continue from it:\n\n"
)


class ContentSealer:
    """Seals and opens encrypted content under one 32-byte key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError(f"the encryption key must be 32 bytes, got {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, kind: str, payload: Mapping[str, Any]) -> str:
        """The encrypted blob of ``payload`` for an item of ``kind``."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, orjson.dumps(payload), _AAD + kind.encode())
        return _VERSION + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open(self, kind: str, blob: Any, param: str) -> dict[str, Any]:
        """The payload of ``blob``; InvalidRequestError naming ``param`` if it is not ours or was changed."""
        error = InvalidRequestError(
            f"The encrypted content at '{param}' could not be verified: it was altered, truncated, or "
            "sealed by a server with another key.",
            param=param,
            code="invalid_encrypted_content",
        )
        if not isinstance(blob, str) or not blob.startswith(_VERSION):
            raise error
        try:
            raw = base64.urlsafe_b64decode(blob[len(_VERSION) :].encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise error from None
        if len(raw) < _NONCE_BYTES + 16:
            raise error
        try:
            plain = self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _AAD + kind.encode())
            payload = orjson.loads(plain)
        except (InvalidTag, orjson.JSONDecodeError):
            raise error from None
        if not isinstance(payload, dict):
            raise error
        return payload

    # -- the two kinds ---------------------------------------------------------------------

    def seal_reasoning(self, text: str) -> str:
        """A reasoning item's ``encrypted_content``: its analysis text."""
        return self.seal("reasoning", {"text": text})

    def seal_summary(self, summary: str) -> str:
        """A compaction item's ``encrypted_content``: the handoff summary."""
        return self.seal("compaction", {"summary": summary})


def _decode_key(text: str, source: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{source} does not hold a base64 key") from None
    if len(key) != 32:
        raise ValueError(f"{source} holds a {len(key)}-byte key; it must be 32 bytes (base64 of 32 bytes)")
    return key


def default_key_path() -> Path:
    """``encryption.key`` in the cache folder (``$TRTLLM_RESPONSES_CACHE``, else the XDG cache)."""
    base = os.environ.get("TRTLLM_RESPONSES_CACHE")
    if base:
        return Path(base) / KEY_FILENAME
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "trtllm-responses" / KEY_FILENAME


def load_key(key_file: str | None = None) -> bytes:
    """The server key: the file given, else the environment, else the cache folder's (created once)."""
    if key_file:
        return _decode_key(Path(key_file).read_text(encoding="ascii"), key_file)
    env = os.environ.get(ENV_ENCRYPTION_KEY)
    if env:
        return _decode_key(env, ENV_ENCRYPTION_KEY)
    path = default_key_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = base64.b64encode(secrets.token_bytes(32)).decode("ascii") + "\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            pass
        else:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(text)
            logger.info("Generated the encryption key %s", path)
    return _decode_key(path.read_text(encoding="ascii"), str(path))


# --------------------------------------------------------------------------------------------


def _unseal_item(item: Mapping[str, Any], where: str, sealer: ContentSealer) -> Mapping[str, Any]:
    kind = item.get("type")
    if kind == "reasoning" and item.get("encrypted_content") is not None:
        payload = sealer.open("reasoning", item["encrypted_content"], f"{where}.encrypted_content")
        text = payload.get("text")
        if not isinstance(text, str):
            raise InvalidRequestError(
                f"The encrypted content at '{where}.encrypted_content' is not a reasoning item's.",
                param=f"{where}.encrypted_content",
                code="invalid_encrypted_content",
            )
        return {**item, "content": [{"type": "reasoning_text", "text": text}]}
    if kind == "compaction":
        payload = sealer.open("compaction", item.get("encrypted_content"), f"{where}.encrypted_content")
        summary = payload.get("summary")
        if not isinstance(summary, str):
            raise InvalidRequestError(
                f"The encrypted content at '{where}.encrypted_content' is not a compaction summary.",
                param=f"{where}.encrypted_content",
                code="invalid_encrypted_content",
            )
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": SUMMARY_PREFIX + summary}],
        }
    return item


def unseal_items(
    items: str | Sequence[Any], sealer: ContentSealer, param: str = "input"
) -> str | Sequence[Any]:
    """``items`` with encrypted content opened (the same object when there is none to open)."""
    if isinstance(items, str):
        return items
    out: list[Any] | None = None
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and (
            item.get("type") == "compaction"
            or (item.get("type") == "reasoning" and item.get("encrypted_content") is not None)
        ):
            if out is None:
                out = list(items)
            out[i] = _unseal_item(item, f"{param}[{i}]", sealer)
    return items if out is None else out
