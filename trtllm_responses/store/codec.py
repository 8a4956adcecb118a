"""The byte encoding of a StoredResponse, for backends that keep bytes (SQLite, Redis).

Histories stay token-level: every message's rendered token ids are kept, so
continuing a stored response never re-renders or re-tokenizes its history.
Tokens of all messages are one little-endian ``uint32`` array (4 bytes a token,
one ``memcpy`` to decode); everything else is a JSON header. No pickle: a
shared store must never be a way to run code in the server.

Layout (all lengths little-endian uint32)::

    b"TRS1" | len(header) | header JSON | len(response) | response JSON | item JSON ... | tokens

Header: ``{"id", "items": [[id, nbytes], ...], "calls": {call_id: name},
"messages": [[source, flags, ntokens], ...]}`` (flags: 1 analysis, 2 final), and ``"session"``, the
session key, when the entry has one (an entry written before keys were kept has none).
"""

from __future__ import annotations

import logging
import struct
import sys
from array import array

import orjson

from ..adapter import EMPTY_HISTORY, RenderedMessage
from .base import StoredResponse

logger = logging.getLogger(__name__)

__all__ = ["CodecError", "decode_entry", "decode_stored", "encode_entry"]

MAGIC = b"TRS1"
_U32 = struct.Struct("<I")
_LITTLE = sys.byteorder == "little"


class CodecError(ValueError):
    """Bytes that are not an encoded StoredResponse (corrupt, or written by another version)."""


def encode_entry(entry: StoredResponse) -> bytes:
    """The bytes of ``entry``."""
    tokens = array("I")
    messages = []
    for m in entry.history.messages:
        tokens.extend(m.tokens)
        messages.append([m.source, (1 if m.is_analysis else 0) | (2 if m.is_final else 0), len(m.tokens)])
    if not _LITTLE:
        tokens.byteswap()
    fields = {
        "id": entry.id,
        "items": [[i, len(b)] for i, b in zip(entry.input_item_ids, entry.input_items_json, strict=True)],
        "calls": dict(entry.history.calls),
        "messages": messages,
    }
    if entry.session_key is not None:
        fields["session"] = entry.session_key
    header = orjson.dumps(fields)
    return b"".join(
        [
            MAGIC,
            _U32.pack(len(header)),
            header,
            _U32.pack(len(entry.response_json)),
            entry.response_json,
            *entry.input_items_json,
            tokens.tobytes(),
        ]
    )


def decode_entry(data: bytes) -> StoredResponse:
    """The StoredResponse of bytes made by :func:`encode_entry`; CodecError if they are not."""
    try:
        if data[:4] != MAGIC:
            raise CodecError("not a stored response (bad magic)")
        view = memoryview(data)
        (hlen,) = _U32.unpack_from(data, 4)
        pos = 8 + hlen
        header = orjson.loads(view[8:pos])
        (rlen,) = _U32.unpack_from(data, pos)
        pos += 4
        response_json = bytes(view[pos : pos + rlen])
        pos += rlen
        item_ids = []
        items = []
        for item_id, n in header["items"]:
            item_ids.append(item_id)
            items.append(bytes(view[pos : pos + n]))
            pos += n
        tokens = array("I")
        tokens.frombytes(view[pos:])
        if not _LITTLE:
            tokens.byteswap()
        messages = []
        at = 0
        for source, flags, n in header["messages"]:
            messages.append(
                RenderedMessage(source, tuple(tokens[at : at + n]), bool(flags & 1), bool(flags & 2))
            )
            at += n
        if at != len(tokens):
            raise CodecError("token count does not match the messages")
        history = (
            EMPTY_HISTORY.extended(messages, header["calls"])
            if messages or header["calls"]
            else EMPTY_HISTORY
        )
        session = header.get("session")
        if session is not None and not isinstance(session, str):
            raise CodecError("the session key is not a string")
        return StoredResponse(header["id"], response_json, tuple(item_ids), tuple(items), history, session)
    except CodecError:
        raise
    except (ValueError, KeyError, TypeError, struct.error, orjson.JSONDecodeError) as exc:
        raise CodecError(f"corrupt stored response: {exc}") from exc


def decode_stored(data: bytes | None, response_id: str) -> StoredResponse | None:
    """A backend's stored bytes as an entry; None when absent, or corrupt (logged, treated as absent)."""
    if data is None:
        return None
    try:
        return decode_entry(data)
    except CodecError:
        logger.exception("Stored response %s is corrupt; treating it as absent", response_id)
        return None
