"""JSON for what goes on the wire: events, responses, items.

The encoding rules live here: a model is serialized with exactly the fields
that were set on it (``exclude_unset``), so what we put in an event or a
response is what the client gets, nulls included where we set them.

One correction to the SDK's types: it declares ``created_at`` / ``completed_at``
as floats, which pydantic writes as ``1752774614.0``; OpenAI's API and the Open
Responses spec send integers. Responses (and the events carrying one) go
through a path that writes them as integers. They are a handful per request;
deltas keep the direct serializer.

Logprobs of output text are held as JSON (:class:`LogprobsJSON`), written once per token as the
token arrives: a message of 12,480 tokens with 20 alternatives each is 262,080 entries, which as
SDK models were ~0.95 KiB and ~3 objects each, built, collected and freed in steps that held the
event loop for seconds (issue 30). Whatever carries them (the delta and done events, the content
part, the message, the response) is written with that JSON put in place.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import orjson
from openai.types.beta import BetaResponseOutputItemAddedEvent, BetaResponseOutputItemDoneEvent
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFailedEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
)
from pydantic import BaseModel

__all__ = [
    "LogprobsJSON",
    "build_sdk_models",
    "exact_bytes",
    "held_tokens",
    "json_string",
    "to_dict",
    "to_json",
]

#: The SDK's type modules whose models the server validates and writes.
SDK_TYPE_MODULES = ("openai.types.responses", "openai.types.chat", "openai.types.conversations")

_TIMESTAMPS = ("created_at", "completed_at")
# Responses, and the events that carry one: serialized through to_dict to fix their timestamps.
_CARRY_RESPONSE = frozenset(
    {
        Response,
        ResponseCreatedEvent,
        ResponseInProgressEvent,
        ResponseCompletedEvent,
        ResponseIncompleteEvent,
        ResponseFailedEvent,
    }
)


#: Events carrying one whole item, which may be one of the SDK's beta items (``multi_agent_call``, an item
#: with ``agent``): a declared union the item is not in. Such an item is written by its own type.
_CARRY_ITEM = frozenset(
    {
        ResponseOutputItemAddedEvent,
        ResponseOutputItemDoneEvent,
        BetaResponseOutputItemAddedEvent,
        BetaResponseOutputItemDoneEvent,
    }
)
_BETA = "openai.types.beta."


def _beta(item: Any) -> bool:
    """Whether ``item`` is one of the SDK's beta models (the multi-agent surface's)."""
    return type(item).__module__.startswith(_BETA)


class LogprobsJSON(list):  # type: ignore[type-arg]
    """Output text logprobs held as JSON: an empty list to pydantic (which writes ``[]`` for it), its
    entries in :attr:`parts`, each one or more entries' JSON, comma-joined (``{"token":…,"bytes":…,
    "logprob":…,"top_logprobs":[…]}``, as the SDK's ``ResponseOutputText.Logprob``). :func:`to_json`
    and :func:`to_dict` put the entries in its place; ``len()`` counts the tokens. Appended to while
    its message is written, read-only once its done events are out."""

    __slots__ = ("parts", "tokens")

    def __init__(self, parts: list[bytes] | None = None, tokens: int = 0) -> None:
        super().__init__()
        #: The entries' JSON, in order, each piece one or more entries (comma-joined, no brackets).
        self.parts: list[bytes] = parts if parts is not None else []
        self.tokens = tokens

    def __len__(self) -> int:
        return self.tokens

    def __bool__(self) -> bool:
        return self.tokens > 0

    def __repr__(self) -> str:
        return f"LogprobsJSON(tokens={self.tokens}, bytes={sum(len(p) for p in self.parts)})"

    def append_json(self, part: bytes, tokens: int) -> None:
        """Add ``tokens`` entries written as ``part``."""
        self.parts.append(part)
        self.tokens += tokens

    def json(self) -> bytes:
        """The entries as a JSON array."""
        return b"[" + b",".join(self.parts) + b"]"

    def entries(self) -> list[dict[str, Any]]:
        """The entries as dicts (parsed: for what reads them in Python, not for writing)."""
        return orjson.loads(self.json())  # type: ignore[no-any-return]


def _held(model: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], LogprobsJSON]]:
    """Where ``model`` (an event, a response, an item, a content part) holds logprobs as JSON."""
    fields = getattr(model, "__dict__", None)
    if not fields:
        return []
    found = []
    logprobs = fields.get("logprobs")
    if type(logprobs) is LogprobsJSON:
        found.append(((*path, "logprobs"), logprobs))
    for name in ("part", "item", "response"):
        child = fields.get(name)
        if isinstance(child, BaseModel):
            found += _held(child, (*path, name))
    for name in ("output", "content"):
        children = fields.get(name)
        if isinstance(children, list):
            for i, child in enumerate(children):
                if isinstance(child, BaseModel):
                    found += _held(child, (*path, name, i))
    return found


def held_tokens(model: BaseModel) -> int:
    """Tokens of logprobs ``model`` holds as JSON (what writing it copies: ~1.4 KB a token with 20 alternatives)."""
    return sum(logprobs.tokens for _, logprobs in _held(model))


def _put_held(model: BaseModel, data: dict[str, Any], parsed: bool) -> dict[str, Any]:
    """``data`` (``model``'s dict) with the logprobs ``model`` holds as JSON in place: as an
    ``orjson.Fragment`` (for orjson to write as is) or, ``parsed``, as dicts."""
    for path, logprobs in _held(model):
        where: Any = data
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = logprobs.entries() if parsed else orjson.Fragment(logprobs.json())
    return data


def _plain(model: BaseModel, exclude: set[str] | None = None) -> dict[str, Any]:
    return model.__pydantic_serializer__.to_python(  # type: ignore[no-any-return]
        model, mode="json", exclude_unset=True, by_alias=True, exclude=exclude
    )


def _response_dict(response: Response) -> dict[str, Any]:
    """A response's dict; beta output items written each by its own type (read from Python, so the SDK's
    deferred build of that type happens, which pydantic's ``serialize_as_any`` skips before pydantic 2.13)."""
    if not any(_beta(item) for item in response.output):
        return _plain(response)
    data = _plain(response, {"output"})
    data["output"] = [_plain(item) for item in response.output]
    return data


def _integral_timestamps(response: dict[str, Any]) -> None:
    for key in _TIMESTAMPS:
        value = response.get(key)
        if isinstance(value, float):
            response[key] = int(value)


def to_dict(model: BaseModel, *, logprobs: bool = True) -> dict[str, Any]:
    """The JSON-compatible dict of an SDK model, exactly as :func:`to_json` writes it (``logprobs=False``:
    output text logprobs held as JSON left out, ``[]``: what a conversation's history reads is the text)."""
    data = _dict(model)
    return _put_held(model, data, parsed=True) if logprobs else data


def _dict(model: BaseModel) -> dict[str, Any]:
    if isinstance(model, Response):
        data = _response_dict(model)
        _integral_timestamps(data)
        return data
    if type(model) in _CARRY_RESPONSE:
        data = _plain(model, {"response"})
        data["response"] = _response_dict(model.response)  # type: ignore[attr-defined]
        _integral_timestamps(data["response"])
        return data
    if type(model) in _CARRY_ITEM and _beta(model.item):  # type: ignore[attr-defined]
        data = _plain(model, {"item"})
        data["item"] = _plain(model.item)  # type: ignore[attr-defined]
        return data
    data = _plain(model)
    if isinstance(data.get("response"), dict):
        _integral_timestamps(data["response"])
    return data


def to_json(model: BaseModel) -> bytes:
    """Compact JSON bytes of an SDK model (events, responses, items)."""
    held = _held(model)
    if held:
        return orjson.dumps(_put_held(model, _dict(model), parsed=False))
    if type(model) in _CARRY_RESPONSE or (type(model) in _CARRY_ITEM and _beta(model.item)):  # type: ignore[attr-defined]
        return orjson.dumps(_dict(model))
    return model.__pydantic_serializer__.to_json(model, exclude_unset=True, by_alias=True)


def exact_bytes(data: bytes) -> bytes:
    """A copy of ``data`` in an allocation of its own size, for bytes that are kept.

    orjson's output keeps its 32 KiB working buffer allocated, so 3 KB of JSON can
    hold 32 KB; anything stored or cached should keep an exact copy instead.
    """
    return bytes(memoryview(data))


_MAX_CACHED_STRINGS = 65536
_json_strings: dict[str, bytes] = {}


def json_string(text: str) -> bytes:
    """``text`` as a JSON string, for the per-token writers (SSE deltas, chat chunks): tokens repeat, so
    their encodings are remembered, up to 65,536 strings (then the cache starts again)."""
    encoded = _json_strings.get(text)
    if encoded is None:
        if len(_json_strings) >= _MAX_CACHED_STRINGS:
            _json_strings.clear()
        encoded = _json_strings[text] = exact_bytes(orjson.dumps(text))
    return encoded


def build_sdk_models(modules: tuple[str, ...] = SDK_TYPE_MODULES) -> int:
    """Build now the validators and serializers the SDK defers to each model's first use.

    openai-python declares its models with ``defer_build``: the first response, event or item of each
    kind paid 1-50 ms of schema building inside a request (a final answer's events, first seen at an
    agent's 10th turn, cost that turn as much as its render). ~0.2 s once, at start; returns how many
    models were built.
    """
    built = 0
    for name in modules:
        for value in vars(importlib.import_module(name)).values():
            if inspect.isclass(value) and issubclass(value, BaseModel) and not value.__pydantic_complete__:
                value.model_rebuild()
                built += 1
    return built
