"""The one definition of a Harmony header: what the model may write, read by the parser, allowed by constraints.

A header is what the model writes between ``<|start|>`` and ``<|message|>``: a role, a channel, a
recipient (``to=NAME``, after the channel or before it) and a content type. :func:`read_header` reads
any header text and never fails (the parser's reading, docs/harmony.md#what-the-model-may-write). Channels are
read by meaning (any case; a prefix of ``final`` is final); a channel nobody can place is marked
(``placed=False``) for the parser to place by how its body ends; a stray word where the recipient goes is
only a candidate (``guessed=True``), a call only if it names a tool the response has (``harmony/items.py``);
the forms guided decoding allows (:data:`FINAL_HEADERS`, :func:`call_headers`,
:data:`FREE_CHANNELS`) are built from the same names, and ``tests/harmony/test_reader.py`` walks every header
the structural tag accepts through the parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

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
    "header_fragment",
    "plainly_text",
    "read_header",
    "read_headless",
    "trailing_recipient",
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
_TRAILING_RECIPIENT = re.compile(r"(?:^|\s)to=([^\s<]+)\s*$")


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """What a Harmony header says about the message that follows it."""

    role: str
    name: str | None = None
    channel: str | None = None
    recipient: str | None = None
    content_type: str | None = None
    #: The recipient is a stray word where the recipient goes (no ``to=``): a call only to a tool that exists.
    guessed: bool = False
    #: False: the channel was marked but is junk or empty (read as ``analysis``); the parser places the
    #: message by how its body ends (docs/harmony.md#what-the-model-may-write).
    placed: bool = True


def call_headers(channel: str, content_type: str) -> list[tuple[str, str]]:
    """A call's header in both orders gpt-oss writes it, each cut as ``(begin, after the recipient)``.

    ``content_type`` carries its leading space (``" <|constrain|>json"``, ``""``).
    """
    return [
        (f"{CHANNEL_MARK}{channel} to=", f"{content_type}<|message|>"),
        (RECIPIENT_FIRST, f"{CHANNEL_MARK}{channel}{content_type}<|message|>"),
    ]


def _channel(value: str) -> tuple[str | None, str]:
    """A written channel value → (the channel it means, or None: junk; what was glued after it).

    By meaning: any case (``FINAL``), a prefix of ``final`` (``fina``, cut or misspelt) is final, and a
    channel glued to more (``finalize``, ``commentaryjson``) is the channel it starts with.
    """
    if value in CHANNELS:
        return value, ""
    lowered = value.lower()
    if lowered in CHANNELS:
        return lowered, ""
    if lowered and "final".startswith(lowered):
        return "final", ""
    for channel in CHANNELS:
        if lowered.startswith(channel):
            return channel, value[len(channel) :]
    return None, ""


def _channel_word(word: str) -> str | None:
    """A stray word that is a channel's name (any case): the channel, never a recipient."""
    lowered = word.lower()
    return lowered if lowered in CHANNELS else None


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
        spaces = len(after) - len(after.lstrip())  # ``<|channel|> final``: the value after the space
        value = _CHANNEL_VALUE.match(after, spaces).group()  # type: ignore[union-attr]
        found, rest = _channel(value)
        if found is None and (value.startswith("to=") or _content_type(value) is not None):
            value = ""  # ``<|channel|> to=f``: no channel value; the recipient is read as a word
        text = text[:idx] + " " + after[spaces + len(value) :]
        channel = channel or found
        if rest.startswith("to=") or _content_type(rest) is not None:
            glued.append(rest)  # ``commentaryjson``: the content type, glued
        idx = text.find(CHANNEL_MARK)
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
        named = _channel_word(word)
        if named is not None:  # ``analysis`` without its marker, or repeated: a channel, never a recipient
            channel = channel or named
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
    guessed = False
    if recipient is None and stray and role == "assistant":
        # A lone word where the recipient goes may be the recipient (Harmony's own reading): a candidate,
        # a call only if it names a tool the response has (``harmony/items.py``, ``callable_header``).
        recipient = clean_recipient(stray[0]) or None
        guessed = recipient is not None
    if recipient is not None and recipient.lower() in NOT_TOOLS and role == "assistant":
        recipient, guessed = None, False
    placed = channel is not None or not marked
    if not placed:
        channel = "analysis"  # an empty or junk channel: hidden reasoning unless its end says otherwise
    return MessageHeader(
        role=role,
        name=name,
        channel=channel,
        recipient=recipient,
        content_type=content_type,
        guessed=guessed,
        placed=placed,
    )


def plainly_text(text: str) -> bool:
    """Whether the text before the completion's first control token is prose rather than a header.

    Two words or more that no header has (a role, a channel, ``to=``, a content type; a bare ``text``,
    ``json`` or ``code`` only beside a ``to=``): ``Some text`` before ``<|channel|>`` is a message the
    model wrote without a header, not a header.
    """
    words = _CONSTRAINED.sub(lambda m: f" {CONSTRAIN_MARK}{m.group(1)} ", text).split()
    call = any(w.startswith("to=") for w in words)
    prose = [
        w
        for w in words
        if not (
            w.startswith(("to=", CONSTRAIN_MARK))
            or (call and _content_type(w) is not None)
            or _REPEATED_ROLE.match(w)
            or w in ROLES
            or _channel_word(w) is not None
        )
    ]
    return len(prose) >= 2


#: The words of a header (besides ``to=NAME`` and ``<|constrain|>TYPE``), whose prefixes a cut header ends with.
_HEADER_WORDS = (*ROLES, *CHANNELS, *BARE_CONTENT_TYPES, "to=")


def header_fragment(text: str) -> bool:
    """Whether the text before the completion's first control token may be a header, or the start of one.

    Every word is one a header has (a role, a channel in any case, a content type) up to a recipient
    (``to=NAME``: what follows it is its header's, a content type or arguments glued to it) or the end,
    the last one perhaps cut short (``to``, ``comment``: a prefix of one): such text is never the
    answer's text (docs/harmony.md#what-the-model-may-write), even where the model or the budget ended it.
    """
    words = text.split()
    cut = not text[-1:].isspace()
    for i, word in enumerate(words):
        lowered = word.lower()
        if lowered.startswith("to="):
            return True
        if lowered.startswith(CONSTRAIN_MARK) or lowered in _HEADER_WORDS or _REPEATED_ROLE.match(lowered):
            continue
        if not (cut and i == len(words) - 1 and any(w.startswith(lowered) for w in _HEADER_WORDS)):
            return False
    return True


def trailing_recipient(text: str) -> str | None:
    """A recipient the model wrote at the end of a body, before a ``<|channel|>`` that ended it.

    ``…Let me check. to=functions.get_weather<|channel|>commentary json<|message|>{…}``: the model forgot
    ``<|end|><|start|>assistant`` and wrote the next header recipient first; the recipient is that header's.
    """
    match = _TRAILING_RECIPIENT.search(text[-200:])
    if match is None:
        return None
    recipient = clean_recipient(match.group(1))
    return recipient if recipient and recipient.lower() not in NOT_TOOLS else None


def _only_header_words(text: str) -> bool:
    words = _CONSTRAINED.sub(lambda m: f" {CONSTRAIN_MARK}{m.group(1)} ", text).split()
    return all(w.startswith("to=") or _content_type(w) is not None for w in words)


def _strip_header_words(body: str) -> str:
    """A header's leftover text with the content types it starts with cut (``<|constrain|>write: x`` → ``x``)."""
    words = _CONSTRAINED.sub(lambda m: f" {CONSTRAIN_MARK}{m.group(1)} ", body).split(None, 1)
    while words and _content_type(words[0]) is not None:
        words = words[1].split(None, 1) if len(words) > 1 else []
    return " ".join(words).strip()


def read_headless(
    text: str, role: str | None, first: bool, answer: bool = False
) -> tuple[MessageHeader, str] | None:
    """A header the model ended without ``<|message|>`` (a terminator came first): the message it meant.

    ``answer``: the completion ended with it (``<|return|>``, or the engine stopped on a stop token).

    - ``first`` (the completion's first message, no control token yet) and no channel: text the model
      wrote without a header: the answer when ``answer``, else reasoning (the parser decides which);
    - a known channel glued to text (``<|channel|>final__HANDOFF__``): the text is the answer when the
      channel is final or ``answer``, else hidden reasoning (``<|channel|>commentary 2?<|end|>``: junk is
      never shown); content types it starts with are cut;
    - a call with its JSON glued to the header (``to=functions.f json{"a": 1}``): that call;
    - anything else (``<|channel|>??``, a lone recipient): None, nothing usable.
    """
    idx = text.find(CHANNEL_MARK)
    if idx < 0:
        body = text.strip()
        if first and body and not header_fragment(body):
            return MessageHeader(role or "assistant", channel="final" if answer else "analysis"), body
        return None
    before = text[:idx]
    after = text[idx + len(CHANNEL_MARK) :].lstrip()
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
    body = _strip_header_words(body)
    if not body:
        return None
    shown = "final" if (answer or found == "final") else "analysis"
    return replace(header, channel=shown, recipient=None, guessed=False), body
