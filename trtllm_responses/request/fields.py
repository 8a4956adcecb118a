"""Checks of a request's object-valued fields against the ``openai`` SDK's own types.

``tools``, ``tool_choice`` and ``text.format`` are unions of object shapes told apart by
their ``type``. Each is checked (:func:`check_object`) against the SDK model that ``type`` names
(the response-side model, which is what the response echoes), so that:

- a wrong type anywhere is a 400 naming the field (``tools[0].container``), in one sentence;
- an unknown ``type`` is a 400 naming it;
- what the response echoes is only what was checked, in the SDK's shape: keys the
  SDK does not know are dropped (the SDK's models keep extra keys, so we strip them).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from openai.types.responses.response import ToolChoice
from openai.types.responses.response_format_text_config import ResponseFormatTextConfig
from openai.types.responses.tool import Tool
from pydantic import BaseModel, ValidationError

from ..core import InvalidRequestError

__all__ = ["TEXT_FORMATS", "TOOLS", "TOOL_CHOICES", "check_object", "known_fields", "one_sentence"]

_MAX_MESSAGE = 200


def _members(union: Any) -> dict[str, type[BaseModel]]:
    """``type`` value → SDK model, for a union of models told apart by a ``type`` Literal."""
    while typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    out: dict[str, type[BaseModel]] = {}
    for member in typing.get_args(union):
        if isinstance(member, type) and issubclass(member, BaseModel) and "type" in member.model_fields:
            for value in typing.get_args(member.model_fields["type"].annotation):
                out[str(value)] = member
    return out


#: ``type`` → the SDK model a tool, a tool choice object, a text format of that type is checked against.
TOOLS = _members(Tool)
TOOL_CHOICES = _members(ToolChoice)
TEXT_FORMATS = _members(ResponseFormatTextConfig)


def one_sentence(error: ValidationError, param: str) -> InvalidRequestError:
    """The first problem of a pydantic error, as one sentence naming the field."""
    first = error.errors(include_url=False)[0]
    where = param
    for part in first["loc"]:
        if isinstance(part, int):
            where += f"[{part}]"
        elif not _is_union_tag(part):
            where += f".{part}" if where else part
    message = first["msg"]
    if len(message) > _MAX_MESSAGE:
        message = message[:_MAX_MESSAGE] + "…"
    return InvalidRequestError(
        f"Invalid value for '{where}': {message[:1].lower()}{message[1:]}.", param=where
    )


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list", "none", "tagged-union"})


def _is_union_tag(part: str) -> bool:
    """pydantic names the union branch it tried in an error's location (``str``, ``list[any]``)."""
    return part in _TYPE_TAGS or "[" in part or "(" in part


def known_fields(value: Any) -> Any:
    """A checked SDK model as JSON-like data, with only the fields the SDK declares (that were set)."""
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return {
            fields[name].alias or name: known_fields(getattr(value, name))
            for name in value.model_fields_set
            if name in fields
        }
    if isinstance(value, list):
        return [known_fields(v) for v in value]
    if isinstance(value, dict):
        return {k: known_fields(v) for k, v in value.items()}
    return value


def check_object(value: Any, models: Mapping[str, type[BaseModel]], param: str, what: str) -> dict[str, Any]:
    """``value`` checked against the SDK model its ``type`` names, as a dict of the fields the SDK declares."""
    if not isinstance(value, Mapping):
        raise InvalidRequestError(f"'{param}' must be an object.", param=param)
    kind = value.get("type")
    if not isinstance(kind, str):
        raise InvalidRequestError(f"'{param}.type' must be a string.", param=f"{param}.type")
    model = models.get(kind)
    if model is None:
        raise InvalidRequestError(
            f"Unknown {what} type {kind[:64]!r} at '{param}.type'.", param=f"{param}.type"
        )
    try:
        checked = model.model_validate(dict(value))
    except ValidationError as exc:
        raise one_sentence(exc, param) from None
    data: dict[str, Any] = known_fields(checked)
    return data
