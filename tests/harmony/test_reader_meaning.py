"""Issue 31, "what gpt-oss writes, second pass": the silent failures, one test per point of its "Why".

Each shape (``reader_corpus.ISSUE_31``, public sources cited there) goes through a real server on loopback,
on the echo executor's ``#harmony`` raw mode and on the fake TensorRT-LLM (which keeps stop tokens to
itself, as TensorRT-LLM does), streamed and not, and through Chat Completions, streamed and not: the
items are what the model meant, every stream passes the event grammar, and the transports agree (the
chat ``content`` is the answer's text, its ``reasoning_content`` the reasoning, its ``tool_calls`` the
calls). Budget cuts (point 5) are crossed at every ``max_output_tokens`` up to 11 and inside a
multi-byte character.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from support.chat_grammar import check_chat_stream, parse_chat_sse
from support.harmony_servers import server_for
from support.reader_corpus import ISSUE_31, Case, matches, summarize
from support.server_harness import RunningServer, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding

CASES = [(point, case) for point, cases in ISSUE_31.items() for case in cases]
ENGINES = ["echo", "trtllm"]


def _responses_body(case: Case) -> dict[str, Any]:
    body: dict[str, Any] = {"input": "#harmony\n" + case.completion, "tools": case.tools}
    if case.max_output_tokens is not None:
        body["max_output_tokens"] = case.max_output_tokens
    return body


def _chat_body(case: Case) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-oss",
        "messages": [{"role": "user", "content": "#harmony\n" + case.completion}],
    }
    if case.tools:
        body["tools"] = [
            {"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in case.tools
        ]
    if case.max_output_tokens is not None:
        body["max_completion_tokens"] = case.max_output_tokens
    return body


def _check(case: Case, response: dict[str, Any]) -> None:
    got = [summarize(item) for item in response["output"]]
    assert response["status"] == case.status, (case.name, response.get("error"), got)
    assert len(got) == len(case.items) and all(
        matches(want, have) for want, have in zip(case.items, got, strict=True)
    ), f"{case.name} ({case.source}): {got}"
    if case.status == "failed":
        assert response["error"]["code"] == "server_error"
        assert "could not be read as Harmony" in response["error"]["message"]


def _said(response: dict[str, Any]) -> dict[str, Any]:
    """What a chat completion of this response says: the answer, the reasoning, the calls, the finish."""
    output = response["output"]
    calls = [i["name"] for i in output if i["type"] == "function_call"]
    return {
        "content": "".join(i["content"][0]["text"] for i in output if i["type"] == "message"),
        "reasoning": "".join(c["text"] for i in output if i["type"] == "reasoning" for c in i["content"]),
        "tool_calls": calls,
        "finish_reason": {"completed": "tool_calls" if calls else "stop", "incomplete": "length"}.get(
            response["status"]
        ),
    }


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("point", "case"), CASES, ids=[f"{p[0]}-{c.name}" for p, c in CASES])
def test_each_point_reads_as_the_model_meant(
    request: pytest.FixtureRequest, engine: str, point: str, case: Case
) -> None:
    running = server_for(request, engine)
    with httpx.Client(base_url=running.base_url, timeout=60) as client:
        streamed = check_stream(stream_events(client, _responses_body(case)))
        plain = client.post("/v1/responses", json=_responses_body(case))
        assert plain.status_code == 200, plain.text
        _check(case, streamed)
        _check(case, plain.json())
        assert [summarize(i) for i in streamed["output"]] == [summarize(i) for i in plain.json()["output"]]

        # Chat Completions: the answer is its content, the reasoning its reasoning_content, streamed and not.
        said = _said(streamed)
        with client.stream("POST", "/v1/chat/completions", json={**_chat_body(case), "stream": True}) as chat:
            assert chat.status_code == 200
            choice_streamed = check_chat_stream(parse_chat_sse(chat.iter_lines()))
        answer = client.post("/v1/chat/completions", json=_chat_body(case))
        if case.status == "failed":
            assert choice_streamed["error"] is not None and answer.status_code >= 500
            return
        assert answer.status_code == 200, answer.text
        message = answer.json()["choices"][0]["message"]
        streamed_choice = choice_streamed["choices"][0]
        # Streamed content ends as not streamed (null for a tool-call-only answer).
        assert message["content"] == streamed_choice["content"]
        assert (message["content"] or "") == said["content"]
        assert (message["reasoning_content"] or "") == streamed_choice["reasoning"] == said["reasoning"]
        assert [c["function"]["name"] for c in message.get("tool_calls") or []] == said["tool_calls"]
        assert [c["name"] for c in streamed_choice["tool_calls"]] == said["tool_calls"]
        assert answer.json()["choices"][0]["finish_reason"] == streamed_choice["finish_reason"]
        assert streamed_choice["finish_reason"] == said["finish_reason"]


CLEAN = (
    "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Hello there.<|return|>"
)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_budget_cut_is_incomplete_never_failed(request: pytest.FixtureRequest, engine: str) -> None:
    """Point 5: out of tokens anywhere (inside the first header included), the response is ``incomplete``
    (``max_output_tokens``), streamed and not, and Chat Completions ends ``length``: clients do not retry."""
    running = server_for(request, engine)
    with httpx.Client(base_url=running.base_url, timeout=60) as client:
        for budget in range(1, 12):
            body = {"input": "#harmony\n" + CLEAN, "max_output_tokens": budget}
            streamed = check_stream(stream_events(client, body))
            plain = client.post("/v1/responses", json=body).json()
            for response in (streamed, plain):
                assert response["status"] == "incomplete", (budget, response.get("error"))
                assert response["incomplete_details"]["reason"] == "max_output_tokens"
            chat = client.post(
                "/v1/chat/completions",
                json={
                    "model": "gpt-oss",
                    "messages": [{"role": "user", "content": "#harmony\n" + CLEAN}],
                    "max_completion_tokens": budget,
                },
            )
            assert chat.status_code == 200 and chat.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_cut_inside_a_character_leaves_no_replacement_character(
    request: pytest.FixtureRequest, engine: str, encoding: HarmonyEncoding
) -> None:
    """Point 6: a budget cut inside a multi-byte character cuts the text at the character before it."""
    text = "Voilà 𝓸𝓵𝓵𝓪𝓶𝓪 ∑"
    completion = f"<|channel|>final<|message|>{text}<|return|>"
    tokens = encoding.encode(completion)
    head = len(encoding.encode("<|channel|>final<|message|>"))
    # Budgets that end inside a character: the bytes so far do not decode.
    inside = [
        n
        for n in range(head + 1, len(tokens))
        if not _decodes(b"".join(encoding.token_bytes[t] for t in tokens[head:n]))
    ]
    assert inside, "the text must split a character across tokens"
    running = server_for(request, engine)
    with httpx.Client(base_url=running.base_url, timeout=60) as client:
        for budget in inside:
            body = {"input": "#harmony\n" + completion, "max_output_tokens": budget}
            for response in (
                check_stream(stream_events(client, body)),
                client.post("/v1/responses", json=body).json(),
            ):
                assert response["status"] == "incomplete"
                shown = response["output"][0]["content"][0]["text"]
                assert "\ufffd" not in shown and text.startswith(shown), (budget, shown)


def _decodes(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_what_follows_a_call_is_dropped_and_logged(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Point 4: the response ends at the model's call; the log says the rest was dropped."""
    case = next(c for c in ISSUE_31["4 no answer built on an invented result"])
    with caplog.at_level("INFO", logger="trtllm_responses.stream.tokens"):
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            response = client.post("/v1/responses", json=_responses_body(case)).json()
    assert [item["type"] for item in response["output"]] == ["function_call"]
    assert "It is 20" not in str(response)
    assert any("went on after its call" in r.getMessage() for r in caplog.records)
