"""The request side: what a client sent, checked before anything else runs.

``protocol.py`` (the Responses request model and its parsing), ``fields.py`` (field checks shared
with other shapes), ``input_items.py`` (input items as ``input_items`` lists them),
``pagination.py`` (cursor pages of ``list`` objects), ``chat.py`` and ``chat_messages.py`` (a Chat
Completions request read as a Responses request). Imports only ``core/``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .chat import ChatOptions, ChatRequest, in_chat_terms, translate_chat
    from .fields import check_text
    from .input_items import normalize_input_items
    from .pagination import list_page_json, page_json, page_of
    from .protocol import (
        ReasoningEffort,
        ReasoningParam,
        ResponsesRequest,
        check_depth,
        json_object,
        parse_request,
    )

__all__ = [
    "ChatOptions",
    "ChatRequest",
    "ReasoningEffort",
    "ReasoningParam",
    "ResponsesRequest",
    "check_depth",
    "check_text",
    "in_chat_terms",
    "json_object",
    "list_page_json",
    "normalize_input_items",
    "page_json",
    "page_of",
    "parse_request",
    "translate_chat",
]

#: Resolved on first use: a render worker (``harmony/render_pool.py``) reads a request's fields and
#: protocol types, never the Chat Completions side, input items or pages.
_ON_FIRST_USE = {
    "ChatOptions": ".chat",
    "ChatRequest": ".chat",
    "in_chat_terms": ".chat",
    "translate_chat": ".chat",
    "check_text": ".fields",
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

    def __getattr__(name: str) -> Any:
        module = _ON_FIRST_USE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
