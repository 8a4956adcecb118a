"""Issue 44, point 9: a header is never text, wherever the budget cuts it.

A budget cut (``max_output_tokens``) inside a header, the completion's first one included (where no control
token has said yet that it is a header: `` to=functions.f<|channel|>…``, recipient first), must not show the
header's words as the answer: the response is ``incomplete`` (``max_output_tokens``) with no text from the
header, on every path (Responses streamed and not, Chat Completions, Messages). Property-style: every token
position inside each header, replayed through the echo's ``#harmony`` raw mode.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from support.chat_grammar import check_chat_stream, parse_chat_sse
from support.messages_grammar import check_messages_stream, parse_messages_sse
from support.reader_corpus import WEATHER
from support.server_harness import RunningServer, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding

ANALYSIS = "<|channel|>analysis<|message|>Think.<|end|>"
#: (what comes before the header, the header up to its <|message|>, what follows): each written as gpt-oss does.
HEADERS = [
    (
        "",
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
        '{"city":"Paris"}<|call|>',
    ),
    (
        "",
        " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>",
        '{"city":"Paris"}<|call|>',
    ),
    ("", " to=functions.get_weather json<|message|>", '{"city":"Paris"}<|call|>'),
    ("", "commentary to=functions.get_weather <|constrain|>json<|message|>", '{"city":"Paris"}<|call|>'),
    ("", "assistant<|channel|>final<|message|>", "Hello.<|return|>"),
    ("", "analysis<|message|>", "Think.<|end|>"),
    (
        ANALYSIS,
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>",
        "{}<|call|>",
    ),
    (ANALYSIS, "<|start|>assistant<|channel|>final<|message|>", "Hello.<|return|>"),
]
HEADER_WORDS = ("to=", "functions", "get_weather", "commentary", "analysis", "assistant", "final", "json")


def _cuts(encoding: HarmonyEncoding) -> list[tuple[str, int, list[str]]]:
    """(completion, a budget ending inside its header, the items before the header) for every position."""
    cuts = []
    for before, header, after in HEADERS:
        start = len(encoding.encode(before))
        inside = len(encoding.encode(header)) - 1  # up to, not including, its <|message|>
        items = ["reasoning"] if before else []
        cuts += [(before + header + after, start + n, items) for n in range(1, inside + 1)]
    return cuts


def _no_header_text(texts: list[str]) -> None:
    for text in texts:
        assert not any(word in text for word in HEADER_WORDS), text


def test_a_cut_inside_a_header_shows_none_of_it(server: RunningServer, encoding: HarmonyEncoding) -> None:
    cuts = _cuts(encoding)
    assert len(cuts) > 50  # every position of every header
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        for completion, budget, items in cuts:
            body = {"input": "#harmony\n" + completion, "tools": [WEATHER], "max_output_tokens": budget}
            responses = [check_stream(stream_events(client, body))]
            recipient_first = completion.startswith(" to=")
            if recipient_first:  # streamed and not read the same events: one header's positions both ways
                responses.append(client.post("/v1/responses", json=body).json())
            for response in responses:
                where = (completion, budget, response["output"])
                assert response["status"] == "incomplete", where
                assert response["incomplete_details"]["reason"] == "max_output_tokens", where
                assert [i["type"] for i in response["output"]] == items, where
                _no_header_text([c["text"] for i in response["output"] for c in i.get("content") or []])
            if recipient_first:  # the dialects read the same events too
                _chat_and_messages_say_nothing(client, completion, budget)


def _chat_and_messages_say_nothing(client: httpx.Client, completion: str, budget: int) -> None:
    """Chat Completions ends ``length`` with no content, Messages ``max_tokens`` with no text block."""
    chat: dict[str, Any] = {
        "model": "gpt-oss",
        "messages": [{"role": "user", "content": "#harmony\n" + completion}],
        "max_completion_tokens": budget,
    }
    plain = client.post("/v1/chat/completions", json=chat).json()["choices"][0]
    with client.stream("POST", "/v1/chat/completions", json={**chat, "stream": True}) as reply:
        streamed = check_chat_stream(parse_chat_sse(reply.iter_lines()))["choices"][0]
    assert plain["finish_reason"] == streamed["finish_reason"] == "length", (completion, budget)
    assert not plain["message"]["content"] and not streamed["content"], (completion, budget)
    messages: dict[str, Any] = {
        "model": "gpt-oss",
        "max_tokens": budget,
        "messages": [{"role": "user", "content": "#harmony\n" + completion}],
    }
    answer = client.post("/v1/messages", json=messages).json()
    with client.stream("POST", "/v1/messages", json={**messages, "stream": True}) as reply:
        said = check_messages_stream(parse_messages_sse(reply.iter_lines()))["message"]
    for message in (answer, said):
        assert message["stop_reason"] == "max_tokens", (completion, budget, message)
        assert [b for b in message["content"] if b["type"] == "text"] == [], (completion, budget, message)
        _no_header_text([b.get("thinking", "") for b in message["content"]])


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        # The model ended its completion inside its first header: nothing readable, never the header as text.
        (" to=functions.get_weather<|end|>", None),
        ("commentary to<|return|>", None),
        # Text is still text, cut or ended.
        ("Hello there<|return|>", "Hello there"),
    ],
)
def test_a_header_the_model_ended_is_not_text(
    server: RunningServer, completion: str, answer: str | None
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        response = client.post("/v1/responses", json={"input": "#harmony\n" + completion, "tools": [WEATHER]})
    shown = [c["text"] for i in response.json()["output"] for c in i.get("content") or []]
    assert shown == ([answer] if answer else []), response.json()
