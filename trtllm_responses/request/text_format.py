"""A request's ``text``, parsed once into a typed :class:`TextConfig`: the one place ``text.format.type`` is read.

``format`` is :class:`PlainText`, :class:`JsonObjectFormat` or :class:`JsonSchemaFormat` (its schema's
strict check and its name's rule are the constraint's, ``constraints/base.py``). ``data`` keeps the
checked ``text`` in the SDK's shape (``format`` always set): what the response echoes and what a
``configuration_update`` item stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openai.types.responses.response_text_config import ResponseTextConfig
from pydantic import ValidationError

from ..core import InvalidRequestError
from .fields import TEXT_FORMATS, check_object, known_fields, one_sentence

__all__ = [
    "JsonObjectFormat",
    "JsonSchemaFormat",
    "PlainText",
    "TextConfig",
    "TextFormat",
    "parse_text",
    "parse_text_update",
]


@dataclass(frozen=True, slots=True)
class PlainText:
    """``{"type": "text"}``: the output is free text."""


@dataclass(frozen=True, slots=True)
class JsonObjectFormat:
    """``{"type": "json_object"}``: the final message is a JSON object."""


@dataclass(frozen=True, slots=True, eq=False)
class JsonSchemaFormat:
    """``{"type": "json_schema", ...}``: the final message is JSON of ``schema``."""

    name: str
    schema: dict[str, Any]
    description: str | None
    strict: bool | None


TextFormat = PlainText | JsonObjectFormat | JsonSchemaFormat


@dataclass(frozen=True, slots=True, eq=False)
class TextConfig:
    """``text``: its format, its verbosity (None: not given), and the checked dict it came from."""

    format: TextFormat
    verbosity: str | None
    data: dict[str, Any]


def _format(data: Mapping[str, Any]) -> TextFormat:
    kind = data["type"]
    if kind == "json_schema":
        return JsonSchemaFormat(data["name"], data["schema"], data.get("description"), data.get("strict"))
    if kind == "json_object":
        return JsonObjectFormat()
    return PlainText()


def parse_text(text: Any) -> TextConfig:
    """``text`` (its ``format`` one of the SDK's response formats; null format means text)."""
    if not isinstance(text, Mapping):
        raise InvalidRequestError("'text' must be an object.", param="text")
    data = {k: v for k, v in text.items() if v is not None}
    if "format" in data:
        data["format"] = check_object(data["format"], TEXT_FORMATS, "text.format", "text format")
    try:
        checked = ResponseTextConfig.model_validate(data)
    except ValidationError as exc:
        raise one_sentence(exc, "text") from None
    result: dict[str, Any] = known_fields(checked)
    result.setdefault("format", {"type": "text"})
    verbosity = result.get("verbosity")
    return TextConfig(_format(result["format"]), verbosity, result)


def parse_text_update(text: Any, where: str) -> TextConfig:
    """A ``configuration_update`` item's ``text`` (at ``where``): a ``text`` or ``json_schema`` format, errors naming it."""
    if not isinstance(text, Mapping) or not isinstance(text.get("format"), Mapping):
        raise InvalidRequestError(f"'{where}.text.format' is required.", param=f"{where}.text.format")
    if text["format"].get("type") not in ("text", "json_schema"):
        raise InvalidRequestError(
            f"'{where}.text.format.type' must be 'text' or 'json_schema'.",
            param=f"{where}.text.format.type",
        )
    try:
        return parse_text({"format": text["format"]})
    except InvalidRequestError as exc:
        raise InvalidRequestError(exc.message, param=f"{where}.{exc.param}", code=exc.code) from None
