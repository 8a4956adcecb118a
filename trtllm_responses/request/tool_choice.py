"""A request's ``tool_choice``, parsed once into a typed value: the one place its ``type`` is read.

``auto``, ``none`` and ``required`` stay strings; an object becomes a :class:`ChooseTool` (a named
function or custom tool), :class:`ChooseAllowed` (``allowed_tools``), :class:`ChooseMcp` or
:class:`ChooseHosted` (a hosted or other tool type named by its type). Each keeps ``data``, the
checked choice in the SDK's shape, which is what the response echoes. What a choice shows and
requires is decided once, in ``harmony/tool_choice.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from ..core import InvalidRequestError
from .fields import TOOL_CHOICES, check_object
from .tools import builtin_of

__all__ = [
    "WEB_SEARCH_CHOICE_ALIASES",
    "ChooseAllowed",
    "ChooseHosted",
    "ChooseMcp",
    "ChooseTool",
    "ToolChoice",
    "ToolRef",
    "choice_data",
    "parse_tool_choice",
]

_TOOL_CHOICE_STRINGS = ("auto", "none", "required")
#: ``tool_choice`` types naming the web search tool by its tool type (``{"type": "web_search"}``).
#: The SDK's ``ToolChoiceTypes`` has only ``web_search_preview`` (and its dated name) for it, so
#: these are accepted as that choice, and echoed in the SDK's shape.
WEB_SEARCH_CHOICE_ALIASES = frozenset({"web_search", "web_search_2025_08_26"})


@dataclass(frozen=True, slots=True, eq=False)
class ChooseTool:
    """``{"type": "function"|"custom", "name"}``: that tool, and a call to it is required."""

    custom: bool
    name: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class ToolRef:
    """One entry of ``allowed_tools``: ``kind`` is its ``type``, the other fields as given (None: absent)."""

    kind: str
    name: str | None
    namespace: Any
    server_label: Any

    def names(self, namespace: str, name: str) -> bool:
        """Whether this entry names the tool ``name`` of ``namespace`` (a namespace entry: all of its tools)."""
        if self.kind == "namespace":
            return namespace == self.name
        if self.namespace is not None:
            return namespace == self.namespace and name == self.name
        return self.name in (name, f"{namespace}.{name}")

    @property
    def mcp_label(self) -> Any:
        """The MCP server an ``mcp`` entry names (None: not an mcp entry)."""
        return self.server_label if self.kind == "mcp" else None


@dataclass(frozen=True, slots=True, eq=False)
class ChooseAllowed:
    """``allowed_tools``: only ``tools`` are shown; with ``required``, a call to one of them is."""

    required: bool
    tools: tuple[ToolRef, ...]
    data: dict[str, Any]

    @property
    def kinds(self) -> frozenset[str]:
        """The tool types its entries name."""
        return frozenset(ref.kind for ref in self.tools)


@dataclass(frozen=True, slots=True, eq=False)
class ChooseMcp:
    """``{"type": "mcp", "server_label", "name"?}``: that MCP server (or one of its tools) alone, called."""

    server_label: str
    name: str | None
    data: dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class ChooseHosted:
    """A tool named by its type (``code_interpreter``, ``web_search_preview``, ``file_search``, …).

    ``builtin``: the gpt-oss tool it forces (``python``, ``browser``), or None for a type nobody here runs.
    """

    kind: str
    data: dict[str, Any]

    @property
    def builtin(self) -> Literal["browser", "python"] | None:
        """The gpt-oss tool it forces (``request.tools.builtin_of``)."""
        return builtin_of(self.kind)


ToolChoice = Literal["auto", "none", "required"] | ChooseTool | ChooseAllowed | ChooseMcp | ChooseHosted


def parse_tool_choice(choice: Any) -> ToolChoice:
    """``tool_choice``: ``auto``/``none``/``required`` or a tool choice object (``allowed_tools`` mode defaults to auto).

    ``{"type": "web_search"}`` is the SDK's ``{"type": "web_search_preview"}`` (see WEB_SEARCH_CHOICE_ALIASES).
    """
    if isinstance(choice, str):
        if choice in _TOOL_CHOICE_STRINGS:
            return cast(ToolChoice, choice)
        raise InvalidRequestError(
            "'tool_choice' must be 'auto', 'none', 'required' or a tool choice object.",
            param="tool_choice",
        )
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
    data = check_object(choice, TOOL_CHOICES, "tool_choice", "tool_choice")
    kind = data["type"]
    if kind in ("function", "custom"):
        return ChooseTool(kind == "custom", data["name"], data)
    if kind == "allowed_tools":
        refs = tuple(
            ToolRef(t["type"], t.get("name"), t.get("namespace"), t.get("server_label"))
            for t in data["tools"]
        )
        return ChooseAllowed(data["mode"] == "required", refs, data)
    if kind == "mcp":
        return ChooseMcp(data["server_label"], data.get("name"), data)
    return ChooseHosted(kind, data)


def choice_data(choice: ToolChoice) -> str | dict[str, Any]:
    """The choice as checked, in the SDK's shape (what the response echoes)."""
    return choice if isinstance(choice, str) else choice.data
