"""Harmony, the gpt-oss chat format: what it is, below everything that uses it.

The offline encoding (``encoding.py``, ``linear.py``), the one header grammar (``headers.py``), the
recovering reader (``parser.py``, ``json_cut.py``), JSON Schemas as gpt-oss reads them
(``schema.py``), the tools a request declares and the calls they allow (``tools.py``), the
developer message (``developer.py``), Responses items ⇄ Harmony messages (``items.py``,
``input_messages.py``) and rendering off the event loop (``render_pool.py``). It imports only
``core/`` and ``request/``; the :class:`~trtllm_responses.adapter.HarmonyAdapter`, which builds a
request's prompt and constraint from these pieces, is a layer above (``adapter/``).
"""

from .encoding import HarmonyEncoding, load_encoding
from .input_messages import input_to_messages, items_to_messages
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
    "ContentDelta",
    "HarmonyEncoding",
    "HarmonyStreamParser",
    "ItemKind",
    "ItemTarget",
    "MessageEnded",
    "MessageHeader",
    "MessageStarted",
    "ParsedMessage",
    "build_output_item",
    "classify",
    "completion_to_output_items",
    "input_to_messages",
    "items_to_messages",
    "load_encoding",
    "parse_completion",
]
