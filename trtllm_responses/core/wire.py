"""JSON for what goes on the wire: events, responses, items.

The encoding rules live here: a model is serialized with exactly the fields
that were set on it (``exclude_unset``), so what we put in an event or a
response is what the client gets, nulls included where we set them.

One correction to the SDK's types: it declares ``created_at`` / ``completed_at``
as floats, which pydantic writes as ``1752774614.0``; OpenAI's API and the Open
Responses spec send integers. Responses (and the events carrying one) go
through a path that writes them as integers. They are a handful per request;
deltas keep the direct serializer.
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

__all__ = ["build_sdk_models", "exact_bytes", "json_string", "to_dict", "to_json"]

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


def to_dict(model: BaseModel) -> dict[str, Any]:
    """The JSON-compatible dict of an SDK model, exactly as :func:`to_json` writes it."""
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
    if type(model) in _CARRY_RESPONSE or (type(model) in _CARRY_ITEM and _beta(model.item)):  # type: ignore[attr-defined]
        return orjson.dumps(to_dict(model))
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
