"""The developer message: instructions, tools by namespace, response formats.

openai-harmony renders instructions and the ``# Tools`` section (``functions`` and any other
namespace, each ``namespace NS { ... }``, parameters in its TypeScript-like syntax, fed
schemas rewritten by ``schema.for_rendering``). openai-harmony 0.0.8 has no response
formats, so the ``# Response Formats`` section is appended to harmony's text exactly as
gpt-oss's Harmony guide lays it out::

    # Response Formats

    ## {format name}

    // {description or context}
    {schema}

and the whole body is rendered as one text message (the same tokens a renderer that knew
the section would produce: the text is tokenized once, never at a seam).

The message is described by a JSON *spec* (a string), which is what the adapter caches on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from openai_harmony import DeveloperContent, Message, Role, ToolDescription, ToolNamespaceConfig

from .encoding import HarmonyEncoding
from .schema import for_rendering
from .tools import FUNCTIONS, RequestTools

__all__ = ["developer_message", "developer_spec"]

_FREEFORM_NOTE = (
    "This tool takes freeform text, not JSON: the body of your message to it is its input, verbatim."
)
_FREEFORM_PARAMETERS = {"type": "string"}


def developer_spec(
    instructions: str | None,
    tools: RequestTools,
    response_format: Any | None,
    server_namespaces: Sequence[Mapping[str, Any]] = (),
) -> str:
    """A JSON string that determines the developer message.

    ``server_namespaces`` are server-run tool namespaces (``{"name", "description", "tools"}``,
    listed MCP servers), shown after the request's own tools and rendered the same way.
    """
    namespaces: dict[str, list[dict[str, Any]]] = {}
    descriptions = dict(tools.namespace_descriptions)
    for tool in tools.tools:
        namespaces.setdefault(tool.namespace, []).append(
            {
                "name": tool.name,
                "description": _description(tool.description, tool.custom, tool.syntax, tool.definition),
                "parameters": _FREEFORM_PARAMETERS
                if tool.custom
                else (for_rendering(tool.parameters) if tool.parameters is not None else None),
            }
        )
    for server in server_namespaces:
        descriptions[server["name"]] = server.get("description") or ""
        namespaces.setdefault(server["name"], []).extend(
            {
                "name": t["name"],
                "description": t.get("description") or "",
                "parameters": for_rendering(t["parameters"]) if t.get("parameters") is not None else None,
            }
            for t in server["tools"]
        )
    fmt = None
    if response_format is not None:
        schema = response_format.schema if response_format.schema is not None else {"type": "object"}
        fmt = {"name": response_format.name, "description": response_format.description, "schema": schema}
    spec = {
        "instructions": instructions,
        "namespaces": [
            {"name": name, "description": descriptions.get(name), "tools": members}
            for name, members in namespaces.items()
        ],
        "format": fmt,
    }
    return json.dumps(spec, ensure_ascii=False, sort_keys=True)


def _description(text: str, custom: bool, syntax: str | None, definition: str | None) -> str:
    if not custom:
        return text
    lines = [text] if text else []
    lines.append(_FREEFORM_NOTE)
    if syntax is not None and definition is not None:
        lines.append(f"Its input must match this {syntax} grammar:")
        lines.extend(definition.strip("\n").splitlines())
    return "\n".join(lines)


def developer_message(spec_json: str, encoding: HarmonyEncoding) -> Message | None:
    """The developer message of a spec (None when it would say nothing)."""
    spec = json.loads(spec_json)
    instructions = spec["instructions"]
    namespaces = spec["namespaces"]
    fmt = spec["format"]
    if not instructions and not namespaces and fmt is None:
        return None
    content = DeveloperContent.new()
    if instructions:
        content = content.with_instructions(instructions)
    for namespace in namespaces:
        descriptions = [
            ToolDescription.new(t["name"], t["description"] or "", parameters=t["parameters"])
            for t in namespace["tools"]
        ]
        if namespace["name"] == FUNCTIONS:
            content = content.with_function_tools(descriptions)
        else:
            config = ToolNamespaceConfig(
                name=namespace["name"], description=namespace["description"] or None, tools=descriptions
            )
            content = content.with_tools(config)
    message = Message.from_role_and_content(Role.DEVELOPER, content)
    if fmt is None:
        return message
    return _with_response_format(message, fmt, encoding)


def _with_response_format(message: Message, fmt: dict[str, Any], encoding: HarmonyEncoding) -> Message:
    """``message`` with the ``# Response Formats`` section after harmony's own sections."""
    tokens = encoding.harmony.render(message)
    text = encoding.decode(tokens)
    body = text.partition("<|message|>")[2].removesuffix("<|end|>")
    section = ["# Response Formats", "", f"## {fmt['name']}", ""]
    if fmt.get("description"):
        section.extend(f"// {line}" for line in fmt["description"].splitlines())
    section.append(json.dumps(fmt["schema"], ensure_ascii=False, separators=(",", ":")))
    joined = "\n".join(section)
    full = f"{body}\n\n{joined}" if body else joined
    return Message.from_role_and_content(Role.DEVELOPER, full)
