"""The streaming Harmony parser on clean output: agrees with openai-harmony, batches per feed, never leaks
control tokens. Its readings of output that breaks the format: ``test_reader.py``."""

from __future__ import annotations

import pytest
from openai_harmony import Role
from support.harmony_helpers import byte_tokens, harmony

from trtllm_responses.harmony import (
    ContentDelta,
    HarmonyEncoding,
    HarmonyStreamParser,
    MessageEnded,
    MessageHeader,
    MessageStarted,
    parse_completion,
)
from trtllm_responses.harmony.headers import read_header

COMPLETIONS = [
    "<|channel|>final<|message|>Hello there!<|return|>",
    "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
    "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
    "<|channel|>commentary<|message|>Let me look.<|end|><|start|>assistant to=functions.lookup"
    '<|channel|>commentary json<|message|>{"q": 1}<|call|>',
    '<|channel|>analysis to=browser.search code<|message|>{"query":"gpt-oss"}<|call|>',
    "<|channel|>analysis to=python code<|message|>print(1+1)<|call|>",
    "<|channel|>final<|message|>naïve café — 你好 😀 ∑<|return|>",
    "<|channel|>analysis<|message|>cut off in the midd",
]


def _harmony_parse(encoding: HarmonyEncoding, tokens: list[int]) -> list[tuple]:
    messages = encoding.harmony.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
    return [
        (m.author.role.value, m.channel, m.recipient, m.content_type, m.content[0].text) for m in messages
    ]


@pytest.mark.parametrize("completion", COMPLETIONS)
def test_parser_agrees_with_openai_harmony(encoding: HarmonyEncoding, completion: str) -> None:
    tokens = harmony(encoding, completion)
    ours = [
        (m.header.role, m.header.channel, m.header.recipient, m.header.content_type, m.text)
        for m in parse_completion(encoding, tokens)
    ]
    assert ours == _harmony_parse(encoding, tokens)


@pytest.mark.parametrize("completion", COMPLETIONS)
def test_token_by_token_deltas_concatenate_to_the_message(encoding: HarmonyEncoding, completion: str) -> None:
    tokens = harmony(encoding, completion)
    parser = HarmonyStreamParser(encoding)
    texts: list[str] = []
    current: list[str] = []
    for token in tokens:
        for event in parser.feed([token]):
            if isinstance(event, ContentDelta):
                current.append(event.text)
            elif isinstance(event, MessageEnded):
                texts.append("".join(current))
                current = []
    for event in parser.finish():
        if isinstance(event, ContentDelta):
            current.append(event.text)
        elif isinstance(event, MessageEnded):
            texts.append("".join(current))
    assert texts == [m.text for m in parse_completion(encoding, tokens)]


def test_one_feed_gives_one_delta_per_message(encoding: HarmonyEncoding) -> None:
    tokens = harmony(encoding, "<|channel|>final<|message|>one two three four five<|return|>")
    events = HarmonyStreamParser(encoding).feed(tokens)
    assert events == [
        MessageStarted(MessageHeader(role="assistant", channel="final")),
        ContentDelta("one two three four five"),
        MessageEnded(encoding.return_, len(tokens)),
    ]


def test_multibyte_characters_split_across_tokens_are_held_back(encoding: HarmonyEncoding) -> None:
    head = harmony(encoding, "<|channel|>final<|message|>")
    body = byte_tokens(encoding, "é😀".encode())
    parser = HarmonyStreamParser(encoding)
    parser.feed(head)
    deltas = [parser.feed([t]) for t in body]
    # é is 2 bytes, 😀 is 4: text appears only when a character is complete.
    assert deltas == [[], [ContentDelta("é")], [], [], [], [ContentDelta("😀")]]
    assert parser.feed([encoding.return_]) == [MessageEnded(encoding.return_, len(head) + len(body) + 1)]


def test_a_character_cut_off_is_dropped_not_replaced(encoding: HarmonyEncoding) -> None:
    """A budget cut inside a multi-byte character: the text ends at the last whole one (issue 31, Why 6)."""
    tokens = harmony(encoding, "<|channel|>final<|message|>ok") + byte_tokens(encoding, "😀".encode()[:2])
    parser = HarmonyStreamParser(encoding)
    events = parser.feed(tokens) + parser.finish(False)
    assert events[1:] == [ContentDelta("ok"), MessageEnded(None, len(tokens))]
    # A broken byte the model wrote mid-body is still U+FFFD: it wrote it.
    broken = (
        harmony(encoding, "<|channel|>final<|message|>a")
        + byte_tokens(encoding, b"\xff")
        + harmony(encoding, "b<|return|>")
    )
    events = HarmonyStreamParser(encoding).feed(broken)
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "a\ufffdb"


@pytest.mark.parametrize(
    "text, role, expected",
    [
        ("<|channel|>final", "assistant", MessageHeader("assistant", channel="final")),
        ("assistant<|channel|>analysis", None, MessageHeader("assistant", channel="analysis")),
        (
            "<|channel|>commentary to=functions.f <|constrain|>json",
            "assistant",
            MessageHeader(
                "assistant", channel="commentary", recipient="functions.f", content_type="<|constrain|>json"
            ),
        ),
        (
            " to=functions.f<|channel|>commentary<|constrain|>json",
            "assistant",
            MessageHeader(
                "assistant", channel="commentary", recipient="functions.f", content_type="<|constrain|>json"
            ),
        ),
        (
            "functions.f to=assistant<|channel|>commentary",
            None,
            MessageHeader("tool", name="functions.f", channel="commentary", recipient="assistant"),
        ),
    ],
)
def test_header_grammar(text: str, role: str | None, expected: MessageHeader) -> None:
    assert read_header(text, role) == expected


def test_message_token_counts_cover_the_whole_completion(encoding: HarmonyEncoding) -> None:
    first = harmony(encoding, "<|channel|>analysis<|message|>Think.<|end|>")
    second = harmony(encoding, "<|start|>assistant<|channel|>final<|message|>Answer.<|return|>")
    events = HarmonyStreamParser(encoding).feed(first + second)
    assert [e.num_tokens for e in events if isinstance(e, MessageEnded)] == [len(first), len(second)]


def test_feed_body_takes_only_plain_body_tokens(encoding: HarmonyEncoding) -> None:
    parser = HarmonyStreamParser(encoding)
    head = harmony(encoding, "<|channel|>final<|message|>")
    assert parser.feed_body(head[:1]) is None  # still in the header: nothing consumed
    parser.feed(head)
    word = encoding.encode_plain(" hello")
    assert parser.feed_body(word) == " hello"
    assert parser.feed_body([encoding.end]) is None  # a control token: left for feed
    partial = byte_tokens(encoding, "😀".encode())
    assert parser.feed_body(partial[:1]) is None  # part of a character: left for feed
    assert parser.feed(partial) == [ContentDelta("😀")]
    assert parser.feed([encoding.end]) == [MessageEnded(encoding.end, len(head) + 1 + 4 + 1)]
