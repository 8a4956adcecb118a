"""Encrypted content: what a stateless client carries between turns without reading it.

:class:`ContentSealer` seals and opens four kinds, each authenticated as its own (a Responses reasoning
item's text, a Messages thinking block's signature, a compaction's handoff summary, a server-run tool
item's *tool read*), each for one tenant (:meth:`ContentSealer.bound`: the tenant's scope is in the
associated data, so a blob opens only for the tenant it was sealed for, and only as its kind), and
``unseal_items`` turns input items carrying them back into what a ``previous_response_id`` continuation
reads; anything that does not open is a 400 ``invalid_encrypted_content`` naming the item. The format,
the key's sources, tool reads and their cap (:data:`TOOL_READ_MAX_BYTES`):
docs/agents-and-long-sessions.md#encrypted-reasoning; the binding to tenants and kinds:
docs/tenants.md#sealed-content-kv-prefixes-and-caches.
"""

from __future__ import annotations

import base64
import binascii
import copy
import logging
import os
import secrets
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..core import InvalidRequestError, Stepped, at_once
from ..request import Compaction, InputItem, Reasoning, parse_item

__all__ = [
    "COMPACTION",
    "ENV_ENCRYPTION_KEY",
    "REASONING",
    "THINKING",
    "SUMMARY_PREFIX",
    "TOOL_READ_MAX_BYTES",
    "ContentSealer",
    "is_tool_read",
    "load_key",
    "unseal_input",
    "unsealing_input",
    "unseal_items",
]

logger = logging.getLogger(__name__)

ENV_ENCRYPTION_KEY = "TRTLLM_RESPONSES_ENCRYPTION_KEY"
KEY_FILENAME = "encryption.key"
_VERSION = "v1."
#: The prefix of a tool-read blob (its plaintext is zlib-compressed JSON); it only routes the
#: item: the kind is authenticated, so a relabelled blob does not open.
TOOL_READ_PREFIX = "v1z."
#: The kinds (each authenticated as its own: a blob of one never opens as another).
REASONING = "reasoning"  # a Responses reasoning item's ``encrypted_content``
THINKING = "thinking"  # a Messages thinking block's ``signature`` (or ``redacted_thinking`` data)
COMPACTION = "compaction"
TOOL_READ = "tool_read"
#: The most JSON a tool read carries (and is decompressed to): a browser page is capped at
#: 256 Ki characters (``tools/browser/pages.py``), up to 1 MiB of UTF-8, plus what the model read.
TOOL_READ_MAX_BYTES = 4 << 20
_NONCE_BYTES = 12
#: The associated data of a blob: this, its kind, "/", and its tenant's scope ("" or "<name>/").
_AAD = b"trtllm-responses/v2/"
#: What blobs sealed before tenants existed were authenticated with (this and the kind; a thinking
#: signature was a reasoning blob): they open for the unscoped tenant only (see ``_open_bytes``).
_LEGACY_AAD = b"trtllm-responses/v1/"
_LEGACY_KIND = {THINKING: REASONING}
#: How a compaction summary reads to the model (a user message, where the compaction item stands).
SUMMARY_PREFIX = (
    "Another model worked on this conversation before you and left this handoff summary of "
    "everything before this point; continue from it:\n\n"
)


class ContentSealer:
    """Seals and opens encrypted content under one 32-byte key, for one tenant's ``scope`` ("": the open
    or one-key tenant, this object; :meth:`bound` gives another tenant's)."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError(f"the encryption key must be 32 bytes, got {len(key)}")
        self._aead = AESGCM(key)
        #: The tenant's scope bound into every blob sealed or opened here.
        self.scope = ""
        #: The kind its reasoning is sealed and opened as: REASONING (Responses) or THINKING (Messages).
        self.reasoning_kind = REASONING
        self._views: dict[tuple[str, bool], ContentSealer] = {("", False): self}

    def bound(self, scope: str, thinking: bool = False) -> ContentSealer:
        """This key's sealer for the tenant of ``scope``, its reasoning as Messages thinking signatures when
        ``thinking``. One object per (scope, thinking), kept: items opened by it stay opened across turns
        (``InputItem.opened`` is keyed by the sealer), and no other tenant's sealer shares them."""
        view = self._views.get((scope, thinking))
        if view is None:
            view = copy.copy(self)  # the same key, AESGCM object and table of views
            view.scope = scope
            view.reasoning_kind = THINKING if thinking else REASONING
            self._views[(scope, thinking)] = view
        return view

    def _aad(self, kind: str) -> bytes:
        return _AAD + kind.encode() + b"/" + self.scope.encode()

    def seal(self, kind: str, payload: Mapping[str, Any]) -> str:
        """The encrypted blob of ``payload`` for an item of ``kind``, for this sealer's tenant."""
        return self._seal_bytes(kind, orjson.dumps(payload), _VERSION)

    def _seal_bytes(self, kind: str, plain: bytes, prefix: str) -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plain, self._aad(kind))
        return prefix + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open(self, kind: str, blob: Any, param: str) -> dict[str, Any]:
        """The payload of ``blob``; InvalidRequestError naming ``param`` if it is not ours or was changed."""
        plain = self._open_bytes(kind, blob, param, _VERSION)
        return _payload(plain, param)

    def _open_bytes(self, kind: str, blob: Any, param: str, prefix: str) -> bytes:
        if not isinstance(blob, str) or not blob.startswith(prefix):
            raise _unverified(param)
        try:
            raw = base64.urlsafe_b64decode(blob[len(prefix) :].encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise _unverified(param) from None
        if len(raw) < _NONCE_BYTES + 16:
            raise _unverified(param)
        nonce, sealed = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
        try:
            return self._aead.decrypt(nonce, sealed, self._aad(kind))
        except InvalidTag:
            pass
        if not self.scope:  # sealed before tenants existed: the unscoped tenant's, as it opened then
            try:
                return self._aead.decrypt(nonce, sealed, _LEGACY_AAD + _LEGACY_KIND.get(kind, kind).encode())
            except InvalidTag:
                pass
        raise _unverified(param)

    # -- the kinds ---------------------------------------------------------------------------

    def seal_reasoning(self, text: str) -> str:
        """A reasoning item's ``encrypted_content`` (a thinking block's ``signature`` for a Messages
        sealer): its analysis text."""
        return self.seal(self.reasoning_kind, {"text": text})

    def seal_summary(self, summary: str) -> str:
        """A compaction item's ``encrypted_content``: the handoff summary."""
        return self.seal(COMPACTION, {"summary": summary})

    def seal_tool_read(self, item_type: str, fields: Mapping[str, Any]) -> str | None:
        """A tool-read carrier's ``encrypted_content``: ``fields`` for the ``item_type`` item before it.

        Compressed, then sealed. None when the JSON is over :data:`TOOL_READ_MAX_BYTES`
        (no carrier then: a stateless replay reads what it read before this existed).
        """
        plain = orjson.dumps({"type": item_type, "fields": fields})
        if len(plain) > TOOL_READ_MAX_BYTES:
            return None
        return self._seal_bytes(TOOL_READ, zlib.compress(plain, _ZLIB_LEVEL), TOOL_READ_PREFIX)

    def open_tool_read(self, blob: Any, param: str) -> tuple[str, dict[str, Any]]:
        """The item type and fields of a tool-read blob (authenticated first, then decompressed, bounded)."""
        packed = self._open_bytes(TOOL_READ, blob, param, TOOL_READ_PREFIX)
        inflater = zlib.decompressobj()
        try:
            plain = inflater.decompress(packed, TOOL_READ_MAX_BYTES + 1)
        except zlib.error:
            raise _unverified(param) from None
        if len(plain) > TOOL_READ_MAX_BYTES or not inflater.eof:
            raise _unverified(param)
        payload = _payload(plain, param)
        item_type, fields = payload.get("type"), payload.get("fields")
        if not isinstance(item_type, str) or not isinstance(fields, dict):
            raise _unverified(param)
        return item_type, fields


#: zlib's level for tool reads: 1 seals a 256 KiB page about 4x faster than the default 6, for a
#: blob ~17% bigger (benchmarks/RESULTS.md, "Tool-read carriers").
_ZLIB_LEVEL = 1


def _unverified(param: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"The encrypted content at '{param}' could not be verified: it was altered, truncated, or "
        "sealed by a server with another key (or for another API key's tenant, or by the other API: a "
        "Messages thinking signature is not a Responses encrypted_content, nor the reverse).",
        param=param,
        code="invalid_encrypted_content",
    )


def _payload(plain: bytes, param: str) -> dict[str, Any]:
    try:
        payload = orjson.loads(plain)
    except orjson.JSONDecodeError:
        raise _unverified(param) from None
    if not isinstance(payload, dict):
        raise _unverified(param)
    return payload


def is_tool_read(item: Mapping[str, Any]) -> bool:
    """Whether ``item`` is a tool-read carrier (a reasoning item whose blob is a tool read's)."""
    blob = item.get("encrypted_content")
    return item.get("type") == "reasoning" and isinstance(blob, str) and blob.startswith(TOOL_READ_PREFIX)


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
        _create_key(path)
    return _decode_key(path.read_text(encoding="ascii"), str(path))


def _create_key(path: Path) -> None:
    """Create ``path`` (mode 0600) holding a new key, unless another process creates it first (then theirs is
    used). The key is written aside and linked into place, so a process starting at the same moment (another
    frontend, another test worker) reads no file or the whole key, never an empty one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, aside = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(base64.b64encode(secrets.token_bytes(32)).decode("ascii") + "\n")
        os.link(aside, path)
    except FileExistsError:  # another process made it first: use theirs
        return
    finally:
        os.unlink(aside)
    logger.info("Generated the encryption key %s", path)


# --------------------------------------------------------------------------------------------


def _opened_string(payload: Mapping[str, Any], key: str, param: str, what: str) -> str:
    """``payload[key]``, a string; else the blob (authentic, but of another shape) is not ``what``."""
    value = payload.get(key)
    if not isinstance(value, str):
        raise InvalidRequestError(
            f"The encrypted content at '{param}' is not {what}.",
            param=param,
            code="invalid_encrypted_content",
        )
    return value


def _unseal_item(item: Mapping[str, Any], where: str, sealer: ContentSealer) -> Mapping[str, Any]:
    kind = item.get("type")
    param = f"{where}.encrypted_content"
    if kind == "reasoning" and item.get("encrypted_content") is not None:
        payload = sealer.open(sealer.reasoning_kind, item["encrypted_content"], param)
        text = _opened_string(payload, "text", param, "a reasoning item's")
        return {**item, "content": [{"type": "reasoning_text", "text": text}]}
    if kind == "compaction":
        payload = sealer.open(COMPACTION, item.get("encrypted_content"), param)
        summary = _opened_string(payload, "summary", param, "a compaction summary")
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": SUMMARY_PREFIX + summary}],
        }
    return item


def unseal_items(
    items: str | Sequence[Any], sealer: ContentSealer, param: str = "input"
) -> str | Sequence[Any]:
    """``items`` with encrypted content opened (the same object when there is none to open).

    A tool-read carrier is opened, merged into the item before it when that is the item
    type it was sealed for, and left as an empty reasoning item (which reads as nothing:
    the items keep their positions, so errors still name the client's indices).
    """
    if isinstance(items, str):
        return items
    out: list[Any] | None = None
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "reasoning" and is_tool_read(item):
            if out is None:
                out = list(items)
            item_type, fields = sealer.open_tool_read(
                item["encrypted_content"], f"{param}[{i}].encrypted_content"
            )
            before = out[i - 1] if i else None
            if isinstance(before, Mapping) and before.get("type") == item_type:
                out[i - 1] = {**before, **fields}
            # else: it follows another item (the client dropped the call): nothing to read
            out[i] = {"type": "reasoning", "summary": []}  # reads as nothing; indices stay the client's
        elif kind == "compaction" or (kind == "reasoning" and item.get("encrypted_content") is not None):
            if out is None:
                out = list(items)
            out[i] = _unseal_item(item, f"{param}[{i}]", sealer)
    return items if out is None else out


def unseal_input(items: str | tuple[InputItem, ...], sealer: ContentSealer) -> str | tuple[InputItem, ...]:
    """A request's typed ``input`` with encrypted content opened (:func:`unseal_items`; the same object when
    there is none to open)."""
    return at_once(unsealing_input(items, sealer))


def unsealing_input(
    items: str | tuple[InputItem, ...], sealer: ContentSealer
) -> Stepped[str | tuple[InputItem, ...]]:
    """:func:`unseal_input` as work that pauses after each item (``core.Stepped``)."""
    if isinstance(items, str):
        return items
    opened: list[InputItem] = []
    changed = False
    for i, item in enumerate(items):
        yield
        if isinstance(item, Reasoning) and is_tool_read(item.data):  # merged into its neighbour: all at once
            return _unseal_with_carriers(items, sealer)
        # Each other item opens alone, kept on the item: a replay's repeated items open once (``items.py``).
        one = _opened(item, f"input[{i}]", sealer)
        changed = changed or one is not item
        opened.append(one)
    return tuple(opened) if changed else items


def _unseal_with_carriers(items: tuple[InputItem, ...], sealer: ContentSealer) -> tuple[InputItem, ...]:
    """``items`` opened by :func:`unseal_items`, tool-read carriers among them."""
    data = [item.data for item in items]
    opened = unseal_items(data, sealer)
    # Only the items opened here are typed again (a replay's other 100+ items keep theirs).
    return tuple(
        item if o is d else parse_item(o, f"input[{i}]")
        for i, (item, o, d) in enumerate(zip(items, opened, data, strict=True))
    )


def _opened(item: InputItem, where: str, sealer: ContentSealer) -> InputItem:
    """``item`` with its encrypted content opened (itself when it has none), opened once per sealer."""
    if not isinstance(item, (Reasoning, Compaction)):
        return item
    kept = item.opened
    if kept is not None and kept[0] is sealer:
        return kept[1]
    data = _unseal_item(item.data, where, sealer)
    return item if data is item.data else item.open_with(sealer, parse_item(data, where))
