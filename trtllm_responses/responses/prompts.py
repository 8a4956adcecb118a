"""Stored prompt templates (``--prompts DIR``) and the request field ``prompt: {id, version, variables}``.

A template is ``DIR/<id>/<version>.json`` (``instructions``, ``input``, ``variables``), read when a
request names it; :class:`PromptTemplates` renders it as OpenAI documents (``{{name}}`` replaced by
the request's value, else the template's default) before the request's own instructions and input.
The format, versions and errors (a template file over :data:`MAX_TEMPLATE_BYTES` is a 400): README,
"Prompt templates".
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

__all__ = ["MAX_TEMPLATE_BYTES", "PromptTemplates"]

#: Largest template file read.
MAX_TEMPLATE_BYTES = 1 << 20
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")
_PART_VALUES = ("input_image", "input_file")


def _version_key(name: str) -> tuple[int, int | str]:
    return (1, int(name)) if name.isdigit() else (0, name)


class PromptTemplates:
    """The templates of one directory (None: the server has none, and ``prompt`` is a 400)."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = Path(directory) if directory is not None else None

    async def apply(self, request: ResponsesRequest) -> ResponsesRequest:
        """``request`` with its ``prompt`` rendered into ``instructions`` and ``input`` (unchanged without one)."""
        prompt = request.prompt
        if prompt is None:
            return request
        if self.directory is None:
            raise InvalidRequestError(
                "This server has no stored prompts: start it with --prompts DIR (one DIR/<id>/<version>.json per "
                "prompt version) to use 'prompt'.",
                param="prompt",
            )
        prompt_id = check_id(_string(prompt.get("id"), "prompt.id"), "prompt.id")
        version = prompt.get("version")
        if version is not None:
            check_id(_string(version, "prompt.version"), "prompt.version")
        variables = prompt.get("variables") or {}
        if not isinstance(variables, Mapping):
            raise InvalidRequestError("'prompt.variables' must be an object.", param="prompt.variables")
        template = await asyncio.to_thread(self._read, prompt_id, version)
        values = {**_defaults(template, prompt_id), **variables}
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
        return request.model_copy(
            update={
                "instructions": "\n\n".join(parts) if parts else None,
                "input": parse_items(messages) + own,
            }
        )

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
