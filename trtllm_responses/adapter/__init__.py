"""The HarmonyAdapter: a Responses request (and its stored conversation) → Harmony messages → prompt tokens.

``adapter.py`` (the adapter), ``prompt.py`` (what a prompt is made of: rendered messages, histories),
``item_renders.py`` (input items' renders found again by content, for replayed histories),
``tool_choice.py`` (what ``tool_choice`` shows and requires, over the request's tools and the ones the
server runs). It reads ``harmony/`` and builds the response's one ``Constraint`` (``constraints/``).
"""

from __future__ import annotations

from .adapter import HarmonyAdapter
from .item_renders import DEFAULT_RENDER_CACHE_BYTES, ItemRenders
from .prompt import EMPTY_HISTORY, ConversationHistory, Prompt, RenderedMessage
from .tool_choice import builtin_types_shown

__all__ = [
    "DEFAULT_RENDER_CACHE_BYTES",
    "ConversationHistory",
    "EMPTY_HISTORY",
    "HarmonyAdapter",
    "ItemRenders",
    "Prompt",
    "RenderedMessage",
    "builtin_types_shown",
]
