"""Checks of a request's object-valued fields against the ``openai`` SDK's own types.

``tools``, ``tool_choice`` and ``text`` are unions of object shapes told apart by
their ``type``. Each is checked against the SDK model that ``type`` names (the
response-side model, which is what the response echoes), so that:

- a wrong type anywhere is a 400 naming the field (``tools[0].container``), in one sentence;
- an unknown ``type`` is a 400 naming it;
- what the response echoes is only what was checked, in the SDK's shape: keys the
  SDK does not know are dropped (the SDK's models keep extra keys, so we strip them).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Any

from openai.types.responses.response import ToolChoice
from openai.types.responses.response_format_text_config import ResponseFormatTextConfig
from openai.types.responses.response_text_config import ResponseTextConfig
from openai.types.responses.tool import Tool
from pydantic import BaseModel, ValidationError

from ..core.errors import InvalidRequestError

__all__ = ["check_text", "check_tool_choice", "check_tools", "known_fields", "one_sentence"]

#: OpenAI's rule for function (and other tool) names.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_TOOL_CHOICE_STRINGS = ("auto", "none", "required")
#: ``tool_choice`` types naming the web search tool by its tool type (``{"type": "web_search"}``).
#: The SDK's ``ToolChoiceTypes`` has only ``web_search_preview`` (and its dated name) for it, so
#: these are accepted as that choice, and echoed in the SDK's shape.
WEB_SEARCH_CHOICE_ALIASES = frozenset({"web_search", "web_search_2025_08_26"})
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


_TOOLS = _members(Tool)
_TOOL_CHOICES = _members(ToolChoice)
_TEXT_FORMATS = _members(ResponseFormatTextConfig)


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


def _check_object(value: Any, models: Mapping[str, type[BaseModel]], param: str, what: str) -> dict[str, Any]:
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


def check_tools(tools: Any) -> list[dict[str, Any]]:
    """``tools``, each checked against its SDK type; function names follow OpenAI's rule."""
    if not isinstance(tools, list):
        raise InvalidRequestError("'tools' must be an array of tool objects.", param="tools")
    checked = []
    for i, tool in enumerate(tools):
        data = _check_object(tool, _TOOLS, f"tools[{i}]", "tool")
        name = data.get("name")
        if data["type"] in ("function", "custom") and not TOOL_NAME.fullmatch(name or ""):
            raise InvalidRequestError(
                f"Invalid 'tools[{i}].name': a tool name is 1 to 64 letters, digits, '_' or '-'.",
                param=f"tools[{i}].name",
            )
        checked.append(data)
    return checked


def check_tool_choice(choice: Any) -> str | dict[str, Any]:
    """``tool_choice``: ``auto``/``none``/``required`` or a tool choice object (``allowed_tools`` mode defaults to auto).

    ``{"type": "web_search"}`` is the SDK's ``{"type": "web_search_preview"}`` (see WEB_SEARCH_CHOICE_ALIASES).
    """
    if isinstance(choice, str):
        if choice not in _TOOL_CHOICE_STRINGS:
            raise InvalidRequestError(
                "'tool_choice' must be 'auto', 'none', 'required' or a tool choice object.",
                param="tool_choice",
            )
        return choice
    if isinstance(choice, Mapping) and not isinstance(choice.get("type"), str):
        # Before any lookup by type: an object or array there is unhashable.
        raise InvalidRequestError("'tool_choice.type' must be a string.", param="tool_choice.type")
    if isinstance(choice, Mapping) and choice.get("type") == "allowed_tools":
        choice = {"mode": "auto", **choice}
        tools = choice.get("tools")
        if isinstance(tools, list):
            for i, tool in enumerate(tools):
                where = f"tool_choice.tools[{i}]"
                if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str):
                    raise InvalidRequestError(
                        f"'{where}' must be an object with a string 'type'.", param=where
                    )
                if "name" in tool and not isinstance(tool["name"], str):
                    raise InvalidRequestError(f"'{where}.name' must be a string.", param=f"{where}.name")
    if isinstance(choice, Mapping) and choice.get("type") in WEB_SEARCH_CHOICE_ALIASES:
        # The web_search tool's own names, which the SDK's ToolChoiceTypes lacks: its web_search_preview choice.
        choice = {**choice, "type": "web_search_preview"}
    return _check_object(choice, _TOOL_CHOICES, "tool_choice", "tool_choice")


def check_text(text: Any) -> dict[str, Any]:
    """``text`` (its ``format`` one of the SDK's response formats; null format means text)."""
    if not isinstance(text, Mapping):
        raise InvalidRequestError("'text' must be an object.", param="text")
    data = {k: v for k, v in text.items() if v is not None}
    if "format" in data:
        data["format"] = _check_object(data["format"], _TEXT_FORMATS, "text.format", "text format")
    try:
        checked = ResponseTextConfig.model_validate(data)
    except ValidationError as exc:
        raise one_sentence(exc, "text") from None
    result: dict[str, Any] = known_fields(checked)
    result.setdefault("format", {"type": "text"})
    return result
