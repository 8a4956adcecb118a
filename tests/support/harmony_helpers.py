"""Helpers for tests that build Harmony token streams by hand."""

from __future__ import annotations

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
