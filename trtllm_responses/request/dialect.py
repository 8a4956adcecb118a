"""What the foreign APIs' request edges share: ``chat.py`` (Chat Completions) and ``anthropic.py`` (Messages).

Each reads its API's body into the Responses request body ``ResponsesService.prepare`` reads, so
every API shares one prompt, one Constraint and one generation path. What they do alike is here:
the body checked against its model (:func:`checked`), fields read where a 400 names them
(:func:`object_at`, :func:`string_at`), messages walked (:func:`each_message`), input items gathered with the field each came from
(:class:`Items`), stop strings checked (:func:`stop_strings`), and a checked request
(:class:`Translation`) that names a service error's param as its own API's field
(:meth:`Translation.in_own_terms`, by the API's :class:`ParamNames`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..core import APIError, InvalidRequestError
from .body import JsonBody, check_depth, json_object
from .fields import one_sentence

__all__ = [
    "Items",
    "ParamNames",
    "Translation",
    "checked",
    "each_message",
    "object_at",
    "stop_strings",
    "string_at",
]

M = TypeVar("M", bound=BaseModel)
Options = TypeVar("Options")


def checked(model: type[M], raw: bytes | dict[str, Any] | JsonBody) -> M:
    """``raw`` (a parsed body, whose depth was checked then, or a body to parse) as ``model``; ``null``
    fields are absent; an InvalidRequestError naming the first bad field."""
    if isinstance(raw, JsonBody):
        data = raw.data
    else:
        data = raw if isinstance(raw, dict) else json_object(raw)
        check_depth(data)  # before anything walks it
    try:
        return model.model_validate({key: value for key, value in data.items() if value is not None})
    except ValidationError as exc:
        raise one_sentence(exc, "") from None


def each_message(messages: list[Any]) -> Iterator[tuple[str, Mapping[str, Any], Any]]:
    """Each of ``messages`` with where it stands (``messages[i]``), which must be an object, and its role."""
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        checked = object_at(message, where)
        yield where, checked, checked.get("role")


def object_at(value: Any, where: str) -> Mapping[str, Any]:
    """``value``, which must be an object (else a 400 naming ``where``)."""
    if not isinstance(value, Mapping):
        raise InvalidRequestError(f"'{where}' must be an object.", param=where)
    return value


def string_at(value: Mapping[str, Any], key: str, where: str) -> str:
    """``value[key]``, which must be a string (else a 400 naming ``where.key``)."""
    text = value.get(key)
    if not isinstance(text, str):
        raise InvalidRequestError(f"'{where}.{key}' must be a string.", param=f"{where}.{key}")
    return text


def stop_strings(stops: str | list[str] | None, field: str, most: int, longest: int) -> tuple[str, ...]:
    """The stop strings of ``field`` (one string, or a list of at most ``most``), each non-empty and of at
    most ``longest`` characters (each streamed token is compared with the end of the text)."""
    if stops is None:
        return ()
    listed = [stops] if isinstance(stops, str) else stops
    if len(listed) > most:
        raise InvalidRequestError(
            f"'{field}' holds at most {most} sequences; got {len(listed)}.", param=field
        )
    for i, text in enumerate(listed):
        where = field if isinstance(stops, str) else f"{field}[{i}]"
        if not text:
            raise InvalidRequestError(f"'{where}' must not be empty.", param=where)
        if len(text) > longest:
            raise InvalidRequestError(
                f"'{where}' is {len(text)} characters; the most is {longest}.", param=where
            )
    return tuple(listed)


class Items:
    """Input items being read from a foreign API's messages: each with the field it came from, and the ids of
    the tool calls read so far (an output must answer an earlier call)."""

    __slots__ = ("items", "origins", "call_ids")

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        #: ``origins[k]``: the field ``items[k]`` came from (``messages[2].content[0]``).
        self.origins: list[str] = []
        self.call_ids: set[str] = set()

    def add(self, item: dict[str, Any], origin: str) -> None:
        """Append ``item``, read from the field ``origin``."""
        self.items.append(item)
        self.origins.append(origin)

    def call(self, call_id: str, name: str, arguments: str, origin: str) -> None:
        """Append a tool call (its id may then be answered)."""
        self.call_ids.add(call_id)
        self.add({"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}, origin)

    def answering(self, call_id: str, field: str, calls: str) -> str:
        """``call_id`` (read from ``field``), which an earlier call must have (``calls``: what the API calls
        its tool calls, for the 400 when none has it)."""
        if call_id not in self.call_ids:
            raise InvalidRequestError(
                f"'{field}' is {call_id!r}, which no earlier assistant message's {calls} has as its id.",
                param=field,
            )
        return call_id

    def output(self, call_id: str, output: str, origin: str) -> None:
        """Append the output of the call ``call_id`` (:meth:`answering`)."""
        self.add({"type": "function_call_output", "call_id": call_id, "output": output}, origin)


_INPUT = re.compile(r"^input\[(\d+)\](.*)$")
_TOOLS = re.compile(r"^tools\[(\d+)\](.*)$")


@dataclass(frozen=True, slots=True)
class ParamNames:
    """How one foreign API names the params of the Responses request its body was translated into."""

    #: A Responses param's prefix → the API's (the first that fits: a prefix ending in ``.`` fits every param
    #: it begins, another a whole name or one followed by ``.`` or ``[``).
    renamed: tuple[tuple[str, str], ...]
    #: What follows ``tools[i]``: a prefix → the API's (``.parameters`` → ``.input_schema``).
    tool_fields: tuple[tuple[str, str], ...] = ()
    #: Whether a param inside an input item is named under the field it came from (Messages: a block's
    #: fields are its item's), else by that field alone (Chat).
    item_fields: bool = False
    #: Origins that name the one field an item was read from (a thinking block's ``signature``), to which
    #: nothing is added.
    leaves: tuple[str, ...] = ()

    def item(self, origin: str, rest: str) -> str:
        """An input item's param (``rest`` inside the item) as the field ``origin`` it came from."""
        if not self.item_fields or origin.endswith(self.leaves):
            return origin
        return origin + rest

    def tool(self, index: int, rest: str) -> str:
        """A tool's param (``rest`` inside ``tools[index]``, the API's index) as the API names it."""
        for prefix, field in self.tool_fields:
            if rest.startswith(prefix):
                rest = field + rest[len(prefix) :]
                break
        return f"tools[{index}]{rest}"

    def other(self, param: str) -> str:
        """Any other param, by :attr:`renamed`."""
        for prefix, field in self.renamed:
            if param.startswith(prefix):
                rest = param[len(prefix) :]
                if prefix.endswith(".") or not rest or rest[0] in ".[":
                    return field + rest
        return param


@dataclass(frozen=True, slots=True)
class Translation(Generic[Options]):
    """A checked foreign request: the Responses ``body`` for ``prepare``, the ``options`` the API's writer
    applies, where each input item (``origins[k]``: the field of ``input[k]``) and tool (``tool_origins[k]``:
    the index in the API's ``tools`` of ``tools[k]``; none: the same) came from, and the API's ``names``."""

    body: dict[str, Any]
    options: Options
    origins: tuple[str, ...]
    names: ParamNames
    tool_origins: tuple[int, ...] = ()

    def param(self, param: str | None) -> str | None:
        """The API's field a param of the translated request stands for."""
        if param is None:
            return None
        match = _INPUT.match(param)
        if match:
            index = int(match.group(1))
            if index >= len(self.origins):
                return "messages"
            return self.names.item(self.origins[index], match.group(2))
        match = _TOOLS.match(param)
        if match:
            index = int(match.group(1))
            if index < len(self.tool_origins):
                index = self.tool_origins[index]
            return self.names.tool(index, match.group(2))
        return self.names.other(param)

    def in_own_terms(self, error: APIError) -> APIError:
        """``error`` with its param renamed to the API's field it is about (the message keeps its words)."""
        param = self.param(error.param)
        if param != error.param and error.param is not None:
            error.message = error.message.replace(f"'{error.param}", f"'{param}")
            error.param = param
        return error
