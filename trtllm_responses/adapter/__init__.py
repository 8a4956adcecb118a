"""The HarmonyAdapter: a Responses request (and its stored conversation) → Harmony messages → prompt tokens.

``adapter.py`` (the adapter), ``prompt.py`` (what a prompt is made of: rendered messages, histories),
``item_renders.py`` (input items' renders found again by content, for replayed histories). It reads
``harmony/`` (where ``tool_choice`` is decided: ``harmony/tool_choice.py``) and builds the response's one
``Constraint`` (``constraints/``).
"""

from __future__ import annotations

from .adapter import HarmonyAdapter
from .item_renders import DEFAULT_RENDER_CACHE_BYTES, ItemRenders
from .prompt import EMPTY_HISTORY, ConversationHistory, Prompt, RenderedMessage

__all__ = [
    "DEFAULT_RENDER_CACHE_BYTES",
    "ConversationHistory",
    "EMPTY_HISTORY",
    "HarmonyAdapter",
    "ItemRenders",
    "Prompt",
    "RenderedMessage",
]
