"""Stored prompt templates (``--prompts DIR``) and the request field ``prompt: {id, version, variables}``.

A template is ``DIR/<id>/<version>.json`` (``instructions``, ``input``, ``variables``), read when a
request names it; :class:`PromptTemplates` renders it as OpenAI documents (``{{name}}`` replaced by
the request's value, else the template's default) before the request's own instructions and input.
The format, versions and errors (a template file over :data:`MAX_TEMPLATE_BYTES` is a 400, an id or
version over :data:`MAX_PROMPT_ID` characters too): docs/serve.md#prompt-templates.

A template may use a variable many times, so what it expands to is measured before it is expanded
(:func:`expanded_bytes`: the template's text plus each use's value) and refused past the budget the
caller gives (``--max_input_bytes`` less the request's own size): 51 uses of a 1.9 MB value were a
97 MB prompt.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ..core import InvalidRequestError, NotFoundError, check_id
from ..request import ResponsesRequest, parse_items

__all__ = ["MAX_PROMPT_ID", "MAX_TEMPLATE_BYTES", "PromptTemplates", "Templated"]

#: Largest template file read.
MAX_TEMPLATE_BYTES = 1 << 20
#: Longest ``prompt.id`` and ``prompt.version`` (characters): each is a file name under DIR.
MAX_PROMPT_ID = 128

#: A request with its template applied, and the bytes the template added (its text and variables' values).
Templated = tuple[ResponsesRequest, int]
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")
_PART_VALUES = ("input_image", "input_file")


def _version_key(name: str) -> tuple[int, int | str]:
    return (1, int(name)) if name.isdigit() else (0, name)


class PromptTemplates:
    """The templates of one directory (None: the server has none, and ``prompt`` is a 400)."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = Path(directory) if directory is not None else None

    async def apply(self, request: ResponsesRequest, budget: int | None = None) -> Templated:
        """``request`` with its ``prompt`` rendered into ``instructions`` and ``input`` (unchanged without one),
        and the bytes that added.

        ``budget``: the most bytes the template may add (None: no bound); past it, a 400
        ``context_length_exceeded`` before anything is expanded.
        """
        prompt = request.prompt
        if prompt is None:
            return request, 0
        if self.directory is None:
            raise InvalidRequestError(
                "This server has no stored prompts: start it with --prompts DIR (one DIR/<id>/<version>.json per "
                "prompt version) to use 'prompt'.",
                param="prompt",
            )
        prompt_id = _name(prompt.get("id"), "prompt.id")
        version = prompt.get("version")
        if version is not None:
            _name(version, "prompt.version")
        variables = prompt.get("variables") or {}
        if not isinstance(variables, Mapping):
            raise InvalidRequestError("'prompt.variables' must be an object.", param="prompt.variables")
        template = await asyncio.to_thread(self._read, prompt_id, version)
        values = {**_defaults(template, prompt_id), **variables}
        added = await asyncio.to_thread(expanded_bytes, template, values, prompt_id)
        if budget is not None and added > budget:
            raise InvalidRequestError(
                f"Prompt '{prompt_id}' with its variables expands to {added} bytes, more than the "
                f"{max(budget, 0)} this request has room for within --max_input_bytes.",
                param="prompt.variables",
                code="context_length_exceeded",
            )
        instructions = template.get("instructions")
        parts = []
        if instructions is not None:
            parts.append(_text(_string(instructions, "instructions"), values, "prompt.variables"))
        if request.instructions:
            parts.append(request.instructions)
        messages = [_message(m, values, i) for i, m in enumerate(_list(template.get("input"), prompt_id))]
        own = (
            parse_items([{"role": "user", "content": request.input}])
            if isinstance(request.input, str)
            else request.input
        )
        templated = request.model_copy(
            update={
                "instructions": "\n\n".join(parts) if parts else None,
                "input": parse_items(messages) + own,
            }
        )
        return templated, added

    def _read(self, prompt_id: str, version: str | None) -> dict[str, Any]:
        assert self.directory is not None
        folder = self.directory / prompt_id
        if not folder.is_dir():
            raise NotFoundError(f"Prompt with id '{prompt_id}' not found.", param="prompt.id")
        if version is None:
            versions = sorted((p.stem for p in folder.glob("*.json")), key=_version_key)
            if not versions:
                raise NotFoundError(f"Prompt with id '{prompt_id}' has no versions.", param="prompt.id")
            version = versions[-1]
        path = folder / f"{version}.json"
        if not path.is_file():
            raise NotFoundError(
                f"Version '{version}' of prompt '{prompt_id}' not found.", param="prompt.version"
            )
        if path.stat().st_size > MAX_TEMPLATE_BYTES:
            raise InvalidRequestError(
                f"The template of prompt '{prompt_id}' is larger than {MAX_TEMPLATE_BYTES} bytes.",
                param="prompt",
            )
        try:
            template = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise InvalidRequestError(
                f"The template of prompt '{prompt_id}' is not valid JSON: {exc}", param="prompt"
            ) from None
        if not isinstance(template, dict):
            raise InvalidRequestError(
                f"The template of prompt '{prompt_id}' must be a JSON object.", param="prompt"
            )
        return template


def _name(value: Any, param: str) -> str:
    """A prompt id or version: an id's characters, at most MAX_PROMPT_ID of them (a file name under DIR)."""
    name = check_id(_string(value, param), param)
    if len(name) > MAX_PROMPT_ID:
        raise InvalidRequestError(
            f"'{param}' is {len(name)} characters long; the most is {MAX_PROMPT_ID}.",
            param=param,
            code="invalid_value",
        )
    return name


def expanded_bytes(template: Mapping[str, Any], values: Mapping[str, Any], prompt_id: str) -> int:
    """About how many bytes ``template`` expands to with ``values``, counted without expanding it: its
    instructions' and messages' text, each ``{{name}}`` counted as its value's UTF-8 (or JSON) length.

    The template's own bounds (MAX_TEMPLATE_BYTES) bound the counting; a variable without a value
    counts nothing here (expanding it is the 400 naming it).
    """
    sizes: dict[str, int] = {}

    def size(name: str) -> int:
        if name not in sizes:
            value = values.get(name)
            if isinstance(value, str):
                sizes[name] = len(value.encode())
            elif isinstance(value, Mapping) and isinstance(value.get("text"), str):
                sizes[name] = len(str(value["text"]).encode())
            else:
                sizes[name] = len(orjson.dumps(value)) if value is not None else 0
        return sizes[name]

    def text_bytes(text: str) -> int:
        total = len(text.encode())
        for match in _VARIABLE.finditer(text):
            total += size(match.group(1)) - (match.end() - match.start())
        return total

    total = 0
    instructions = template.get("instructions")
    if isinstance(instructions, str):
        total += text_bytes(instructions)
    for message in _list(template.get("input"), prompt_id):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            total += text_bytes(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    total += text_bytes(part["text"])
    return total


def _string(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"'{param}' must be a non-empty string.", param=param)
    return value


def _list(value: Any, prompt_id: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequestError(
            f"The 'input' of prompt '{prompt_id}' must be a list of messages.", param="prompt"
        )
    return value


def _defaults(template: Mapping[str, Any], prompt_id: str) -> dict[str, Any]:
    defaults = template.get("variables") or {}
    if not isinstance(defaults, Mapping):
        raise InvalidRequestError(
            f"The 'variables' of prompt '{prompt_id}' must be an object.", param="prompt"
        )
    return dict(defaults)


def _value(values: Mapping[str, Any], name: str) -> str | dict[str, Any]:
    """A variable's value: text, or an image/file part."""
    if name not in values:
        raise InvalidRequestError(f"Missing prompt variable: '{name}'.", param=f"prompt.variables.{name}")
    value = values[name]
    if isinstance(value, str):
        return value
    if (
        isinstance(value, Mapping)
        and value.get("type") == "input_text"
        and isinstance(value.get("text"), str)
    ):
        return str(value["text"])
    if isinstance(value, Mapping) and value.get("type") in _PART_VALUES:
        return dict(value)
    raise InvalidRequestError(
        f"'prompt.variables.{name}' must be a string, an input_text, an input_image or an input_file.",
        param=f"prompt.variables.{name}",
    )


def _text(text: str, values: Mapping[str, Any], param: str) -> str:
    """``text`` with its variables replaced by text values (instructions take no image or file)."""

    def replace(match: re.Match[str]) -> str:
        value = _value(values, match.group(1))
        if not isinstance(value, str):
            raise InvalidRequestError(
                f"'prompt.variables.{match.group(1)}' is an {value['type']}, which the instructions cannot hold.",
                param=f"prompt.variables.{match.group(1)}",
            )
        return value

    return _VARIABLE.sub(replace, text)


def _parts(text: str, values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A text part with its variables replaced: text values inline, image/file values as parts of their own."""
    parts: list[dict[str, Any]] = []
    pending = ""
    position = 0
    for match in _VARIABLE.finditer(text):
        pending += text[position : match.start()]
        position = match.end()
        value = _value(values, match.group(1))
        if isinstance(value, str):
            pending += value
        else:
            if pending:
                parts.append({"type": "input_text", "text": pending})
            parts.append(value)
            pending = ""
    pending += text[position:]
    if pending or not parts:
        parts.append({"type": "input_text", "text": pending})
    return parts


def _message(message: Any, values: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A template message with its variables replaced."""
    if not isinstance(message, Mapping) or "content" not in message:
        raise InvalidRequestError(f"Message {index} of the prompt template is not a message.", param="prompt")
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    if not isinstance(content, list):
        raise InvalidRequestError(
            f"Message {index} of the prompt template has no content list.", param="prompt"
        )
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in ("input_text", "output_text") and "text" in part:
            parts.extend(_parts(str(part["text"]), values))
        else:
            parts.append(dict(part))
    return {"type": "message", "role": message.get("role", "user"), "content": parts}
