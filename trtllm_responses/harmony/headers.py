"""The one definition of a Harmony header: what the model may write, read by the parser, allowed by constraints.

A header is what the model writes between ``<|start|>`` and ``<|message|>``: a role, a channel, a
recipient (``to=NAME``, after the channel or before it) and a content type. :func:`read_header` reads
any header text and never fails (the parser's reading, README "What the model may write");
the forms guided decoding allows (:data:`FINAL_HEADERS`, :func:`call_headers`,
:data:`FREE_CHANNELS`) are built from the same names, and ``tests/harmony/test_reader.py`` walks every header
the structural tag accepts through the parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CHANNELS",
    "CHANNEL_MARK",
    "CONSTRAIN_MARK",
    "FINAL_HEADERS",
    "FREE_CHANNELS",
    "JSON_CONTENT_TYPE",
    "MessageHeader",
    "RECIPIENT_FIRST",
    "call_headers",
    "read_header",
]

ROLES = frozenset({"user", "assistant", "system", "developer", "tool"})
CHANNELS = ("analysis", "commentary", "final")
#: The channels of messages that may come before the last one (reasoning, preambles).
FREE_CHANNELS = ("analysis", "commentary")
CHANNEL_MARK = "<|channel|>"
CONSTRAIN_MARK = "<|constrain|>"
JSON_CONTENT_TYPE = "<|constrain|>json"
#: Content types written without ``<|constrain|>``.
BARE_CONTENT_TYPES = frozenset({"json", "code", "text"})
#: Recipients that mean "no tool": the message is for the user (``to=assistant`` preambles).
NOT_TOOLS = frozenset({"assistant", "user", "all"})
#: The headers of a final answer guided decoding allows: plain, and with the JSON content type
#: gpt-oss-120b writes when a response schema is set (vllm-project/vllm#45570).
FINAL_HEADERS = ("<|channel|>final<|message|>", f"<|channel|>final {JSON_CONTENT_TYPE}<|message|>")
#: The other header gpt-oss writes for a call, recipient first (how Harmony renders a call in history).
RECIPIENT_FIRST = " to="

_CHANNEL_VALUE = re.compile(r"[^\s<]*")
_CONSTRAINED = re.compile(r"<\|constrain\|>\s*([^\s<]*)", re.IGNORECASE)
_REPEATED_ROLE = re.compile(r"^(user|assistant|system|developer|tool)(?:\1)+$")
_MARKS = re.compile(r"<\|[a-z_0-9]*\|>.*$")


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """What a Harmony header says about the message that follows it."""

    role: str
    name: str | None = None
    channel: str | None = None
    recipient: str | None = None
    content_type: str | None = None


def call_headers(channel: str, content_type: str) -> list[tuple[str, str]]:
    """A call's header in both orders gpt-oss writes it, each cut as ``(begin, after the recipient)``.

    ``content_type`` carries its leading space (``" <|constrain|>json"``, ``""``).
    """
    return [
        (f"{CHANNEL_MARK}{channel} to=", f"{content_type}<|message|>"),
        (RECIPIENT_FIRST, f"{CHANNEL_MARK}{channel}{content_type}<|message|>"),
    ]


def _channel(value: str) -> tuple[str | None, str]:
    """A written channel value → (the channel it starts with, or None: junk; what was glued after it)."""
    if value in CHANNELS:
        return value, ""
    for channel in CHANNELS:
        if value.startswith(channel):
            return channel, value[len(channel) :]
    return None, ""


def _content_type(word: str) -> str | None:
    lowered = word.lower()
    if lowered.startswith(CONSTRAIN_MARK):
        return lowered if len(lowered) > len(CONSTRAIN_MARK) else None
    if lowered in BARE_CONTENT_TYPES:
        return lowered
    return None


def clean_recipient(value: str) -> str:
    """A recipient with stray control-token text cut (``exec<|channel|>commentary`` → ``exec``)."""
    return _MARKS.sub("", value).strip()


def read_header(text: str, role: str | None) -> MessageHeader:
    """Read decoded header text; never fails (see the module docstring for the readings).

    ``role`` is the known role of the first message of a completion (the prompt already said
    ``<|start|>assistant``); later headers carry their own role (None here).
    """
    channel: str | None = None
    marked = False
    glued: list[str] = []
    idx = text.find(CHANNEL_MARK)
    while idx >= 0:
        marked = True
        after = text[idx + len(CHANNEL_MARK) :]
        value = _CHANNEL_VALUE.match(after).group()  # type: ignore[union-attr]
        text = text[:idx] + " " + after[len(value) :]
        found, rest = _channel(value)
        channel = channel or found
        if rest.startswith("to=") or _content_type(rest) is not None:
            glued.append(rest)  # ``commentaryjson``: the content type, glued
        idx = text.find(CHANNEL_MARK)
    if marked and channel is None:
        channel = "analysis"  # an empty or junk channel: hidden reasoning
    if CONSTRAIN_MARK in text or "<|CONSTRAIN|>" in text.upper():
        text = _CONSTRAINED.sub(lambda m: f" {CONSTRAIN_MARK}{m.group(1)} ", text)
    words = text.split() + glued
    name: str | None = None
    recipient: str | None = None
    content_type: str | None = None
    stray: list[str] = []
    for i, word in enumerate(words):
        repeated = _REPEATED_ROLE.match(word)
        if repeated:
            word = repeated.group(1)
        if word.startswith("to="):
            value = clean_recipient(word[3:])
            if value and recipient is None:
                recipient = value
            continue
        found = _content_type(word)
        if found is not None:
            content_type = content_type or found
            continue
        if word in ROLES:
            if role is None:
                role = word
            continue
        if i == 0 and role is None:
            name = word  # a tool's name where the role goes: a tool's message
            continue
        stray.append(word)
    if name is not None:
        role = "tool" if ("." in name or recipient in NOT_TOOLS) else "assistant"
        if role == "assistant":
            name = None
    role = role or "assistant"
    if recipient is None and stray and role == "assistant":
        word = clean_recipient(stray[0])
        # A lone word where the recipient goes is the recipient (Harmony's own reading), unless it is
        # glued junk of the channel.
        recipient = word or None
    if recipient is not None and recipient.lower() in NOT_TOOLS and role == "assistant":
        recipient = None
    return MessageHeader(
        role=role, name=name, channel=channel, recipient=recipient, content_type=content_type
    )


def _only_header_words(text: str) -> bool:
    words = _CONSTRAINED.sub(lambda m: f" {CONSTRAIN_MARK}{m.group(1)} ", text).split()
    return all(w.startswith("to=") or _content_type(w) is not None for w in words)


def read_headless(text: str, role: str | None, first: bool) -> tuple[MessageHeader, str] | None:
    """A header the model ended without ``<|message|>`` (a terminator came first): the message it meant.

    - ``first`` (the completion's first message, no control token yet) and no channel: text before any
      header is the final answer (a refusal written with no header at all);
    - a known channel glued to text (``<|channel|>final__HANDOFF__``): that channel, the text its body;
    - a call with its JSON glued to the header (``to=functions.f json{"a": 1}``): that call;
    - anything else (``<|channel|>??``, a lone recipient): None, nothing usable.
    """
    idx = text.find(CHANNEL_MARK)
    if idx < 0:
        body = text.strip()
        if first and body and not body.startswith("to="):
            return MessageHeader(role or "assistant", channel="final"), body
        return None
    before = text[:idx]
    after = text[idx + len(CHANNEL_MARK) :]
    value = _CHANNEL_VALUE.match(after).group()  # type: ignore[union-attr]
    found, rest = _channel(value)
    if found is None:
        return None
    body = rest + after[len(value) :]
    brace = body.find("{")
    if brace >= 0 and _only_header_words(body[:brace]):
        header = read_header(f"{before}{CHANNEL_MARK}{found} {body[:brace]}", role)
        return header, body[brace:]
    if "to=" in before or body.lstrip().startswith("to="):
        return None  # a call whose body cannot be told from its header
    header = read_header(f"{before}{CHANNEL_MARK}{found}", role)
    body = body.strip()
    return (header, body) if body else None
