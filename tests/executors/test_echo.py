"""The echo executor's contract, rule by rule, plus max_tokens, stop tokens and abort."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import GenerationRequest, SamplingSettings, TokenDelta
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony import HarmonyEncoding, parse_completion
from trtllm_responses.request.protocol import parse_request


@pytest.fixture
def echo(encoding: HarmonyEncoding) -> EchoExecutor:
    return EchoExecutor(encoding)


def prompt_for(adapter: HarmonyAdapter, body: dict[str, Any]) -> list[int]:
    return adapter.build_prompt(parse_request(body)).token_ids


def run(
    echo: EchoExecutor, prompt: list[int], max_tokens: int = 10_000, stops: tuple[int, ...] = (200002, 200012)
) -> list[TokenDelta]:
    async def collect() -> list[TokenDelta]:
        request = GenerationRequest(
            "r1", prompt, SamplingSettings(max_tokens=max_tokens, stop_token_ids=stops)
        )
        return [d async for d in echo.generate(request)]

    return asyncio.run(collect())


def messages(encoding: HarmonyEncoding, deltas: list[TokenDelta]) -> list[tuple[str | None, str | None, str]]:
    tokens = [t for d in deltas for t in d.token_ids]
    return [(m.header.channel, m.header.recipient, m.text) for m in parse_completion(encoding, tokens)]


def test_plain_user_text_is_echoed(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    deltas = run(echo, prompt_for(adapter, {"input": "Hello <|start|> world"}))
    assert messages(encoding, deltas) == [
        ("analysis", None, "Echoing the user."),
        ("final", None, "Hello <|start|> world"),
    ]
    assert all(len(d.token_ids) == 1 for d in deltas), "one token per step"
    assert deltas[-1].finish_reason == "stop" and deltas[-1].token_ids == (encoding.return_,)
    assert all(d.finish_reason is None for d in deltas[:-1])


def test_harmony_is_emitted_verbatim(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    text = "<|channel|>commentary<|message|>Pre.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    deltas = run(echo, prompt_for(adapter, {"input": "#harmony\n" + text}))
    assert [t for d in deltas for t in d.token_ids] == encoding.encode(text)


def test_prompt_shows_the_decoded_prompt(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    prompt = prompt_for(adapter, {"input": "#prompt", "instructions": "Be nice."})
    assert messages(encoding, run(echo, prompt)) == [
        ("analysis", None, "Showing the prompt."),
        ("final", None, encoding.decode(prompt)),
    ]


def test_lorem_writes_exactly_n_tokens(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    tokens = [t for d in run(echo, prompt_for(adapter, {"input": "#lorem 123"})) for t in d.token_ids]
    start = tokens.index(encoding.message, tokens.index(encoding.start)) + 1
    assert len(tokens[start:-1]) == 123 and tokens[-1] == encoding.return_
    assert messages(encoding, [TokenDelta(tokens)])[0] == ("analysis", None, "Writing 123 tokens.")


def test_call_name_json(echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    deltas = run(echo, prompt_for(adapter, {"input": 'call lookup {"q": "x y"}'}))
    assert messages(encoding, deltas) == [
        ("analysis", None, "Calling lookup."),
        ("commentary", "functions.lookup", '{"q": "x y"}'),
    ]
    assert deltas[-1].finish_reason == "stop" and deltas[-1].token_ids == (encoding.call,)


PARAMS = {
    "type": "object",
    "properties": {
        "s": {"type": "string"},
        "n": {"type": "number"},
        "i": {"type": "integer"},
        "b": {"type": "boolean"},
        "a": {"type": "array", "items": {"type": "string"}},
        "ao": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "o": {"type": "object", "properties": {"x": {"type": "string"}}},
        "e": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "optional": {"type": "string"},
    },
    "required": ["s", "n", "i", "b", "a", "ao", "o", "e"],
}


def test_declared_function_is_called_with_built_arguments(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    tools = [
        {"type": "function", "name": "first", "parameters": PARAMS},
        {"type": "function", "name": "second"},
    ]
    [analysis, call] = messages(
        encoding, run(echo, prompt_for(adapter, {"input": "Paris, « FR »", "tools": tools}))
    )
    assert analysis == ("analysis", None, "Calling first.")
    assert call[1] == "functions.first"
    assert json.loads(call[2]) == {
        "s": "Paris, « FR »",
        "n": 1,
        "i": 1,
        "b": True,
        "a": [],
        "ao": [],
        "o": {},
        "e": "celsius",
    }


def test_tool_choice_names_the_function_called(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    tools = [
        {"type": "function", "name": "first", "parameters": PARAMS},
        {"type": "function", "name": "second"},
    ]
    body = {"input": "x", "tools": tools, "tool_choice": {"type": "function", "name": "second"}}
    assert messages(encoding, run(echo, prompt_for(adapter, body)))[1] == (
        "commentary",
        "functions.second",
        "{}",
    )


def test_tool_output_is_reported(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    body = {
        "input": [
            {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "sunny"},
        ]
    }
    assert messages(encoding, run(echo, prompt_for(adapter, body))) == [
        ("analysis", None, "Got get_weather output."),
        ("final", None, "get_weather returned: sunny"),
    ]


def test_max_tokens_ends_with_length(echo: EchoExecutor, adapter: HarmonyAdapter) -> None:
    deltas = run(echo, prompt_for(adapter, {"input": "#lorem 50"}), max_tokens=7)
    assert sum(len(d.token_ids) for d in deltas) == 7
    assert deltas[-1].finish_reason == "length"


def test_running_out_without_a_stop_token_ends_with_length(
    echo: EchoExecutor, adapter: HarmonyAdapter
) -> None:
    deltas = run(echo, prompt_for(adapter, {"input": "#harmony\n<|channel|>final<|message|>no stop"}))
    assert deltas[-1].finish_reason == "length" and deltas[-1].token_ids == ()


def test_stops_at_the_first_stop_token(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    text = "#harmony\n<|channel|>final<|message|>a<|return|><|start|>assistant<|channel|>final<|message|>b<|return|>"
    deltas = run(echo, prompt_for(adapter, {"input": text}))
    assert deltas[-1].finish_reason == "stop" and messages(encoding, deltas) == [("final", None, "a")]


def test_abort_cancels_a_running_generation(echo: EchoExecutor, adapter: HarmonyAdapter) -> None:
    async def scenario() -> list[TokenDelta]:
        request = GenerationRequest(
            "r9", prompt_for(adapter, {"input": "#lorem 1000"}), SamplingSettings(10_000, (200002,))
        )
        out = []
        async for delta in echo.generate(request):
            out.append(delta)
            if len(out) == 5:
                echo.abort("r9")
        return out

    deltas = asyncio.run(scenario())
    assert len(deltas) == 6 and deltas[-1].finish_reason == "cancelled"
    echo.abort("unknown-id")  # aborting what is not running is a no-op
    assert not echo._aborted


def test_cost_depends_on_the_last_message_not_the_history(
    echo: EchoExecutor, encoding: HarmonyEncoding
) -> None:
    # A prompt whose history is huge but whose last message is short is planned without decoding the history.
    decoded: list[int] = []
    original = encoding.decode

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(encoding, name)

        def decode(self, tokens: Any) -> str:
            decoded.append(len(tokens))
            return original(tokens)

    spy_echo = EchoExecutor(Spy())  # type: ignore[arg-type]
    history = encoding.encode("<|start|>user<|message|>" + "word " * 20000 + "<|end|>")
    prompt = (
        encoding.encode("<|start|>system<|message|>sys<|end|>")
        + history
        + encoding.encode("<|start|>user<|message|>hi<|end|><|start|>assistant")
    )
    spy_echo.plan(prompt)
    assert max(decoded) < 50


def test_lorem_is_built_no_further_than_max_tokens(echo: EchoExecutor, adapter: HarmonyAdapter) -> None:
    prompt = prompt_for(adapter, {"input": "#lorem 30000000"})
    assert len(echo.plan(prompt, max_tokens=5)) < 50  # O(max_tokens), not 30 million tokens
    deltas = run(echo, prompt, max_tokens=5)
    assert len(deltas) == 5 and deltas[-1].finish_reason == "length"


def test_echoed_text_reuses_the_prompt_tokens(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    text = "=" * 100_000 + " 中文"
    deltas = run(echo, prompt_for(adapter, {"input": text}), max_tokens=200_000)
    assert messages(encoding, deltas)[-1] == ("final", None, text)


def test_system_reminders_before_the_user_words_are_not_read(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """Claude Code puts ``<system-reminder>`` blocks before the user's words: the rules read the rest."""
    reminder = "<system-reminder>\nEnd commits with a trailer.\n</system-reminder>\n\n"
    assert messages(encoding, run(echo, prompt_for(adapter, {"input": reminder + "#lorem 3"}))) == [
        ("analysis", None, "Writing 3 tokens."),
        ("final", None, " lorem ipsum dolor"),
    ]
    assert messages(encoding, run(echo, prompt_for(adapter, {"input": reminder + "Hello there"})))[-1] == (
        "final",
        None,
        "Hello there",
    )


def test_steps_script_a_client_function_tool_loop(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """After a ``functions.NAME`` output, a ``#steps`` user message (reminders before it or not) gives its next step."""
    script = '<system-reminder>x</system-reminder>\n#steps\ncall read {"path": "a"}\n---\ncall edit {"path": "a"}\n---\nDone.'
    tool = {"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}}
    first = {"input": script, "tools": [tool]}
    assert messages(encoding, run(echo, prompt_for(adapter, first)))[-1] == (
        "commentary",
        "functions.read",
        '{"path": "a"}',
    )
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"path": "a"}'}
    output = {"type": "function_call_output", "call_id": "c1", "output": "text of a"}
    second = {"input": [{"role": "user", "content": script}, call, output], "tools": [tool]}
    assert messages(encoding, run(echo, prompt_for(adapter, second)))[-1] == (
        "commentary",
        "functions.edit",
        '{"path": "a"}',
    )
    call2 = {"type": "function_call", "call_id": "c2", "name": "edit", "arguments": '{"path": "a"}'}
    output2 = {"type": "function_call_output", "call_id": "c2", "output": "ok"}
    third = {"input": [{"role": "user", "content": script}, call, output, call2, output2], "tools": [tool]}
    assert messages(encoding, run(echo, prompt_for(adapter, third))) == [
        ("analysis", None, "Answering."),
        ("final", None, "Done."),
    ]


def test_unclosed_reminders_cost_one_pass(
    echo: EchoExecutor, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """Text that opens ``<system-reminder>`` and never closes it is read as it is, in linear time."""
    import time

    text = "<system-reminder>" * 1_000 + " tail"
    start = time.perf_counter()
    said = messages(encoding, run(echo, prompt_for(adapter, {"input": text})))
    assert said[-1] == ("final", None, text) and time.perf_counter() - start < 5


def test_a_schema_asking_for_1e8_items_is_answered_at_once(http: Any) -> None:
    # Before: minItems 1e8 hung the echo server two minutes building its answer.
    schema = {"type": "object", "properties": {"x": {"type": "array", "minItems": 1e8}}, "required": ["x"]}
    body = {
        "model": "gpt-oss-120b",
        "input": "Hello",
        "max_output_tokens": 300,
        "text": {"format": {"type": "json_schema", "name": "big", "schema": schema, "strict": False}},
    }
    started = time.perf_counter()
    answer = http.post("/v1/responses", json=body)
    assert time.perf_counter() - started < 5.0
    assert answer.status_code == 200, answer.text
    response = answer.json()
    assert response["status"] == "incomplete", response["status"]
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][-1]["content"][0]["text"].startswith('{"x":["Hello","Hello",')
