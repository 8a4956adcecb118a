"""The request side: what a client sent, checked before anything else runs.

``protocol.py`` (the Responses request model and its parsing), ``fields.py`` (field checks shared
with other shapes), ``tools.py``, ``tool_choice.py``, ``text_format.py`` and ``items.py`` (the typed
values ``tools``, ``tool_choice``, ``text`` and ``input`` are parsed into, once), ``input_items.py``
(input items as ``input_items`` lists them),
``pagination.py`` (cursor pages of ``list`` objects), ``affinity.py`` (session keys: the headers that
name a session, their bounds), ``chat.py`` and ``chat_messages.py`` (a Chat
Completions request read as a Responses request). Imports only ``core/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import resolver

if TYPE_CHECKING:
    from .affinity import (
        AFFINITY_HEADERS,
        MAX_SESSION_KEY,
        SESSION_HEADER,
        key_of_cache_key,
        session_key_from_headers,
    )
    from .chat import ChatOptions, ChatRequest, in_chat_terms, translate_chat
    from .input_items import normalize_input_items
    from .items import (
        CodeInterpreterCall,
        Compaction,
        CompactionTrigger,
        ConfigurationUpdate,
        CustomToolCall,
        CustomToolCallOutput,
        FunctionCall,
        FunctionCallOutput,
        InputItem,
        ItemReference,
        McpApprovalRequest,
        McpApprovalResponse,
        McpCall,
        McpListTools,
        Message,
        Reasoning,
        WebSearchCall,
        not_convertible,
        parse_item,
        parse_items,
    )
    from .pagination import list_page_json, page_json, page_of
    from .protocol import (
        ReasoningEffort,
        ReasoningParam,
        ResponsesRequest,
        check_depth,
        json_object,
        parse_request,
    )
    from .text_format import (
        JsonObjectFormat,
        JsonSchemaFormat,
        PlainText,
        TextConfig,
        parse_text,
        parse_text_update,
    )
    from .tool_choice import (
        ChooseAllowed,
        ChooseHosted,
        ChooseMcp,
        ChooseTool,
        ToolChoice,
        choice_data,
    )
    from .tools import (
        CODE_TOOLS,
        HOSTED_TOOL_TYPES,
        WEB_SEARCH_TOOLS,
        CustomTool,
        FunctionTool,
        HostedTool,
        McpTool,
        NamespaceTool,
        RequestTool,
        tools_data,
    )

__all__ = [
    "AFFINITY_HEADERS",
    "CODE_TOOLS",
    "ChatOptions",
    "ChatRequest",
    "ChooseAllowed",
    "ChooseHosted",
    "ChooseMcp",
    "ChooseTool",
    "CodeInterpreterCall",
    "Compaction",
    "CompactionTrigger",
    "ConfigurationUpdate",
    "CustomTool",
    "CustomToolCall",
    "CustomToolCallOutput",
    "FunctionCall",
    "FunctionCallOutput",
    "FunctionTool",
    "HOSTED_TOOL_TYPES",
    "HostedTool",
    "InputItem",
    "ItemReference",
    "JsonObjectFormat",
    "JsonSchemaFormat",
    "McpApprovalRequest",
    "McpApprovalResponse",
    "McpCall",
    "McpListTools",
    "MAX_SESSION_KEY",
    "McpTool",
    "Message",
    "NamespaceTool",
    "PlainText",
    "Reasoning",
    "ReasoningEffort",
    "ReasoningParam",
    "RequestTool",
    "ResponsesRequest",
    "SESSION_HEADER",
    "TextConfig",
    "ToolChoice",
    "WEB_SEARCH_TOOLS",
    "WebSearchCall",
    "check_depth",
    "choice_data",
    "in_chat_terms",
    "json_object",
    "key_of_cache_key",
    "list_page_json",
    "normalize_input_items",
    "not_convertible",
    "page_json",
    "page_of",
    "parse_item",
    "parse_items",
    "parse_request",
    "parse_text",
    "parse_text_update",
    "session_key_from_headers",
    "tools_data",
    "translate_chat",
]

#: Resolved on first use: a render worker (``harmony/render_pool.py``) reads a request's fields and
#: protocol types, never the Chat Completions side, input items or pages.
_ON_FIRST_USE = {
    "AFFINITY_HEADERS": ".affinity",
    "MAX_SESSION_KEY": ".affinity",
    "SESSION_HEADER": ".affinity",
    "key_of_cache_key": ".affinity",
    "session_key_from_headers": ".affinity",
    "CodeInterpreterCall": ".items",
    "Compaction": ".items",
    "CompactionTrigger": ".items",
    "ConfigurationUpdate": ".items",
    "CustomToolCall": ".items",
    "CustomToolCallOutput": ".items",
    "FunctionCall": ".items",
    "FunctionCallOutput": ".items",
    "InputItem": ".items",
    "ItemReference": ".items",
    "McpApprovalRequest": ".items",
    "McpApprovalResponse": ".items",
    "McpCall": ".items",
    "McpListTools": ".items",
    "Message": ".items",
    "Reasoning": ".items",
    "WebSearchCall": ".items",
    "not_convertible": ".items",
    "parse_item": ".items",
    "parse_items": ".items",
    "JsonObjectFormat": ".text_format",
    "JsonSchemaFormat": ".text_format",
    "PlainText": ".text_format",
    "TextConfig": ".text_format",
    "parse_text": ".text_format",
    "parse_text_update": ".text_format",
    "ChooseAllowed": ".tool_choice",
    "ChooseHosted": ".tool_choice",
    "ChooseMcp": ".tool_choice",
    "ChooseTool": ".tool_choice",
    "ToolChoice": ".tool_choice",
    "choice_data": ".tool_choice",
    "CODE_TOOLS": ".tools",
    "CustomTool": ".tools",
    "FunctionTool": ".tools",
    "HOSTED_TOOL_TYPES": ".tools",
    "HostedTool": ".tools",
    "McpTool": ".tools",
    "NamespaceTool": ".tools",
    "RequestTool": ".tools",
    "WEB_SEARCH_TOOLS": ".tools",
    "tools_data": ".tools",
    "ChatOptions": ".chat",
    "ChatRequest": ".chat",
    "in_chat_terms": ".chat",
    "translate_chat": ".chat",
    "normalize_input_items": ".input_items",
    "list_page_json": ".pagination",
    "page_json": ".pagination",
    "page_of": ".pagination",
    "ReasoningEffort": ".protocol",
    "ReasoningParam": ".protocol",
    "ResponsesRequest": ".protocol",
    "check_depth": ".protocol",
    "json_object": ".protocol",
    "parse_request": ".protocol",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; this resolves them at run time
    __getattr__ = resolver(__name__, _ON_FIRST_USE)
