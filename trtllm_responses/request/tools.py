"""A request's ``tools``, parsed once into typed values: the one place a tool's ``type`` is read.

Each tool is checked against the SDK model its ``type`` names (``fields.check_object``: the errors
name the field), then becomes a :class:`FunctionTool`, :class:`CustomTool`, :class:`NamespaceTool`,
:class:`McpTool`, :class:`ToolSearchTool` or :class:`HostedTool`. Every value keeps ``data``, the checked tool in the SDK's
shape, which is what the response echoes. What the layers above check of a tool (a strict schema,
a grammar that must compile, an MCP server's URL) they check on these values;
docs/tools.md#tools-structured-outputs-and-constraints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..core import InvalidRequestError
from .fields import TOOLS, check_object

__all__ = [
    "CODE_TOOLS",
    "HOSTED_TOOL_TYPES",
    "TOOL_NAME",
    "WEB_SEARCH_TOOLS",
    "builtin_of",
    "CustomTool",
    "FunctionTool",
    "HostedTool",
    "McpTool",
    "NamespaceTool",
    "RequestTool",
    "ToolSearchTool",
    "deferred",
    "parse_tools",
    "tools_data",
]

#: OpenAI's rule for function (and other tool) names.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: The tool types that are gpt-oss's browser (OpenAI's web search) and its python (the code interpreter).
WEB_SEARCH_TOOLS = frozenset(
    {"web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"}
)
CODE_TOOLS = frozenset({"code_interpreter"})
#: Hosted tool types: run by the server when it can (web search, code interpreter), else echoed, not shown.
HOSTED_TOOL_TYPES = (
    WEB_SEARCH_TOOLS
    | CODE_TOOLS
    | frozenset({"file_search", "image_generation", "computer_use", "computer_use_preview"})
)


@dataclass(frozen=True, slots=True, eq=False)
class FunctionTool:
    """A function tool (JSON arguments); ``description`` is ``""`` when none was given."""

    name: str
    description: str
    parameters: dict[str, Any] | None
    strict: bool
    data: dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class CustomTool:
    """A custom (freeform) tool: raw text input, matching a ``lark`` or ``regex`` grammar when ``syntax`` is set."""

    name: str
    description: str
    syntax: Literal["lark", "regex"] | None
    definition: str | None
    data: dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class NamespaceTool:
    """A namespace of function and custom tools (what Codex sends for ``multi_agent_v1``)."""

    name: str
    description: str
    tools: tuple[FunctionTool | CustomTool, ...]
    data: dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class ToolSearchTool:
    """The ``tool_search`` tool (the SDK's ``ToolSearchTool``): finds deferred tools (``defer_loading``).

    ``execution`` ``client``: the client runs the search (Codex); the model calls it as a function and the
    client answers with a ``tool_search_output``. ``server`` or absent: OpenAI's hosted search.
    """

    execution: Literal["client", "server"] | None
    description: str | None
    parameters: dict[str, Any] | None
    data: dict[str, Any]


def deferred(tool: FunctionTool | CustomTool | NamespaceTool) -> bool:
    """Whether a tool is deferred (``defer_loading: true``): shown only once a tool search loads it."""
    return tool.data.get("defer_loading") is True


@dataclass(frozen=True, slots=True, eq=False)
class McpTool:
    """An MCP server the server runs tools of (its fields are checked by ``tools/mcp_request.py``)."""

    data: dict[str, Any]

    @property
    def server_label(self) -> str:
        """The server's label (a string, as the SDK checked)."""
        label: str = self.data["server_label"]
        return label


@dataclass(frozen=True, slots=True, eq=False)
class HostedTool:
    """A hosted tool (web search, code interpreter, file search, …): run by the server when it can, else echoed.

    ``kind`` is its ``type``; ``builtin`` the gpt-oss tool that runs it, if any.
    """

    kind: str
    data: dict[str, Any]

    @property
    def builtin(self) -> Literal["browser", "python"] | None:
        """The gpt-oss tool that runs it (:func:`builtin_of`)."""
        return builtin_of(self.kind)


def builtin_of(kind: str) -> Literal["browser", "python"] | None:
    """The gpt-oss tool a hosted tool type stands for: ``browser`` for web search, ``python`` for the code
    interpreter, else None (a type nobody here runs)."""
    if kind in WEB_SEARCH_TOOLS:
        return "browser"
    return "python" if kind in CODE_TOOLS else None


RequestTool = FunctionTool | CustomTool | NamespaceTool | McpTool | ToolSearchTool | HostedTool


def _string(tool: Mapping[str, Any], key: str, where: str, required: bool = False) -> str | None:
    value = tool.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise InvalidRequestError(f"'{where}.{key}' must be a non-empty string.", param=f"{where}.{key}")
    return value


def _function(tool: Mapping[str, Any], where: str) -> FunctionTool:
    name = _string(tool, "name", where, required=True)
    assert name is not None
    params = tool.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise InvalidRequestError(f"'{where}.parameters' must be an object.", param=f"{where}.parameters")
    strict = tool.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidRequestError(f"'{where}.strict' must be a boolean.", param=f"{where}.strict")
    return FunctionTool(name, _string(tool, "description", where) or "", params, bool(strict), dict(tool))


def _custom(tool: Mapping[str, Any], where: str) -> CustomTool:
    name = _string(tool, "name", where, required=True)
    assert name is not None
    fmt = tool.get("format") or {"type": "text"}
    if not isinstance(fmt, Mapping):
        raise InvalidRequestError(f"'{where}.format' must be an object.", param=f"{where}.format")
    kind = fmt.get("type")
    syntax = definition = None
    if kind == "grammar":
        syntax = fmt.get("syntax")
        if syntax not in ("lark", "regex"):
            raise InvalidRequestError(
                f"'{where}.format.syntax' must be 'lark' or 'regex'; got {syntax!r}.",
                param=f"{where}.format.syntax",
            )
        definition = _string(fmt, "definition", f"{where}.format", required=True)
    elif kind != "text":
        raise InvalidRequestError(
            f"'{where}.format.type' must be 'text' or 'grammar'; got {kind!r}.", param=f"{where}.format.type"
        )
    return CustomTool(name, _string(tool, "description", where) or "", syntax, definition, dict(tool))


def _member(tool: Any, where: str) -> FunctionTool | CustomTool:
    if not isinstance(tool, Mapping):
        raise InvalidRequestError(f"'{where}' must be an object.", param=where)
    kind = tool.get("type")
    if kind == "function":
        return _function(tool, where)
    if kind == "custom":
        return _custom(tool, where)
    raise InvalidRequestError(
        f"Tool type {kind!r} at '{where}.type' is not supported inside a namespace; use function or custom.",
        param=f"{where}.type",
    )


def _tool(data: dict[str, Any], where: str) -> RequestTool:
    kind = data["type"]
    if kind in ("function", "custom"):
        if not TOOL_NAME.fullmatch(data.get("name") or ""):
            raise InvalidRequestError(
                f"Invalid '{where}.name': a tool name is 1 to 64 letters, digits, '_' or '-'.",
                param=f"{where}.name",
            )
        return _member(data, where)
    if kind == "namespace":
        name = _string(data, "name", where, required=True)
        assert name is not None
        members = data.get("tools")
        if not isinstance(members, list):
            raise InvalidRequestError(f"'{where}.tools' must be a list.", param=f"{where}.tools")
        description = _string(data, "description", where) or ""
        tools = tuple(_member(m, f"{where}.tools[{j}]") for j, m in enumerate(members))
        return NamespaceTool(name, description, tools, data)
    if kind == "mcp":
        return McpTool(data)
    if kind == "tool_search":
        parameters = data.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise InvalidRequestError(f"'{where}.parameters' must be an object.", param=f"{where}.parameters")
        return ToolSearchTool(data.get("execution"), _string(data, "description", where), parameters, data)
    if kind in HOSTED_TOOL_TYPES:
        return HostedTool(kind, data)
    raise InvalidRequestError(
        f"Tool type {kind!r} at '{where}.type' is not supported; this server takes function, custom and "
        "namespace tools (hosted tools are accepted and not shown to the model).",
        param=f"{where}.type",
    )


def parse_tools(tools: Any) -> tuple[RequestTool, ...]:
    """``tools``, each checked against its SDK type and typed; InvalidRequestError naming the field."""
    if not isinstance(tools, list):
        raise InvalidRequestError("'tools' must be an array of tool objects.", param="tools")
    return tuple(
        _tool(check_object(tool, TOOLS, f"tools[{i}]", "tool"), f"tools[{i}]") for i, tool in enumerate(tools)
    )


def tools_data(tools: tuple[RequestTool, ...]) -> list[dict[str, Any]]:
    """The tools as checked, in the SDK's shape (the developer message's cache key)."""
    return [tool.data for tool in tools]
