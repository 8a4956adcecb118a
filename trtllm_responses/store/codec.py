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

What a backend stores (:func:`encode_stored`) is that body behind a prefix saying where it stands in its
chain (docs/sessions-and-kv-cache.md#what-the-store-keeps)::

    b"TRS2" | messages | len(chain) | chain | len(header) | header JSON | ...  (the body as above)

``messages``: the assembled history's message count; ``chain``: the ids of the entries it extends, oldest
first and ``\n``-separated (its snapshot first, its parent last; empty for a snapshot). A delta's body
holds only its own messages and the calls its parent's history lacks; :func:`decode_chain` assembles the
entries of a chain. ``TRS1`` (written before deltas) reads as a snapshot.
"""

from __future__ import annotations

import logging
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence

import orjson

from ..adapter import EMPTY_HISTORY, RenderedMessage
from .base import StoredResponse

logger = logging.getLogger(__name__)

__all__ = [
    "CodecError",
    "chain_of",
    "decode_chain",
    "decode_entry",
    "decode_stored",
    "decode_stored_chain",
    "encode_delta_body",
    "encode_entry",
    "encode_stored",
]

MAGIC = b"TRS1"
CHAINED = b"TRS2"
_U32 = struct.Struct("<I")
_LITTLE = sys.byteorder == "little"


class CodecError(ValueError):
    """Bytes that are not an encoded StoredResponse (corrupt, or written by another version)."""


def _body(
    entry: StoredResponse, messages: Sequence[RenderedMessage], calls: Mapping[str, str]
) -> list[bytes]:
    """The parts of an entry's body after the magic: its header, response, items, and ``messages``' tokens."""
    tokens = array("I")
    listed = []
    for m in messages:
        tokens.extend(m.tokens)
        listed.append([m.source, (1 if m.is_analysis else 0) | (2 if m.is_final else 0), len(m.tokens)])
    if not _LITTLE:
        tokens.byteswap()
    fields = {
        "id": entry.id,
        "items": [[i, len(b)] for i, b in zip(entry.input_item_ids, entry.input_items_json, strict=True)],
        "calls": dict(calls),
        "messages": listed,
    }
    if entry.session_key is not None:
        fields["session"] = entry.session_key
    header = orjson.dumps(fields)
    return [
        _U32.pack(len(header)),
        header,
        _U32.pack(len(entry.response_json)),
        entry.response_json,
        *entry.input_items_json,
        tokens.tobytes(),
    ]


def encode_entry(entry: StoredResponse) -> bytes:
    """The bytes of ``entry``, self-contained (``TRS1``)."""
    return b"".join([MAGIC, *_body(entry, entry.history.messages, entry.history.calls)])


def encode_stored(
    entry: StoredResponse,
    chain: Sequence[str] = (),
    own: tuple[Sequence[RenderedMessage], Mapping[str, str]] | None = None,
) -> bytes:
    """What a backend stores of ``entry`` (``TRS2``): a snapshot without ``chain``, else a delta holding
    ``own`` (:func:`~.base.own_part`: its messages after its parent's, and the calls its parent's lacks) on
    top of the entries ``chain`` names (oldest first, its parent last)."""
    if chain and own is None:
        raise ValueError("a delta needs its own part")
    messages, calls = own if chain and own is not None else (entry.history.messages, entry.history.calls)
    ids = "\n".join(chain).encode()
    prefix = [CHAINED, _U32.pack(len(entry.history.messages)), _U32.pack(len(ids)), ids]
    return b"".join([*prefix, *_body(entry, messages, calls)])


def encode_delta_body(
    entry: StoredResponse, own: tuple[Sequence[RenderedMessage], Mapping[str, str]]
) -> bytes:
    """A delta's bytes after its prefix (:func:`encode_stored` with ``own``): for a backend that writes the
    prefix where it learns the chain (Redis, in a script)."""
    return b"".join(_body(entry, *own))


def chain_of(data: bytes) -> tuple[int, tuple[str, ...]]:
    """From stored bytes' prefix (``data`` may be just its first bytes): the assembled history's message
    count (-1: not said, a ``TRS1`` entry) and the ids of the entries it extends (none: a snapshot)."""
    if data[:4] != CHAINED:
        return -1, ()
    try:
        count, n = struct.unpack_from("<II", data, 4)
    except struct.error as exc:
        raise CodecError(f"corrupt stored response: {exc}") from exc
    if len(data) < 12 + n:
        raise CodecError("corrupt stored response: its chain is cut")
    ids = data[12 : 12 + n].decode()
    return count, tuple(ids.split("\n")) if ids else ()


def _decode(data: bytes) -> tuple[StoredResponse, int, int]:
    """One stored entry, its history holding only its own messages and calls; with the assembled message
    count (-1: not said) and how many entries it extends."""
    try:
        if data[:4] == CHAINED:
            count, chain = chain_of(data)
            pos = 12 + struct.unpack_from("<I", data, 8)[0]
        elif data[:4] == MAGIC:
            count, chain, pos = -1, (), 4
        else:
            raise CodecError("not a stored response (bad magic)")
        view = memoryview(data)
        (hlen,) = _U32.unpack_from(data, pos)
        header = orjson.loads(view[pos + 4 : pos + 4 + hlen])
        pos += 4 + hlen
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
        entry = StoredResponse(header["id"], response_json, tuple(item_ids), tuple(items), history, session)
        return entry, count, len(chain)
    except CodecError:
        raise
    except (ValueError, KeyError, TypeError, struct.error, orjson.JSONDecodeError) as exc:
        raise CodecError(f"corrupt stored response: {exc}") from exc


def decode_entry(data: bytes) -> StoredResponse:
    """The StoredResponse of self-contained bytes (:func:`encode_entry`, or a snapshot of
    :func:`encode_stored`); CodecError if they are not (a delta: :func:`decode_chain`)."""
    entry, _, extends = _decode(data)
    if extends:
        raise CodecError("a delta: its chain is needed to read it")
    return entry


def decode_chain(blobs: Sequence[bytes]) -> StoredResponse:
    """The StoredResponse the last of ``blobs`` is, its history assembled from the entries of its chain
    (``blobs``: its snapshot first, each next one extending the one before); CodecError if they do not
    make one chain."""
    if not blobs:
        raise CodecError("no stored entries")
    messages: list[RenderedMessage] = []
    calls: dict[str, str] = {}
    entry = None
    for n, data in enumerate(blobs):
        entry, count, extends = _decode(data)
        if extends != n:
            raise CodecError("the stored entries are not one chain")
        messages.extend(entry.history.messages)
        calls.update(entry.history.calls)
        if count not in (-1, len(messages)):
            raise CodecError("a delta does not extend the history it names")
    assert entry is not None
    if len(blobs) == 1:
        return entry
    history = EMPTY_HISTORY.extended(messages, calls)
    return StoredResponse(
        entry.id,
        entry.response_json,
        entry.input_item_ids,
        entry.input_items_json,
        history,
        entry.session_key,
    )


def decode_stored(data: bytes | None, response_id: str) -> StoredResponse | None:
    """A backend's stored bytes as an entry; None when absent, or corrupt (logged, treated as absent)."""
    if data is None:
        return None
    try:
        return decode_entry(data)
    except CodecError:
        logger.exception("Stored response %s is corrupt; treating it as absent", response_id)
        return None


def decode_stored_chain(blobs: Sequence[bytes] | None, response_id: str) -> StoredResponse | None:
    """A backend's stored chain (:func:`decode_chain`) as an entry; None when absent, or corrupt (logged)."""
    if not blobs:
        return None
    try:
        return decode_chain(blobs)
    except CodecError:
        logger.exception("Stored response %s is corrupt; treating it as absent", response_id)
        return None
