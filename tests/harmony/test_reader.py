"""The recovering reader: its table of readings, the header grammar guided decoding shares with it,
recipients resolved against what was declared, JSON arguments cut after their first value, and the
bound on calls to tools nobody runs. The corpus of real completions is ``test_reader_corpus.py``;
the fuzzer ``test_reader_fuzz.py``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from support.harmony_helpers import harmony
from support.stream_grammar import check_stream

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.constraints.guided import structural_tag
from trtllm_responses.harmony import HarmonyEncoding, parse_completion
from trtllm_responses.harmony.headers import FINAL_HEADERS, FREE_CHANNELS, MessageHeader, read_header
from trtllm_responses.harmony.items import ItemKind, classify
from trtllm_responses.harmony.json_cut import JsonCut
from trtllm_responses.harmony.parser import (
    MAX_HEADER_TOKENS,
    ContentDelta,
    HarmonyStreamParser,
    MessageStarted,
)
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.responses.tool_loop import MAX_RECOVERIES

# What the model wrote → the messages read: (channel, recipient, text, ended by a token).
READINGS: list[tuple[str, str, list[tuple[str | None, str | None, str, bool]]]] = [
    ("clean", "<|channel|>final<|message|>Hi<|return|>", [("final", None, "Hi", True)]),
    ("junk channel, no body: nothing", "<|channel|>??<|end|>", []),
    (
        "junk channel with a body, a message after it: analysis",
        "<|channel|>??<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y<|return|>",
        [("analysis", None, "x", True), ("final", None, "y", True)],
    ),
    (
        "junk channel with a body ending the completion: the answer",
        "<|channel|>??<|message|>x<|end|>",
        [("final", None, "x", True)],
    ),
    (
        "empty channel closed by <|return|>: the answer",
        "<|channel|><|message|>x<|return|>",
        [("final", None, "x", True)],
    ),
    (
        "empty channel, a message after it: analysis",
        "<|channel|><|message|>x<|end|><|channel|>final<|message|>y<|return|>",
        [("analysis", None, "x", True), ("final", None, "y", True)],
    ),
    ("a prefix of final is final", "<|channel|>fina<|message|>x<|end|>", [("final", None, "x", True)]),
    ("channels in any case", "<|channel|>FINAL<|message|>x<|end|>", [("final", None, "x", True)]),
    ("a space after <|channel|>", "<|channel|> final<|message|>x<|end|>", [("final", None, "x", True)]),
    (
        "analysis closed by <|return|>: reasoning, then the answer repeating it",
        "<|channel|>analysis<|message|>Next Austin<|return|>",
        [("analysis", None, "Next Austin", True), ("final", None, "Next Austin", True)],
    ),
    (
        "channel glued to a word",
        "<|channel|>finalize<|message|>x<|return|>",
        [("final", None, "x", True)],
    ),
    ("text before any header: the answer", "Sorry, no.<|return|>", [("final", None, "Sorry, no.", True)]),
    (
        "text before any header, then nothing: the answer",
        "Sorry, no.<|end|>",
        [("final", None, "Sorry, no.", True)],
    ),
    (
        "text before any header, then a message: reasoning",
        "The user asks. We must refuse.<|end|><|start|>assistant<|channel|>final<|message|>No.<|return|>",
        [("analysis", None, "The user asks. We must refuse.", True), ("final", None, "No.", True)],
    ),
    (
        "text before a header's <|channel|>: reasoning",
        "Some text <|channel|>final<|message|>No.<|return|>",
        [("analysis", None, "Some text", True), ("final", None, "No.", True)],
    ),
    ("text before any header, cut off", "Sorry, no", [("final", None, "Sorry, no", False)]),
    (
        "<|message|> alone, then a header: nothing",
        "<|message|><|channel|>final<|message|>x<|return|>",
        [("final", None, "x", True)],
    ),
    (
        "a stray word is only a candidate recipient",
        "<|channel|>commentary 2?<|message|>x<|end|>",
        [("commentary", "2?", "x", True)],
    ),
    (
        "a channel name is never a recipient",
        "<|channel|>analysis analysis<|message|>x<|end|>",
        [("analysis", None, "x", True)],
    ),
    (
        "no <|message|>: channel then text",
        "<|channel|>final__X__<|return|>",
        [("final", None, "__X__", True)],
    ),
    ("no <|message|>, nothing after the channel", "<|channel|>final<|end|>", []),
    (
        "no <|message|>: junk after a non-final channel is hidden",
        "<|channel|>commentary 2?<|end|>",
        [("analysis", None, "2?", True)],
    ),
    (
        "no <|message|>: a content type is not text",
        "<|channel|>final <|constrain|>write: notes<|return|>",
        [("final", None, "notes", True)],
    ),
    (
        "no <|message|>: arguments glued to the content type",
        '<|channel|>commentary to=functions.f json{"a":1}<|call|>',
        [("commentary", "functions.f", '{"a":1}', True)],
    ),
    (
        "no <|message|>: a call with a raw body is not guessed",
        "<|channel|>analysis to=python code print(1)<|call|>",
        [],
    ),
    (
        "repeated <|start|> collapses",
        "<|start|>assistant<|start|>assistant<|channel|>final<|message|>x<|return|>",
        [("final", None, "x", True)],
    ),
    (
        "repeated role collapses",
        "<|start|>assistantassistant<|channel|>final<|message|>x<|return|>",
        [("final", None, "x", True)],
    ),
    (
        "text and newlines between messages are dropped",
        "<|channel|>analysis<|message|>a<|end|>\nstray<|start|>assistant<|channel|>final<|message|>b<|return|>",
        [("analysis", None, "a", True), ("final", None, "b", True)],
    ),
    (
        "<|end|><|return|>",
        "<|channel|>final<|message|>a<|end|><|return|>",
        [("final", None, "a", True)],
    ),
    (
        "<|start|> inside a body ends it",
        "<|channel|>analysis<|message|>a<|start|>assistant<|channel|>final<|message|>b<|return|>",
        [("analysis", None, "a", True), ("final", None, "b", True)],
    ),
    (
        "<|channel|> inside a body ends it",
        "<|channel|>analysis<|message|>a<|channel|>final<|message|>b<|return|>",
        [("analysis", None, "a", True), ("final", None, "b", True)],
    ),
    (
        "<|channel|> between messages starts an assistant header",
        "<|channel|>analysis<|message|>a<|end|><|channel|>final<|message|>b<|return|>",
        [("analysis", None, "a", True), ("final", None, "b", True)],
    ),
    (
        "other control tokens inside a body are dropped",
        "<|channel|>final<|message|>a<|constrain|>b<|message|>c<|return|>",
        [("final", None, "abc", True)],
    ),
    (
        "a message written as a tool is skipped",
        "<|channel|>analysis<|message|>a<|end|><|start|>functions.f to=assistant<|channel|>commentary<|message|>"
        "{}<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>",
        [("analysis", None, "a", True), ("final", None, "b", True)],
    ),
    (
        "a message written as the user is skipped",
        "<|channel|>final<|message|>a<|end|><|start|>user<|message|>fake<|end|>",
        [("final", None, "a", True)],
    ),
    (
        "to=assistant is a preamble",
        "<|channel|>commentary to=assistant<|message|>On it.<|end|>",
        [("commentary", None, "On it.", True)],
    ),
    (
        "final with a content type is an answer",
        '<|channel|>final <|constrain|>json<|message|>{"a":1}<|return|>',
        [("final", None, '{"a":1}', True)],
    ),
    (
        "<|constrain|> JSON, any case, with a space",
        '<|channel|>final<|constrain|> JSON<|message|>{"a":1}<|return|>',
        [("final", None, '{"a":1}', True)],
    ),
    (
        "a stray channel marker in a recipient",
        " to=exec<|channel|>commentary<|channel|>commentary json<|message|>{}<|call|>",
        [("commentary", "exec", "{}", True)],
    ),
]


def _read(encoding: HarmonyEncoding, completion: str) -> list[tuple[str | None, str | None, str, bool]]:
    return [
        (m.header.channel, m.header.recipient, m.text, m.terminator is not None)
        for m in parse_completion(encoding, harmony(encoding, completion))
    ]


@pytest.mark.parametrize(("rule", "completion", "expected"), READINGS, ids=[r[0] for r in READINGS])
def test_reading(encoding: HarmonyEncoding, rule: str, completion: str, expected: list[Any]) -> None:
    assert _read(encoding, completion) == expected
    tokens = harmony(encoding, completion)
    parser = HarmonyStreamParser(encoding)
    events = parser.feed(tokens) + parser.finish()
    # Token by token: the same messages (nothing reported is taken back).
    one = HarmonyStreamParser(encoding)
    stepped = [e for t in tokens for e in one.feed([t])] + one.finish()
    started = [e.header for e in events if isinstance(e, MessageStarted)]
    assert [e.header for e in stepped if isinstance(e, MessageStarted)] == started
    # parse_completion adds the answer a reasoning message closed by <|return|> repeats.
    shown = [(c, r) for c, r, _, _ in expected]
    repeated = completion.endswith("analysis<|message|>Next Austin<|return|>")
    assert [(h.channel, h.recipient) for h in started] == (shown[:-1] if repeated else shown)


@pytest.mark.parametrize(
    ("after", "channel"),
    [
        ("<|return|>", "final"),
        ("<|end|>", "final"),  # then the completion ends
        ("<|end|><|start|>assistant<|channel|>final<|message|>No.<|return|>", "analysis"),
        ("<|channel|>final<|message|>No.<|return|>", "analysis"),  # a forgotten <|end|>
    ],
)
def test_headerless_text_is_held_until_its_end_says_what_it_is(
    encoding: HarmonyEncoding, after: str, channel: str
) -> None:
    """Text with no header is the answer only when it ends the completion, reasoning when a message follows
    (openai/harmony#80: gpt-oss-120b's refusals); it is held until then, nothing streamed is taken back."""
    text = "The user asks for something disallowed, so according to policy we must refuse it."
    parser = HarmonyStreamParser(encoding)
    assert parser.feed(harmony(encoding, text)) == []  # held: no header says what it is
    events = parser.feed(harmony(encoding, after)) + parser.finish()
    assert isinstance(events[0], MessageStarted) and events[0].header.channel == channel
    assert events[1] == ContentDelta(text)


def test_endless_header_is_skipped_not_fatal(encoding: HarmonyEncoding) -> None:
    parser = HarmonyStreamParser(encoding)
    junk = harmony(encoding, "<|channel|>" + "x " * (MAX_HEADER_TOKENS + 10))
    assert parser.feed(junk) == []
    rest = parser.feed(harmony(encoding, "<|start|>assistant<|channel|>final<|message|>ok<|return|>"))
    assert isinstance(rest[0], MessageStarted) and parser.dropped


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "<|channel|>final <|constrain|>json",
            MessageHeader("assistant", channel="final", content_type="<|constrain|>json"),
        ),
        (
            "<|channel|>final<|constrain|>JSON",
            MessageHeader("assistant", channel="final", content_type="<|constrain|>json"),
        ),
        ("<|channel|>final json", MessageHeader("assistant", channel="final", content_type="json")),
        (
            "<|channel|>commentary to=functions.f<|constrain|> json",
            MessageHeader(
                "assistant", channel="commentary", recipient="functions.f", content_type="<|constrain|>json"
            ),
        ),
        (
            "<|channel|>analysis to=python code",
            MessageHeader("assistant", channel="analysis", recipient="python", content_type="code"),
        ),
    ],
)
def test_constrain_is_a_content_type_never_a_recipient(text: str, expected: MessageHeader) -> None:
    assert read_header(text, "assistant") == expected


BUILTIN = {"python": "Run python.", "browser": "Browse."}
MCP_NAMESPACE = {
    "name": "demo",
    "description": "A demo server",
    "tools": [{"name": "relay", "description": "Echo", "parameters": {"type": "object", "properties": {}}}],
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
STRICT = {
    **WEATHER,
    "name": "strict_weather",
    "strict": True,
    "parameters": {**WEATHER["parameters"], "additionalProperties": False},
}
OTHER = {"type": "function", "name": "other", "parameters": {"type": "object", "properties": {}}}
TICKET = {
    "type": "custom",
    "name": "ticket",
    "format": {"type": "grammar", "syntax": "regex", "definition": "[A-Z]+-[0-9]+"},
}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def _headers_of(tag: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Every header a structural tag accepts, with the recipient it names (None: the final answer)."""
    heads: list[tuple[str, str | None]] = []
    for element in tag["format"]["elements"][1]["elements"]:
        if element["type"] == "grammar":  # the free final answer
            assert json.loads(element["grammar"].split("::=", 1)[1].split(" body")[0]) == FINAL_HEADERS[0]
            heads.append((FINAL_HEADERS[0], None))
            continue
        begin, content = element["begin"], element["content"]
        if content["type"] == "sequence":  # several recipients share a tag
            names_rule, after, _ = content["elements"]
            names = [json.loads(n) for n in names_rule["grammar"].split("::=", 1)[1].strip().split(" | ")]
            heads += [(begin + name + after["value"], name) for name in names]
        elif begin in FINAL_HEADERS:
            heads.append((begin, None))
        else:
            recipient = begin.split(" to=", 1)[1].split("<|")[0].split(" ")[0]
            heads.append((begin, recipient))
    return heads


@pytest.mark.parametrize(
    "body",
    [
        {
            "input": "x",
            "tools": [
                WEATHER,
                OTHER,
                STRICT,
                TICKET,
                {"type": "code_interpreter", "container": {"type": "auto"}},
                {"type": "web_search"},
            ],
            "text": {"format": {"type": "json_schema", "name": "place", "schema": SCHEMA, "strict": True}},
        },
        {"input": "x", "tools": [WEATHER, OTHER, TICKET, {"type": "web_search"}], "tool_choice": "required"},
        {"input": "x", "tools": [TICKET, {"type": "code_interpreter", "container": {"type": "auto"}}]},
    ],
    ids=["json-format", "required", "custom-grammar"],
)
def test_every_header_the_constraint_accepts_reads_as_it_means(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter, body: dict[str, Any]
) -> None:
    """One truth about headers: what guided decoding lets the model write, the parser reads as meant."""
    prompt = adapter.build_prompt(parse_request(body), namespaces=[MCP_NAMESPACE], builtin=BUILTIN)
    assert prompt.constraint is not None
    tag = json.loads(structural_tag(prompt.constraint))
    heads = _headers_of(tag)
    assert len(heads) >= 3
    for channel in FREE_CHANNELS:  # the free messages before the last one
        heads.append((f"<|channel|>{channel}<|message|>", "free:" + channel))
    for header, recipient in heads:
        messages = parse_completion(encoding, harmony(encoding, header + "{}<|end|>"))
        assert len(messages) == 1, header
        target = classify(messages[0].header, prompt.tools)
        if recipient is None:
            assert target.kind is ItemKind.MESSAGE and target.phase == "final_answer", header
        elif recipient.startswith("free:"):
            assert target.kind in (ItemKind.REASONING, ItemKind.MESSAGE) and target.phase != "final_answer", (
                header
            )
        else:
            assert messages[0].header.recipient == recipient, header
            expected = {
                "python": ItemKind.CODE_INTERPRETER_CALL,
                "demo.relay": ItemKind.MCP_CALL,
                "functions.ticket": ItemKind.CUSTOM_TOOL_CALL,
            }.get(
                recipient,
                ItemKind.WEB_SEARCH_CALL if recipient.startswith("browser.") else ItemKind.FUNCTION_CALL,
            )
            assert target.kind is expected, header


@pytest.mark.parametrize(
    ("recipient", "expected"),
    [
        ("functions.get_weather", "get_weather"),
        ("get_weather", "get_weather"),  # a bare name (openai/harmony's test_simple_tool_call)
        ("functions.functions.get_weather", "get_weather"),
        ("functions.get_weatherjson", "get_weather"),
        ("get_weather<|channel|>commentary", "get_weather"),
        ("ticket", "ticket"),
        ("relay", None),  # two tools of that name: not guessed
        ("functions.nothing", None),
    ],
)
def test_recipients_resolve_against_the_declared_tools(
    adapter: HarmonyAdapter, recipient: str, expected: str | None
) -> None:
    relay = {"type": "namespace", "name": "ns", "description": "", "tools": [{**OTHER, "name": "relay"}]}
    tools = adapter.build_prompt(
        parse_request({"input": "x", "tools": [WEATHER, TICKET, {**OTHER, "name": "relay"}, relay]})
    ).tools
    assert tools is not None
    tool = tools.resolve(recipient)
    assert (tool.name if tool is not None else None) == expected


@pytest.mark.parametrize(
    ("chunks", "kept", "dropped"),
    [
        (['{"a": 1}'], '{"a": 1}', ""),
        (['{"a": "}"', "} and more"], '{"a": "}"}', " and more"),
        (['{"a": "\\"}', '"}{"b":2}'], '{"a": "\\"}"}', '{"b":2}'),
        (["  [1, [2]]", " x"], "  [1, [2]]", " x"),
        (["not json {"], "not json {", ""),
        (['{"open": ['], '{"open": [', ""),
    ],
)
def test_json_arguments_are_cut_after_the_first_value(chunks: list[str], kept: str, dropped: str) -> None:
    cut = JsonCut()
    assert "".join(cut.feed(c) for c in chunks) == kept
    assert "".join(cut.dropped) == dropped


def test_calls_to_tools_nobody_runs_are_bounded(http: httpx.Client) -> None:
    """Each unavailable call is answered to the model; past MAX_RECOVERIES the response ends incomplete."""
    call = "#harmony\n<|channel|>commentary to=nowhere.tool <|constrain|>json<|message|>{}<|call|>"
    steps = "\n---\n".join([call] * (MAX_RECOVERIES + 2))
    response = check_stream(_stream(http, {"input": "#steps\n" + steps}))
    assert response["status"] == "incomplete"
    assert response["incomplete_details"]["reason"] == "max_messages"
    calls = [i for i in response["output"] if i["type"] == "mcp_call"]
    assert [c["status"] for c in calls] == ["failed"] * MAX_RECOVERIES + ["incomplete"]
    assert all("is not available" in c["error"]["message"] for c in calls[:-1])
    # Within the bound: answered, then the model's answer.
    response = check_stream(_stream(http, {"input": f"#steps\n{call}\n---\nAnswer."}))
    assert response["status"] == "completed" and response["output"][-1]["content"][0]["text"] == "Answer."
    # max_tool_calls counts them.
    capped = check_stream(
        _stream(http, {"input": f"#steps\n{call}\n---\n{call}\n---\nAnswer.", "max_tool_calls": 1})
    )
    assert capped["status"] == "incomplete" and capped["incomplete_details"]["reason"] == "max_messages"


def _stream(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    from support.server_harness import stream_events

    return stream_events(http, body)


def test_unreadable_output_fails_quoting_what_the_model_wrote_truncated(http: httpx.Client) -> None:
    from trtllm_responses.harmony.completion import QUOTED_CHARS

    junk = "<|channel|>" + "?" * 3000 + "<|end|><|return|>"  # the model ended it (a cut is incomplete)
    response = check_stream(_stream(http, {"input": "#harmony\n" + junk}))
    assert response["status"] == "failed" and response["output"] == []
    message = response["error"]["message"]
    assert "<|channel|>???" in message and message.endswith("…'")
    assert len(message) < QUOTED_CHARS + 100


def test_call_options_write_the_content_type_the_header_grammar_reads() -> None:
    """The header a JSON call option writes reads back as a JSON call (and a custom tool's as none)."""
    from trtllm_responses.harmony.headers import JSON_CONTENT_TYPE
    from trtllm_responses.harmony.tools import CallOption

    for custom, expected in ((False, JSON_CONTENT_TYPE), (True, None)):
        written = CallOption("functions.f", custom=custom).header_content_type
        header = read_header(f"<|channel|>commentary to=functions.f {written}".rstrip(), "assistant")
        assert header.recipient == "functions.f" and header.content_type == expected
