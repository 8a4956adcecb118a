"""Helpers for tests that build Harmony token streams by hand."""

from __future__ import annotations

import re

from openai_harmony import Conversation, Message, Role

from trtllm_responses.harmony import HarmonyEncoding

#: The conversation start date the shared ``adapter`` fixture renders.
FIXED_DATE = "2026-11-21"


def byte_tokens(encoding: HarmonyEncoding, data: bytes) -> list[int]:
    """One single-byte token per byte of ``data``: splits multibyte characters across tokens."""
    lookup = {}
    for i, b in enumerate(encoding.token_bytes):
        if len(b) == 1 and b not in lookup:
            lookup[b] = i
    return [lookup[bytes([x])] for x in data]


def harmony(encoding: HarmonyEncoding, text: str) -> list[int]:
    """Tokens of Harmony text written with its control tokens."""
    return encoding.encode(text)


_RECIPIENT_FIRST = re.compile(r"^assistant to=(\S+?)<\|channel\|>(\S+?)(?= |<\|message\|>)")


def golden_conversation(encoding: HarmonyEncoding, messages: list[Message]) -> list[int]:
    """openai-harmony's own render of ``messages`` for completion, each call's header as gpt-oss writes it.

    harmony renders a call ``<|start|>assistant to=R<|channel|>C…``; the server renders it as the model
    writes it, ``<|start|>assistant<|channel|>C to=R…`` (docs/agents-and-long-sessions.md#long-agent-loops).
    Only those headers
    are rewritten here (decoded, reordered, encoded again); every other token is harmony's.
    """
    tokens = encoding.harmony.render_conversation_for_completion(
        Conversation.from_messages(messages), Role.ASSISTANT
    )
    out: list[int] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == encoding.start and encoding.message in tokens[i:]:
            header_end = tokens.index(encoding.message, i)
            header = encoding.decode(tokens[i + 1 : header_end])
            moved = _RECIPIENT_FIRST.sub(r"assistant<|channel|>\2 to=\1", header)
            if moved != header:
                out += [encoding.start, *encoding.encode(moved)]
                i = header_end
                continue
        out.append(tokens[i])
        i += 1
    return out
