"""Input items, parsed once into typed values: the one place an item's ``type`` is read.

An item (of a request's ``input``, a conversation's items, a response's output read back as input)
becomes an instance of the :class:`InputItem` subclass its ``type`` names (``message`` when it has
a ``role`` and no ``type``; an ``item_reference`` when it has only an ``id``). The value holds the
item as sent (``data``), untouched, so that what is stored and echoed stays byte-identical and a
1,000-item history costs one small object an item; its fields are checked where they are read
(``harmony/input_messages.py``, whose errors name the item and part: ``input[2].content[0]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from ..core import InvalidRequestError, Stepped, at_once

__all__ = [
    "AgentMessage",
    "CodeInterpreterCall",
    "Compaction",
    "CompactionTrigger",
    "ConfigurationUpdate",
    "CustomToolCall",
    "CustomToolCallOutput",
    "FunctionCall",
    "FunctionCallOutput",
    "InputItem",
    "ItemReference",
    "McpApprovalRequest",
    "McpApprovalResponse",
    "McpCall",
    "McpListTools",
    "Message",
    "MultiAgentCall",
    "MultiAgentCallOutput",
    "Reasoning",
    "ToolSearchCall",
    "ToolSearchOutput",
    "WebSearchCall",
    "not_convertible",
    "parse_item",
    "parse_items",
    "typing_items",
]


@dataclass(frozen=True, slots=True, eq=False)
class InputItem:
    """An item of one ``type`` (the subclass), holding the item as sent.

    ``data`` is never changed, so what is derived from it alone is kept on the item the first time it is
    asked for (``json``; ``opened``, by ``responses/sealing.py``): a replay's repeated items are the last
    turn's objects (``replay_prefix.py``), and derive nothing again.
    """

    TYPE: ClassVar[str] = ""
    data: Mapping[str, Any]
    _json: bytes | None = field(default=None, init=False, repr=False)
    #: ``(sealer, item)``: this item with its encrypted content opened by that sealer.
    opened: tuple[object, InputItem] | None = field(default=None, init=False, repr=False)

    def json(self) -> bytes:
        """``data`` as compact JSON (``orjson``), made once; kept, so in an allocation of its own size."""
        text = self._json
        if text is None:
            from ..core import exact_bytes  # here: render workers import items, never core.wire

            text = exact_bytes(orjson.dumps(self.data))
            object.__setattr__(self, "_json", text)
        return text

    def open_with(self, sealer: object, item: InputItem) -> InputItem:
        """Keep ``item`` as this one opened by ``sealer``; ``item``."""
        object.__setattr__(self, "opened", (sealer, item))
        return item


class Message(InputItem):
    """A ``message`` (any role)."""

    __slots__ = ()
    TYPE = "message"

    @property
    def role(self) -> Any:
        """Its ``role`` as sent (checked when converted)."""
        return self.data.get("role")


class FunctionCall(InputItem):
    """A ``function_call``."""

    __slots__ = ()
    TYPE = "function_call"


class FunctionCallOutput(InputItem):
    """A ``function_call_output`` (with a ``call_id``, or a ``name``: output its tool gives unasked)."""

    __slots__ = ()
    TYPE = "function_call_output"


class CustomToolCall(InputItem):
    """A ``custom_tool_call``."""

    __slots__ = ()
    TYPE = "custom_tool_call"


class CustomToolCallOutput(InputItem):
    """A ``custom_tool_call_output``."""

    __slots__ = ()
    TYPE = "custom_tool_call_output"


class Reasoning(InputItem):
    """A ``reasoning`` item (its text, summary, or encrypted content)."""

    __slots__ = ()
    TYPE = "reasoning"


class WebSearchCall(InputItem):
    """A ``web_search_call`` (gpt-oss's browser)."""

    __slots__ = ()
    TYPE = "web_search_call"


class CodeInterpreterCall(InputItem):
    """A ``code_interpreter_call`` (gpt-oss's python)."""

    __slots__ = ()
    TYPE = "code_interpreter_call"


class McpCall(InputItem):
    """An ``mcp_call``."""

    __slots__ = ()
    TYPE = "mcp_call"


class McpListTools(InputItem):
    """An ``mcp_list_tools`` item: an MCP server's listed tools."""

    __slots__ = ()
    TYPE = "mcp_list_tools"


class McpApprovalRequest(InputItem):
    """An ``mcp_approval_request``."""

    __slots__ = ()
    TYPE = "mcp_approval_request"


class McpApprovalResponse(InputItem):
    """An ``mcp_approval_response``."""

    __slots__ = ()
    TYPE = "mcp_approval_response"

    @property
    def approves(self) -> bool:
        """Whether it approves the call (``approve: true``)."""
        return self.data.get("approve") is True


class ToolSearchCall(InputItem):
    """A ``tool_search_call``: the model searched for deferred tools (its ``arguments``, an object)."""

    __slots__ = ()
    TYPE = "tool_search_call"


class ToolSearchOutput(InputItem):
    """A ``tool_search_output``: the tools a search loaded (``tools``: namespaces, functions, custom tools)."""

    __slots__ = ()
    TYPE = "tool_search_output"


class ConfigurationUpdate(InputItem):
    """A ``configuration_update``: settings for this response and the ones after it."""

    __slots__ = ()
    TYPE = "configuration_update"


class ItemReference(InputItem):
    """An ``item_reference`` (or the SDK's type-less ``{"id": ...}``): resolved before rendering."""

    __slots__ = ()
    TYPE = "item_reference"


class CompactionTrigger(InputItem):
    """A ``compaction_trigger``: compact the context first (the final input item only)."""

    __slots__ = ()
    TYPE = "compaction_trigger"


class Compaction(InputItem):
    """A ``compaction`` item: an encrypted summary of the conversation before it."""

    __slots__ = ()
    TYPE = "compaction"


class AgentMessage(InputItem):
    """An ``agent_message`` (the beta multi-agent surface): a message routed between agents."""

    __slots__ = ()
    TYPE = "agent_message"


class MultiAgentCall(InputItem):
    """A ``multi_agent_call`` (the beta multi-agent surface): an agent's call to a multi-agent action."""

    __slots__ = ()
    TYPE = "multi_agent_call"


class MultiAgentCallOutput(InputItem):
    """A ``multi_agent_call_output``: what a multi-agent action returned."""

    __slots__ = ()
    TYPE = "multi_agent_call_output"


_KINDS: dict[str, type[InputItem]] = {
    cls.TYPE: cls
    for cls in (
        Message,
        FunctionCall,
        FunctionCallOutput,
        CustomToolCall,
        CustomToolCallOutput,
        Reasoning,
        WebSearchCall,
        CodeInterpreterCall,
        McpCall,
        McpListTools,
        McpApprovalRequest,
        McpApprovalResponse,
        ToolSearchCall,
        ToolSearchOutput,
        ConfigurationUpdate,
        ItemReference,
        CompactionTrigger,
        Compaction,
        AgentMessage,
        MultiAgentCall,
        MultiAgentCallOutput,
    )
}


def parse_item(item: Any, where: str) -> InputItem:
    """One item, typed by its ``type``; InvalidRequestError naming ``where`` when it has none this server takes."""
    if isinstance(item, InputItem):
        return item
    if not isinstance(item, Mapping):
        raise InvalidRequestError(f"'{where}' must be an object.", param=where)
    kind = item.get("type")
    if kind is None:
        if "role" in item:
            if "type" not in item:
                return Message(item)
        elif "id" in item:
            return ItemReference(item)
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise _type_error(kind, where)
    return cls(item)


def parse_items(items: Sequence[Any], param: str = "input") -> tuple[InputItem, ...]:
    """Every item of ``items`` typed (those already typed kept); errors name ``param[i]``."""
    return at_once(typing_items(items, param))


def typing_items(items: Sequence[Any], param: str = "input") -> Stepped[tuple[InputItem, ...]]:
    """:func:`parse_items` as work that pauses after each item (``core.Stepped``: 20,000 items are ~18 ms)."""
    out: list[InputItem] = []
    kinds = _KINDS
    for i, item in enumerate(items):
        yield
        kind = item.get("type") if type(item) is dict else None
        cls = kinds.get(kind) if type(kind) is str else None
        out.append(cls(item) if cls is not None else parse_item(item, f"{param}[{i}]"))
    return tuple(out)


def not_convertible(item: InputItem, where: str) -> InvalidRequestError:
    """The error for an item no Harmony message stands for (a reference, a trigger, a sealed compaction)."""
    return _type_error(item.data.get("type"), where)


def _type_error(kind: Any, where: str) -> InvalidRequestError:
    """The 400 for an item whose ``type`` (``kind``) is not a string, or not one this server takes."""
    if not isinstance(kind, str):
        return InvalidRequestError(f"'{where}.type' must be a string.", param=f"{where}.type")
    return InvalidRequestError(
        f"Unknown or unsupported input item type {kind!r} at '{where}.type'.", param=f"{where}.type"
    )
