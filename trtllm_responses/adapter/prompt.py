"""The data a prompt is made of: rendered messages, conversation histories, prompts and their drafts.

A message is rendered once and its tokens kept with it (:class:`RenderedMessage`); a history is
an immutable tuple of them plus the conversation's call map (:class:`ConversationHistory`); a
:class:`Prompt` is the token ids to generate from and what they came from. ``HarmonyAdapter``
(``adapter.py``) builds them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from openai_harmony import Message

from ..constraints import Constraint
from ..harmony import RequestTools

__all__ = [
    "EMPTY_HISTORY",
    "EMPTY_TOOLS",
    "CachedItem",
    "DeveloperKey",
    "ItemKey",
    "ConversationHistory",
    "Prompt",
    "PromptDraft",
    "RenderedMessage",
]

EMPTY_TOOLS = RequestTools()

# A RenderedMessage's own object (4 slots) with headroom for allocator rounding.
_MESSAGE_OVERHEAD = 96
# A ConversationHistory object (4 slots) and its mapping proxy.
_HISTORY_OVERHEAD = 160
# A CachedItem, its tuples and the cache's bookkeeping, with headroom for allocator rounding.
_ENTRY_OVERHEAD = 240
#: An input item's key in the item cache (``item_renders.py``): its tenant's scope (``Tenant.scope``: a
#: tenant finds only its own renders, docs/tenants.md#sealed-content-kv-prefixes-and-caches), its kind, what
#: its render read (a tool output's recipient, else ""), its JSON.
ItemKey: TypeAlias = tuple[str, str, str, bytes]
#: A developer message's key in the adapter's cache: its tenant's scope, its instructions, the JSON of its
#: tools, tool choice, text format and server-run namespaces.
DeveloperKey: TypeAlias = tuple[str, str | None, str]


@dataclass(frozen=True, slots=True)
class RenderedMessage:
    """A Harmony message, kept compact, and its rendered token ids (rendered once, shared by every prompt).

    Stored conversations hold many of these, so the message is kept as harmony's
    own JSON of it (a pydantic ``Message`` tree costs kilobytes even for a word)
    and the token ids are the encoding's interned ints (a tuple slot each).
    """

    source: str  # harmony's JSON of the message
    tokens: tuple[int, ...]
    is_analysis: bool
    is_final: bool
    #: Memory this message holds: its slots object, JSON text and token tuple (the ints are shared).
    #: Computed once: every history that holds the message adds it up again.
    nbytes: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        size = _MESSAGE_OVERHEAD + sys.getsizeof(self.source) + sys.getsizeof(self.tokens)
        object.__setattr__(self, "nbytes", size)

    @property
    def message(self) -> Message:
        """The harmony Message (rebuilt on demand; nothing on the serving path asks)."""
        return Message.from_dict(json.loads(self.source))


@dataclass(frozen=True, slots=True)
class ConversationHistory:
    """The Harmony messages of a conversation so far (no system/developer), immutable.

    ``calls`` maps each function call id in it to its function name, so a
    ``function_call_output`` in a later turn finds its call.
    """

    messages: tuple[RenderedMessage, ...] = ()
    calls: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    nbytes: int = 0  # this history's memory, messages shared with other histories included
    message_bytes: int = 0  # the messages' part of it

    def extended(self, messages: Sequence[RenderedMessage], calls: Mapping[str, str]) -> ConversationHistory:
        """A new history with ``messages`` appended; this one is unchanged.

        ``nbytes`` counts the whole conversation (messages shared with earlier
        histories included) and this history's own containers, so a store adding
        up entries' ``nbytes`` never counts less than what they keep alive.
        """
        merged = dict(self.calls)
        merged.update(calls)
        all_messages = self.messages + tuple(messages)
        message_bytes = self.message_bytes + sum(m.nbytes for m in messages)
        own = sys.getsizeof(all_messages) + sys.getsizeof(merged) + _HISTORY_OVERHEAD
        own += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in merged.items())
        return ConversationHistory(
            messages=all_messages,
            calls=MappingProxyType(merged),
            nbytes=message_bytes + own,
            message_bytes=message_bytes,
        )

    @property
    def num_tokens(self) -> int:
        """Tokens in the history as stored (before analysis is dropped)."""
        return sum(len(m.tokens) for m in self.messages)


EMPTY_HISTORY = ConversationHistory()


@dataclass(frozen=True, slots=True)
class CachedItem:
    """What one input item rendered to: its messages, and the calls it declared (call_id → recipient)."""

    messages: tuple[RenderedMessage, ...]
    calls: tuple[tuple[str, str], ...] = ()

    @property
    def nbytes(self) -> int:
        own = _ENTRY_OVERHEAD + sum(m.nbytes for m in self.messages)
        return own + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in self.calls)


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered request: the token ids to generate from, and the conversation they came from."""

    token_ids: list[int]
    system: RenderedMessage
    developer: RenderedMessage | None
    history: ConversationHistory  # history including this request's input
    instructions: str | None  # effective instructions (request + system/developer input messages)
    developer_key: DeveloperKey = ("", None, "[]")  # the developer message's cache key
    tools: RequestTools = EMPTY_TOOLS  # the tools shown to the model: how its calls read back
    constraint: Constraint | None = None  # what the output must obey (executors enforce it)
    #: Request fields set by configuration_update items of the conversation (``reasoning``, ``text``).
    configuration: Mapping[str, Any] = field(default_factory=dict)
    #: The renders of this prompt's input items the item cache did not hold (admitted with the prompt).
    item_renders: tuple[tuple[ItemKey, CachedItem], ...] = ()

    @property
    def messages(self) -> list[Message]:
        """Every Harmony message of the prompt, in order (analysis included, as stored)."""
        head = [self.system.message] + ([self.developer.message] if self.developer else [])
        return head + [m.message for m in self.history.messages]


@dataclass(frozen=True, slots=True)
class PromptDraft:
    """A prompt before its new messages are rendered: what ``HarmonyAdapter.finish_prompt`` completes.

    ``to_render`` holds the developer message first when it was not cached
    (``renders_developer``), then the request's input messages.
    """

    system: RenderedMessage
    developer: RenderedMessage | None
    developer_key: DeveloperKey
    renders_developer: bool
    to_render: list[Message]
    history: ConversationHistory
    calls: dict[str, str]
    instructions: str | None
    tools: RequestTools = EMPTY_TOOLS
    constraint: Constraint | None = None
    configuration: Mapping[str, Any] = field(default_factory=dict)
    #: The input's messages in order: a cached render, or the index of a message of ``to_render`` (after
    #: the developer message); None: ``to_render`` in order (nothing cached).
    layout: tuple[RenderedMessage | int, ...] | None = None
    #: For each input item missed: (its cache key, its first message's index in ``to_render``, how many, calls).
    pending: tuple[tuple[ItemKey, int, int, tuple[tuple[str, str], ...]], ...] = ()
    #: JSON bytes of the input items not found in the item cache (what rendering will cost).
    new_bytes: int = 0

    @property
    def render_bytes(self) -> int:
        """About how much text ``to_render`` holds: the new items' JSON, and the developer message's."""
        if not self.renders_developer:
            return self.new_bytes
        _, instructions, tools_json = self.developer_key
        return self.new_bytes + len(instructions or "") + len(tools_json)
