"""Harmony: the gpt-oss chat format. Offline encoding, streaming parser, Responses ⇄ Harmony conversion."""

from .adapter import EMPTY_HISTORY, ConversationHistory, HarmonyAdapter, Prompt, RenderedMessage
from .encoding import HarmonyEncoding, load_encoding
from .input_messages import input_to_messages
from .items import (
    ItemKind,
    ItemTarget,
    build_output_item,
    classify,
    completion_to_output_items,
)
from .parser import (
    ContentDelta,
    HarmonyStreamParser,
    MessageEnded,
    MessageHeader,
    MessageStarted,
    ParsedMessage,
    parse_completion,
)

__all__ = [
    "EMPTY_HISTORY",
    "ContentDelta",
    "ConversationHistory",
    "HarmonyAdapter",
    "HarmonyEncoding",
    "HarmonyStreamParser",
    "ItemKind",
    "ItemTarget",
    "MessageEnded",
    "MessageHeader",
    "MessageStarted",
    "ParsedMessage",
    "Prompt",
    "RenderedMessage",
    "build_output_item",
    "classify",
    "completion_to_output_items",
    "input_to_messages",
    "load_encoding",
    "parse_completion",
]
