"""Issue 44, point 9: consecutive calls in one turn are parallel calls, kept; anything else after a call is not.

gpt-oss may write a second call right after a first one closed by ``<|end|>`` (vLLM's
``tests/entrypoints/openai/parser/test_harmony_parser.py`` ``test_multi_tool_interleaved``, SMG's gpt-oss
parallel tool calls): both are the model's calls, each its own item with its own ``call_id``, in order.
What follows a call and is not a call (an imagined tool reply, an answer built on it) still ends the
response at the calls. Replayed through real servers (the echo's ``#harmony`` raw mode, and the fake
TensorRT-LLM, which keeps its stop tokens to itself as TensorRT-LLM does) with the openai and anthropic
SDKs, streamed and not: Responses, Chat Completions ``tool_calls`` and Messages ``tool_use`` agree.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from support.chat_grammar import check_chat_stream, parse_chat_sse
from support.harmony_servers import server_for
from support.lazy import lazy_import
from support.messages_grammar import check_messages_stream, parse_messages_sse
from support.reader_corpus import WEATHER
from support.server_harness import RunningServer, stream_events
from support.stream_grammar import check_stream

anthropic = lazy_import("anthropic")  # support/lazy.py: not at collection

ENGINES = ["echo", "trtllm"]
ANALYSIS = "<|channel|>analysis<|message|>Two cities: call get_weather for each.<|end|>"


def call(city: str) -> str:
    """A call to get_weather for ``city``, not yet closed."""
    return f'<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{{"city":"{city}"}}'


#: The first call closed by <|end|>, the second by <|call|> (where generation stops).
TWO_CALLS = ANALYSIS + call("Paris") + "<|end|>" + call("Rome") + "<|call|>"
#: Three, the second written recipient first (how Harmony renders a call in history).
THREE_CALLS = (
    ANALYSIS
    + call("Paris")
    + "<|end|>"
    + '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Rome"}<|end|>'
    + call("Oslo")
    + "<|call|>"
)
FINAL_AFTER = "<|start|>assistant<|channel|>final<|message|>Paris is sunny and Rome is rainy.<|return|>"
REPLY_AFTER = (
    '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny": true}<|end|>'
)


def _calls(output: list[Any]) -> list[tuple[str, str]]:
    return [(i.name, i.arguments) for i in output if i.type == "function_call"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("completion", "cities"),
    [
        (TWO_CALLS, ["Paris", "Rome"]),
        (THREE_CALLS, ["Paris", "Rome", "Oslo"]),
        # Anything after the calls that is not a call (an answer, an imagined reply) ends the response there.
        (ANALYSIS + call("Paris") + "<|end|>" + call("Rome") + "<|end|>" + FINAL_AFTER, ["Paris", "Rome"]),
        (ANALYSIS + call("Paris") + "<|end|>" + REPLY_AFTER + call("Rome") + "<|call|>", ["Paris"]),
        (ANALYSIS + call("Paris") + "<|end|>" + FINAL_AFTER, ["Paris"]),
    ],
    ids=["two", "three", "then-an-answer", "after-an-imagined-reply", "one-then-an-answer"],
)
def test_consecutive_calls_are_each_an_item_in_order(
    request: pytest.FixtureRequest, engine: str, completion: str, cities: list[str]
) -> None:
    running = server_for(request, engine)
    body: dict[str, Any] = {"model": "gpt-oss", "input": "#harmony\n" + completion, "tools": [WEATHER]}
    wanted = [("get_weather", f'{{"city":"{city}"}}') for city in cities]
    with openai.OpenAI(base_url=running.base_url + "/v1", api_key="unused", max_retries=0) as client:
        plain = client.responses.create(**body)
        events = list(client.responses.create(**body, stream=True))
    streamed = events[-1].response  # type: ignore[union-attr]
    for response in (plain, streamed):
        assert response.status == "completed"
        assert [i.type for i in response.output] == ["reasoning"] + ["function_call"] * len(cities)
        assert _calls(response.output) == wanted
        call_ids = [i.call_id for i in response.output if i.type == "function_call"]
        assert len(set(call_ids)) == len(cities) and all(c.startswith("call_") for c in call_ids)
        assert "sunny" not in str(response.output)
    # Streamed: each call added and done at its own output_index, its arguments streamed to it.
    added = [e for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    done = [e.arguments for e in events if e.type == "response.function_call_arguments.done"]
    assert [e.output_index for e in added] == list(range(1, len(cities) + 1))
    assert done == [arguments for _, arguments in wanted]
    with httpx.Client(base_url=running.base_url, timeout=60) as http:
        check_stream(stream_events(http, body))


@pytest.mark.parametrize("engine", ENGINES)
def test_chat_completions_and_messages_carry_every_call(request: pytest.FixtureRequest, engine: str) -> None:
    running = server_for(request, engine)
    wanted = [("get_weather", '{"city":"Paris"}'), ("get_weather", '{"city":"Rome"}')]
    chat_body: dict[str, Any] = {
        "model": "gpt-oss",
        "messages": [{"role": "user", "content": "#harmony\n" + TWO_CALLS}],
        "tools": [{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}],
    }
    with openai.OpenAI(base_url=running.base_url + "/v1", api_key="unused", max_retries=0) as client:
        choice = client.chat.completions.create(**chat_body).choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.function.name, c.function.arguments) for c in calls] == wanted  # type: ignore[union-attr]
    assert len({c.id for c in calls}) == 2
    with httpx.Client(base_url=running.base_url, timeout=60) as http:
        with http.stream("POST", "/v1/chat/completions", json={**chat_body, "stream": True}) as chat:
            said = check_chat_stream(parse_chat_sse(chat.iter_lines()))["choices"][0]
        assert [c["name"] for c in said["tool_calls"]] == ["get_weather", "get_weather"]
        assert said["finish_reason"] == "tool_calls"

        messages_body: dict[str, Any] = {
            "model": "gpt-oss",
            "max_tokens": 1000,
            "messages": [{"role": "user", "content": "#harmony\n" + TWO_CALLS}],
            "tools": [{"name": "get_weather", "input_schema": WEATHER["parameters"]}],
        }
        with http.stream("POST", "/v1/messages", json={**messages_body, "stream": True}) as reply:
            message = check_messages_stream(parse_messages_sse(reply.iter_lines()))["message"]
    assert message["stop_reason"] == "tool_use"
    uses = [b for b in message["content"] if b["type"] == "tool_use"]
    assert [b["input"] for b in uses] == [{"city": "Paris"}, {"city": "Rome"}]
    with anthropic.Anthropic(base_url=running.base_url, api_key="unused", max_retries=0) as claude:
        plain = claude.messages.create(**messages_body)
    assert plain.stop_reason == "tool_use"
    assert [b.input for b in plain.content if b.type == "tool_use"] == [{"city": "Paris"}, {"city": "Rome"}]
    assert len({b.id for b in plain.content if b.type == "tool_use"}) == 2


def test_parallel_tool_calls_false_keeps_the_first(server: RunningServer) -> None:
    """A request that asked for one call at a time gets the first (the rest is dropped, as before)."""
    body: dict[str, Any] = {
        "input": "#harmony\n" + TWO_CALLS,
        "tools": [WEATHER],
        "parallel_tool_calls": False,
    }
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        for response in (
            check_stream(stream_events(http, body)),
            http.post("/v1/responses", json=body).json(),
        ):
            assert response["status"] == "completed"
            assert [i["arguments"] for i in response["output"] if i["type"] == "function_call"] == [
                '{"city":"Paris"}'
            ]


def test_both_calls_answered_go_on(server: RunningServer) -> None:
    """The next turn sends both calls' outputs back (``previous_response_id``): the model reads them."""
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
        first = client.responses.create(model="gpt-oss", input="#harmony\n" + TWO_CALLS, tools=[WEATHER])  # type: ignore[arg-type]
        outputs = [
            {"type": "function_call_output", "call_id": i.call_id, "output": f"sunny {n}"}  # type: ignore[union-attr]
            for n, i in enumerate(o for o in first.output if o.type == "function_call")
        ]
        assert len(outputs) == 2
        second = client.responses.create(
            model="gpt-oss",
            previous_response_id=first.id,
            input=outputs,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
        )
    assert second.status == "completed" and "sunny" in second.output_text
