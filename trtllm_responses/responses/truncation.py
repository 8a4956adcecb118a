"""``truncation: "auto"``: a prompt longer than the context window loses its oldest whole items.

The conversation's Harmony messages before this turn's last user message are cut into units, each an
item as the client sent it, except that a tool's output stays with the call it answers (a call and its
outputs are one unit: the model never reads half of a tool round trip). The fewest oldest units are
dropped (binary search: each try concatenates token lists, O(prompt)) so that the prompt plus the room
the response needs (``max_output_tokens``, else an eighth of the window) fits the window. Instructions, tools and the
last user message on are never dropped; a prompt that does not fit even then stays a 400.
The history stored with the response is the truncated one, so later turns continue from it.
"""

from __future__ import annotations

import dataclasses
import json

from ..adapter import EMPTY_HISTORY, HarmonyAdapter, Prompt, RenderedMessage

__all__ = ["truncate_prompt"]


def _role(message: RenderedMessage) -> str:
    return str(json.loads(message.source).get("role", ""))


def _units(messages: tuple[RenderedMessage, ...]) -> tuple[list[int], int]:
    """Start indexes of the droppable units, and where the kept tail (the last user message on) begins."""
    roles = [_role(m) for m in messages]
    tail = max((i for i, role in enumerate(roles) if role == "user"), default=len(messages))
    starts = [i for i in range(tail) if i == 0 or roles[i] != "tool"]
    return starts, tail


def truncate_prompt(
    adapter: HarmonyAdapter, prompt: Prompt, window: int, room: int
) -> tuple[Prompt, int] | None:
    """``prompt`` without its oldest units so that ``len(tokens) + room <= window``, and the messages dropped;
    None when dropping every droppable unit is not enough."""
    messages = prompt.history.messages
    starts, tail = _units(messages)

    def tokens_without(units: int) -> list[int]:
        cut = starts[units] if units < len(starts) else tail
        return adapter.prompt_with(dataclasses.replace(prompt, history=EMPTY_HISTORY), messages[cut:])

    if len(tokens_without(len(starts))) + room > window:
        return None
    low, high = 1, len(starts)  # the answer is in [low, high]: dropping nothing does not fit
    while low < high:
        mid = (low + high) // 2
        if len(tokens_without(mid)) + room <= window:
            high = mid
        else:
            low = mid + 1
    cut = starts[low] if low < len(starts) else tail
    history = EMPTY_HISTORY.extended(messages[cut:], prompt.history.calls)
    return dataclasses.replace(prompt, token_ids=tokens_without(low), history=history), cut
