"""The request side: what a client sent, checked before anything else runs.

``protocol.py`` (the Responses request model and its parsing), ``fields.py`` (field checks shared
with other shapes), ``tools.py``, ``tool_choice.py``, ``text_format.py`` and ``items.py`` (the typed
values ``tools``, ``tool_choice``, ``text`` and ``input`` are parsed into, once), ``input_items.py``
(input items as ``input_items`` lists them), ``body.py`` (a body parsed once, its shape bounded, off
the event loop when large), ``replay_prefix.py`` (a replayed body parsed by what follows its last turn's
bytes),
``pagination.py`` (cursor pages of ``list`` objects), ``affinity.py`` (session identity: the headers that
name a session, its parent and its end, their bounds), ``chat.py`` and ``chat_messages.py`` (a Chat Completions request read as
a Responses request), ``anthropic.py`` and ``anthropic_messages.py`` (an Anthropic Messages request read
as one), ``dialect.py`` (what those two edges share). Imports only ``core/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face

if TYPE_CHECKING:
    from .affinity import (
        AFFINITY_HEADERS,
        FINAL_HEADER,
        MAX_SESSION_KEY,
        NO_IDENTITY,
        SESSION_HEADER,
        SessionIdentity,
        key_of_cache_key,
        session_identity,
    )
    from .anthropic import (
        MessagesOptions,
        MessagesRequest,
        MessagesTranslation,
        translate_messages,
        translating_messages,
    )
    from .body import (
        INLINE_PARSE_BYTES,
        INLINE_PARSE_VALUES,
        MAX_JSON_VALUES,
        BodyDecoder,
        JsonBody,
        check_depth,
        checking_depth,
        count_values,
        decode_body,
        json_object,
    )
    from .chat import ChatOptions, ChatRequest, translate_chat, translating_chat
    from .input_items import input_as_items, normalize_input_items, normalized_input_items, normalized_item
    from .items import (
        AgentMessage,
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
        MultiAgentCall,
        MultiAgentCallOutput,
        Reasoning,
        ToolSearchCall,
        ToolSearchOutput,
        WebSearchCall,
        not_convertible,
        parse_item,
        parse_items,
        typing_items,
    )
    from .multi_agent import (
        MULTI_AGENT_BETA,
        MULTI_AGENT_NAMESPACE,
        ROOT_AGENT,
        MultiAgentConfig,
        multi_agent_beta,
        parse_multi_agent,
    )
    from .pagination import list_page_json, page_json, page_of
    from .protocol import ReasoningParam, ResponsesRequest, parse_request, parsing_request
    from .replay_prefix import DEFAULT_REPLAY_PREFIX_BYTES, ReplayPrefixes
    from .shared_fields import (
        EFFORT_LEVELS,
        SERVICE_TIERS,
        ReasoningEffort,
        cache_retention_seconds,
        service_tier,
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
        ToolSearchTool,
        deferred,
        tools_data,
    )

#: Every name is resolved on first use: a render worker (``harmony/render_pool.py``) reads a request's
#: fields and protocol types, never the Chat Completions side, input items or pages. The names are those
#: the imports above name, each once (``core.lazy_face``; ``tests/package/test_faces.py`` pins them).
__all__ = lazy_face(globals())
