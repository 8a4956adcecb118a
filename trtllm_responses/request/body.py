"""A request body as JSON: parsed once, its shape bounded, and off the event loop when large.

Bytes alone do not bound what a body costs: 1.9 MB of ``[{},{},…]`` is 633,000 objects, 45 MB once
parsed and ~150 ms of parsing, checking and freeing (the same bytes as one string: 1 ms). So a body's
*shape* is budgeted before it is parsed: :func:`count_values` counts its ``{``, ``[`` and ``,`` outside
strings (one per object and array, and one per value after the first in each), at C speed; past
:data:`MAX_JSON_VALUES` the body is a 400 ``too_many_json_values`` and is never parsed. A body within
the budget is parsed and depth-checked (``check_depth``) once, into a :class:`JsonBody`, which every
later step takes as proof that it was (``parse_request``, the Chat and Messages translations, a
queued WebSocket message). :class:`BodyDecoder` does this on the event loop for a body whose parse is
cheap (up to :data:`INLINE_PARSE_BYTES` and :data:`INLINE_PARSE_VALUES`: ~1-2 ms at worst), and in its own
thread past either (docs/limits.md#hostile-input-and-limits). Parsing costs by values (~70 ns each) and by
bytes
(~1.3 ns each): an agent's 476 KB replay of 7,452 values parses in 0.65 ms, while the thread's hand-offs
(one body at a time, the GIL passed back and forth) made eight such replays arriving together wait 12 ms
instead of 4 (``benchmarks/RESULTS.md``, "Agent sessions").
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ..core import InvalidRequestError, Stepped

if TYPE_CHECKING:
    from .items import InputItem

__all__ = [
    "INLINE_PARSE_BYTES",
    "INLINE_PARSE_VALUES",
    "MAX_JSON_DEPTH",
    "MAX_JSON_VALUES",
    "VALUE_BYTES",
    "BodyDecoder",
    "JsonBody",
    "check_depth",
    "checking_depth",
    "count_values",
    "decode_body",
    "json_object",
    "structure_count",
]

#: Deepest nesting of objects and arrays taken in a request body (tool schemas included).
MAX_JSON_DEPTH = 64
#: Most JSON values (counted as ``count_values`` does) a request body may hold.
MAX_JSON_VALUES = 1 << 18
#: Bodies up to this size and INLINE_PARSE_VALUES values are parsed on the event loop (~1-2 ms at worst);
#: others in the decode thread.
INLINE_PARSE_BYTES = 1 << 20
#: Values (``count_values``' upper bound, strings included: a cheap count) of a body parsed on the loop.
INLINE_PARSE_VALUES = 16 << 10
#: About what CPython holds per counted value once a body is parsed (an object, a list slot, a short
#: string: 8 to 75 bytes measured), for budgets of what parsed bodies hold (a WebSocket's queue).
VALUE_BYTES = 64

# A JSON string, quotes included; possessive, so an unterminated one costs one linear scan.
_STRING_TEXT = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"')
_STRING_BYTES = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')


def structure_count(raw: bytes | str, limit: int) -> int:
    """The ``{``, ``[`` and ``,`` in ``raw``, strings included; counting stops once past ``limit`` (then a
    lower bound). An upper bound of ``raw``'s values (``count_values``)."""
    total = 0
    for mark in ("{", "[", ","):
        total += raw.count(mark) if isinstance(raw, str) else raw.count(mark.encode())
        if total > limit:
            break
    return total


def count_values(raw: bytes | str, limit: int = MAX_JSON_VALUES) -> int:
    """The ``{``, ``[`` and ``,`` of ``raw`` outside its strings (about one per JSON value), as far as a
    budget of ``limit`` needs: up to it, an upper bound (those characters anywhere, strings included);
    past it, at least ``limit + 1``, outside strings.

    A few C-speed passes over the bytes at most (~1 ms a MB), never a parse.
    """
    upper = structure_count(raw, limit)
    if upper <= limit:
        return upper
    if isinstance(raw, str):
        return structure_count(_STRING_TEXT.sub("", raw), limit)
    return structure_count(_STRING_BYTES.sub(b"", raw), limit)


def json_object(raw: bytes | str) -> dict[str, Any]:
    """A request body parsed as a JSON object; InvalidRequestError when it is not JSON or not an object."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    return body


def check_depth(body: dict[str, Any]) -> None:
    """Refuse objects and arrays nested deeper than MAX_JSON_DEPTH, naming where (every route and transport
    calls this on what it parsed before anything walks it: orjson cannot encode past 254 levels)."""
    path = _too_deep(body, 1)
    if path is not None:
        raise _too_deep_error(path)


def checking_depth(body: dict[str, Any]) -> Stepped[None]:
    """:func:`check_depth` as work that pauses after each element of the body's arrays (``input``,
    ``messages``, ``tools``: a translation's 20,000 items are ~8 ms of it; ``core.Stepped``)."""
    for key, value in body.items():
        if isinstance(value, list):  # at depth 2: its containers at 3 (MAX_JSON_DEPTH is past both)
            for i, child in enumerate(value):
                yield
                path = _too_deep(child, 3) if isinstance(child, (dict, list)) else None
                if path is not None:
                    raise _too_deep_error([*path, i, key])
        elif isinstance(value, dict):
            path = _too_deep(value, 2)
            if path is not None:
                raise _too_deep_error([*path, key])


def _too_deep_error(path: list[str | int]) -> InvalidRequestError:
    """The 400 for a container too deep at ``path`` (innermost key first)."""
    where = ""
    for key in reversed(path):
        where += f"[{key}]" if isinstance(key, int) else (f".{key}" if where else str(key))
    return InvalidRequestError(
        f"The request nests objects and arrays more than {MAX_JSON_DEPTH} levels deep (at '{where}').",
        param=where,
    )


def _too_deep(value: dict[str, Any] | list[Any], depth: int) -> list[str | int] | None:
    """The path (innermost key first) to a container deeper than MAX_JSON_DEPTH, or None.

    Recursion is bounded by MAX_JSON_DEPTH, never by the input.
    """
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        if isinstance(child, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                return [key]
            path = _too_deep(child, depth + 1)
            if path is not None:
                path.append(key)
                return path
    return None


@dataclass(frozen=True, slots=True)
class JsonBody:
    """A body parsed as a JSON object whose depth and shape were checked: ``data``, its ``size`` in bytes
    as received, and its ``values`` (``count_values``, an upper bound). ``items``: ``data["input"]`` typed
    (``items.parse_items``), when decoding typed it already (``replay_prefix.py``: a replay's repeated
    items are the last turn's typed items, taken as they are)."""

    data: dict[str, Any]
    size: int
    values: int
    items: tuple[InputItem, ...] | None = None

    @property
    def held_bytes(self) -> int:
        """About what the parsed body holds in memory (its size, plus VALUE_BYTES a value)."""
        return self.size + VALUE_BYTES * self.values


def decode_body(raw: bytes | str, max_values: int = MAX_JSON_VALUES, counted: int | None = None) -> JsonBody:
    """``raw`` parsed and checked: InvalidRequestError if it holds more than ``max_values`` values (before
    parsing), is not a JSON object, or nests deeper than ``MAX_JSON_DEPTH``.

    ``counted``: ``raw``'s ``{``, ``[`` and ``,`` counted whole already and within ``max_values``, which
    ``count_values`` would return again.
    """
    values = counted if counted is not None else count_values(raw, max_values)
    if values > max_values:
        raise InvalidRequestError(
            f"The request holds more than the {max_values} JSON values a request may hold (counting each "
            "object, array and comma outside strings).",
            code="too_many_json_values",
        )
    data = json_object(raw)
    check_depth(data)
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode())
    return JsonBody(data, size, values)


class Prefixes(Protocol):
    """What decodes a large body by what follows a remembered prefix of it (``replay_prefix.py``)."""

    min_bytes: int

    def decode(self, raw: bytes, max_values: int, inline_values: int, scope: str = "") -> JsonBody | None: ...

    def remember(self, raw: bytes | str, body: JsonBody, scope: str = "") -> JsonBody: ...


class BodyDecoder:
    """Decodes bodies (``decode_body``): on the event loop up to ``inline_bytes`` and ``inline_values`` (the
    cheap upper bound of ``count_values``), else in one thread.

    One thread, so that large bodies are decoded one at a time beside the loop rather than many threads
    contending with it for the GIL (orjson holds it while it parses: a parse within the value budget
    holds it for at most ~10 ms, the checks after it yield every ``sys.getswitchinterval()``).
    """

    def __init__(
        self,
        max_values: int = MAX_JSON_VALUES,
        inline_bytes: int = INLINE_PARSE_BYTES,
        inline_values: int = INLINE_PARSE_VALUES,
        prefixes: Prefixes | None = None,
    ) -> None:
        self.max_values = max_values
        self.inline_bytes = inline_bytes
        self.inline_values = inline_values
        #: Large bodies' prefixes, so a replay parses only what follows its last turn's (``replay_prefix.py``).
        self.prefixes = prefixes
        self._thread: ThreadPoolExecutor | None = None
        #: Bodies decoded in the thread (for tests and ``/stats``-style checks).
        self.offloaded = 0

    async def decode(self, raw: bytes | str, scope: str = "") -> JsonBody:
        """``raw`` decoded and checked; InvalidRequestError as ``decode_body`` says. ``scope``: the sending
        tenant's (``Tenant.scope``): a large body is decoded from that tenant's remembered prefixes only."""
        prefixes = self.prefixes
        if prefixes is None or len(raw) < prefixes.min_bytes:
            return await self._decode(raw)
        if isinstance(raw, str):  # a WebSocket's text message: its bytes are what turns repeat
            raw = raw.encode()
        found = prefixes.decode(raw, self.max_values, self.inline_values, scope)
        if found is not None:
            return found
        body = await self._decode(raw)
        return prefixes.remember(raw, body, scope)

    async def _decode(self, raw: bytes | str) -> JsonBody:
        if len(raw) <= self.inline_bytes:
            upper = structure_count(raw, self.inline_values)
            if upper <= self.inline_values:  # counted whole: decode_body does not count it again (past
                # max_values, count_values looks again outside strings)
                return decode_body(raw, self.max_values, counted=upper if upper <= self.max_values else None)
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="body-decoder")
        self.offloaded += 1
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, decode_body, raw, self.max_values
        )

    def close(self) -> None:
        """Stop the thread (a decode under way finishes; its caller is answered)."""
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None
