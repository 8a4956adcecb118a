"""``POST /v1/chat/completions`` through the official ``openai`` SDK (strict response validation) on loopback.

The echo executor's rules (docs/echo-executor.md#the-echo-executor) drive "the model": ``#lorem N``, ``call
NAME {json}``, the
first declared function when tools are given, JSON under a response format, ``#prompt``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletion
from pydantic import BaseModel
from support.chat_grammar import check_chat_stream, parse_chat_sse
from support.server_harness import RecordingEcho, ServerFactory

from trtllm_responses.adapter.adapter import VERBOSITY
from trtllm_responses.executors.base import ExecutorError, GenerationRequest, TokenDelta
from trtllm_responses.executors.echo import EchoExecutor

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
    },
}


@pytest.fixture(scope="module")
def server_options(encoding) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {"executor": RecordingEcho(encoding)}


@pytest.fixture
def client(server) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    with openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0, _strict_response_validation=True
    ) as c:
        yield c


@pytest.fixture
def raw(server) -> httpx.Client:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=server.base_url, timeout=30) as c:
        yield c


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def stream_chat(raw: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """POST a streaming chat request; check its grammar; return what it said."""
    with raw.stream(
        "POST", "/v1/chat/completions", json={"model": "gpt-oss", **body, "stream": True}
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return check_chat_stream(parse_chat_sse(response.iter_lines()))


# -- plain answers ----------------------------------------------------------------------------------


def test_create_answers_with_reasoning_and_usage(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="gpt-oss-120b", messages=user("Hello there"))
    choice = completion.choices[0]
    assert choice.message.content == "Hello there" and choice.finish_reason == "stop"
    extra = choice.message.model_extra or {}
    assert extra["reasoning_content"] == extra["reasoning"] == "Echoing the user."
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    assert completion.model == "gpt-oss-test"
    usage = completion.usage
    assert usage is not None and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    # The same counts as the Responses API gives for the same conversation.
    same = client.responses.create(model="m", input="Hello there").usage
    assert same is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (same.input_tokens, same.output_tokens)
    assert usage.completion_tokens_details is not None and usage.prompt_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == same.output_tokens_details.reasoning_tokens > 0
    assert usage.prompt_tokens_details.cached_tokens == same.input_tokens_details.cached_tokens == 0
    # cache_write_tokens as Responses counts them (the prompt tokens the engine computed).
    assert usage.prompt_tokens_details.cache_write_tokens == same.input_tokens_details.cache_write_tokens > 0


def test_stream_chunks_follow_the_sdk_types(client: openai.OpenAI, raw: httpx.Client) -> None:
    said = stream_chat(raw, {"messages": user("Streamed!"), "stream_options": {"include_usage": True}})
    (choice,) = said["choices"]
    assert choice["content"] == "Streamed!" and choice["reasoning"] == "Echoing the user."
    assert choice["finish_reason"] == "stop"
    assert (
        said["usage"]["completion_tokens"] > 0
        and said["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    )
    # Without include_usage there is no usage chunk; the SDK's own iterator reads the same stream.
    chunks = list(client.chat.completions.create(model="m", messages=user("Streamed!"), stream=True))
    assert all(c.usage is None for c in chunks) and chunks[-1].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Streamed!"


def test_stream_helper_final_completion(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(model="m", messages=user("#lorem 20")) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta" and e.delta]
        final = stream.get_final_completion()
    assert len(deltas) == 20 and final.choices[0].message.content == "".join(deltas)
    assert final.choices[0].finish_reason == "stop"


async def test_async_client_streams(server) -> None:  # type: ignore[no-untyped-def]
    async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0) as client:
        stream = await client.chat.completions.create(model="m", messages=user("#lorem 5"), stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert len(text.split()) == 5


def test_system_and_developer_messages_join_the_instructions(client: openai.OpenAI) -> None:
    messages = [
        {"role": "system", "content": "Be terse."},
        {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": [{"type": "text", "text": "#prompt"}]},
    ]
    prompt = client.chat.completions.create(model="m", messages=messages).choices[0].message.content or ""
    assert "# Instructions\n\nBe terse." in prompt and "Answer in French." in prompt
    assert prompt.count("<|start|>system") == 1


def test_reasoning_effort(client: openai.OpenAI) -> None:
    prompt = client.chat.completions.create(model="m", messages=user("#prompt"), reasoning_effort="high")
    assert "Reasoning: high" in (prompt.choices[0].message.content or "")


# -- parity with /v1/responses (the shared fields: request/shared_fields.py) ---------------------------


def test_shared_fields_mean_what_they_mean_on_responses(client: openai.OpenAI, server) -> None:  # type: ignore[no-untyped-def]
    # reasoning_effort "max" is gpt-oss's high, as on /v1/responses.
    prompt = client.chat.completions.create(model="m", messages=user("#prompt"), reasoning_effort="max")
    assert "Reasoning: high" in (prompt.choices[0].message.content or "")
    # verbosity is text.verbosity: the same sentence in the instructions.
    for verbosity in ("low", "high"):
        chat = client.chat.completions.create(model="m", messages=user("#prompt"), verbosity=verbosity)  # type: ignore[arg-type]
        responses = client.responses.create(model="m", input="#prompt", text={"verbosity": verbosity})
        assert VERBOSITY[verbosity] in (chat.choices[0].message.content or "")
        assert VERBOSITY[verbosity] in responses.output_text
    # service_tier: the tier served (echoed) and the engine's priority, as on /v1/responses.
    for tier, served, priority in (
        ("flex", "flex", 0.25),
        ("fast", "priority", 0.75),
        (None, "default", None),
    ):
        asked: dict[str, Any] = {"service_tier": tier} if tier else {}
        chat = client.chat.completions.create(model="m", messages=user("x"), **asked)
        assert chat.service_tier == served and server.executor.requests[-1].priority == priority
        assert client.responses.create(model="m", input="x", **asked).service_tier == served
    # prompt_cache_retention "24h": the prompt's KV blocks kept a day, as on /v1/responses.
    client.chat.completions.create(model="m", messages=user("x"), prompt_cache_retention="24h")
    assert server.executor.requests[-1].cache_retention_seconds == 24 * 3600
    client.chat.completions.create(model="m", messages=user("x"), prompt_cache_retention="in_memory")
    assert server.executor.requests[-1].cache_retention_seconds is None


def test_chunks_carry_service_tier_usage_null_and_obfuscation(
    client: openai.OpenAI, raw: httpx.Client
) -> None:
    body = {
        "model": "m",
        "messages": user("#lorem 6"),
        "stream": True,
        "service_tier": "priority",
        "stream_options": {"include_usage": True, "include_obfuscation": True},
    }
    with raw.stream("POST", "/v1/chat/completions", json=body) as response:
        frames = [line for line in response.iter_lines() if line]
    payloads = parse_chat_sse(frames)
    said = check_chat_stream(payloads)
    assert len(said["choices"][0]["content"].split()) == 6 and said["usage"]["completion_tokens"] > 0
    chunks = payloads[:-1]
    assert all(c["service_tier"] == "priority" for c in chunks)
    assert all(c["usage"] is None for c in chunks[:-1]) and chunks[-1]["usage"] is not None
    # Every chunk is padded: an obfuscation field of letters and digits makes each frame a multiple of 16 bytes.
    assert all(c["obfuscation"] and c["obfuscation"].isalnum() for c in chunks)
    assert all(len(f.encode()) % 16 == 14 for f in frames[:-1])  # + "\n\n" on the wire: a multiple of 16
    assert len({c["obfuscation"] for c in chunks}) > 1
    # Not asked for: no obfuscation; without include_usage no usage field; the SDK reads both.
    plain = list(client.chat.completions.create(model="m", messages=user("#lorem 3"), stream=True))
    assert all(c.obfuscation is None and "usage" not in c.model_fields_set for c in plain)
    assert all(c.service_tier == "default" for c in plain)
    usage = list(
        client.chat.completions.create(
            model="m", messages=user("#lorem 3"), stream=True, stream_options={"include_usage": True}
        )
    )
    assert [c.usage is None for c in usage] == [True] * (len(usage) - 1) + [False]


def test_streamed_content_ends_as_not_streamed(client: openai.OpenAI) -> None:
    """A tool-call-only answer: content null streamed as not; an answer cut in its reasoning: content ""."""
    for asked in ({"messages": user("Paris"), "tools": [WEATHER]}, {"messages": user("Hi"), "max_tokens": 2}):
        whole = client.chat.completions.create(model="m", **asked).choices[0].message  # type: ignore[call-overload]
        with client.chat.completions.stream(model="m", **asked) as stream:  # type: ignore[arg-type]
            for _ in stream:
                pass
            streamed = stream.current_completion_snapshot.choices[0].message  # what the SDK accumulated
        assert streamed.content == whole.content
        assert whole.content == (None if "tools" in asked else "")


# -- tools ---------------------------------------------------------------------------------------------


def test_tool_call_and_its_result(client: openai.OpenAI) -> None:
    first = client.chat.completions.create(model="m", messages=user("Paris"), tools=[WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"} and call.id.startswith("call_")
    history = [
        *user("Paris"),
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I should check the weather.",
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    second = client.chat.completions.create(model="m", messages=history, tools=[WEATHER])
    assert second.choices[0].message.content == "get_weather returned: sunny"
    assert second.choices[0].finish_reason == "stop"
    # The reasoning sent back (vLLM's and trtllm-serve's field too) is in the prompt, as analysis.
    for field in ("reasoning_content", "reasoning"):
        turn = [*history[:1], {**history[1], field: "Checking the weather."}]
        turn[1].pop("reasoning_content" if field == "reasoning" else "reasoning", None)
        turn += [history[2], {"role": "user", "content": "#prompt"}]
        prompt = (
            client.chat.completions.create(model="m", messages=turn, tools=[WEATHER])
            .choices[0]
            .message.content
        )
        assert "<|channel|>analysis<|message|>Checking the weather.<|end|>" in (prompt or "")


def test_tool_call_streams_name_first_then_arguments(raw: httpx.Client) -> None:
    said = stream_chat(raw, {"messages": user("Lyon"), "tools": [WEATHER]})
    (choice,) = said["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["reasoning"] == "Calling get_weather."
    (call,) = choice["tool_calls"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Lyon"}


def test_tool_choice(client: openai.OpenAI) -> None:
    tools = [WEATHER, TIME]
    none = client.chat.completions.create(model="m", messages=user("Paris"), tools=tools, tool_choice="none")
    assert none.choices[0].message.content == "Paris" and none.choices[0].finish_reason == "stop"
    named = client.chat.completions.create(
        model="m",
        messages=user("UTC"),
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    (call,) = named.choices[0].message.tool_calls or []
    assert call.function.name == "get_time" and json.loads(call.function.arguments) == {"zone": "UTC"}
    required = client.chat.completions.create(
        model="m", messages=user("Rome"), tools=tools, tool_choice="required", parallel_tool_calls=False
    )
    assert required.choices[0].finish_reason == "tool_calls"
    allowed = client.chat.completions.create(
        model="m",
        messages=user("CET"),
        tools=tools,
        tool_choice={
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": "required",
                "tools": [{"type": "function", "function": {"name": "get_time"}}],
            },
        },
    )
    assert (allowed.choices[0].message.tool_calls or [])[0].function.name == "get_time"


def test_named_tool_choice_is_enforced_by_the_constraint(client: openai.OpenAI, server) -> None:  # type: ignore[no-untyped-def]
    client.chat.completions.create(
        model="m",
        messages=user("x"),
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    constraint = server.executor.requests[-1].constraint
    assert constraint is not None and constraint.call_required
    assert [option.recipient for option in constraint.calls] == ["functions.get_time"]


# -- structured outputs ----------------------------------------------------------------------------


class Trip(BaseModel):
    city: str
    days: int


def test_parse_with_a_pydantic_model(client: openai.OpenAI, server) -> None:  # type: ignore[no-untyped-def]
    completion = client.chat.completions.parse(model="m", messages=user("Lyon"), response_format=Trip)
    assert completion.choices[0].message.parsed == Trip(city="Lyon", days=0)
    constraint = server.executor.requests[-1].constraint
    assert (
        constraint is not None
        and constraint.final == "json"
        and constraint.schema["required"] == ["city", "days"]
    )


def test_json_object(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="m", messages=user("Hi"), response_format={"type": "json_object"}
    )
    assert isinstance(json.loads(completion.choices[0].message.content or ""), dict)


def test_strict_schema_error_names_the_chat_field(raw: httpx.Client) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": []}
    body = {
        "model": "m",
        "messages": user("x"),
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "t", "schema": schema, "strict": True},
        },
    }
    error = raw.post("/v1/chat/completions", json=body).json()["error"]
    assert error["param"].startswith("response_format.json_schema.schema"), error


# -- sampling, limits and choices ---------------------------------------------------------------------


def test_max_completion_tokens_and_max_tokens_end_in_length(client: openai.OpenAI, raw: httpx.Client) -> None:
    for limit in ({"max_completion_tokens": 12}, {"max_tokens": 12}):
        completion = client.chat.completions.create(model="m", messages=user("#lorem 50"), **limit)  # type: ignore[arg-type]
        assert completion.choices[0].finish_reason == "length"
        assert completion.usage is not None and completion.usage.completion_tokens == 12
    said = stream_chat(raw, {"messages": user("#lorem 50"), "max_completion_tokens": 12})
    assert said["choices"][0]["finish_reason"] == "length"


def test_sampling_settings_reach_the_executor(client: openai.OpenAI, server) -> None:  # type: ignore[no-untyped-def]
    client.chat.completions.create(
        model="m",
        messages=user("x"),
        temperature=0.3,
        top_p=0.9,
        seed=7,
        frequency_penalty=0.5,
        presence_penalty=-0.25,
    )
    sampling = server.executor.requests[-1].sampling
    assert (sampling.temperature, sampling.top_p, sampling.seed) == (0.3, 0.9, 7)
    assert (sampling.frequency_penalty, sampling.presence_penalty) == (0.5, -0.25)
    client.chat.completions.create(model="m", messages=user("x"))
    unset = server.executor.requests[-1].sampling
    assert (unset.temperature, unset.top_p) == (1.0, 1.0)  # OpenAI's defaults, never greedy by omission
    assert (unset.frequency_penalty, unset.presence_penalty) == (None, None)


def test_stop_strings_cut_the_text_and_stop_the_generation(
    client: openai.OpenAI, raw: httpx.Client, server
) -> None:  # type: ignore[no-untyped-def]
    full = (
        client.chat.completions.create(model="m", messages=user("#lorem 40")).choices[0].message.content or ""
    )
    assert " dolor" in full
    aborted = len(server.executor.aborted)  # the module's server: count this request's aborts only
    aborts_before = aborts_total(raw)
    completion = client.chat.completions.create(model="m", messages=user("#lorem 40"), stop=["xyz", " dolor"])
    assert completion.choices[0].message.content == full[: full.index(" dolor")]
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens < 30  # not all 40 generated
    assert len(server.executor.aborted) > aborted  # the rest was not generated
    assert aborts_total(raw) == aborts_before + 1  # and the metric counts that abort
    said = stream_chat(
        raw, {"messages": user("#lorem 40"), "stop": " dolor", "stream_options": {"include_usage": True}}
    )
    assert said["choices"][0]["content"] == full[: full.index(" dolor")]
    assert said["choices"][0]["finish_reason"] == "stop" and said["usage"]["completion_tokens"] < 30
    # A stop string that never comes leaves the text whole (held-back text is flushed at the end).
    whole = client.chat.completions.create(model="m", messages=user("Hello lor"), stop="lorem")
    assert whole.choices[0].message.content == "Hello lor"


def aborts_total(raw: httpx.Client) -> float:
    """``trtllm_executor_aborts_total`` as ``/metrics`` says it now."""
    (line,) = [
        line
        for line in raw.get("/metrics").text.splitlines()
        if line.startswith("trtllm_executor_aborts_total ")
    ]
    return float(line.split()[1])


def test_n_choices(client: openai.OpenAI, raw: httpx.Client, server) -> None:  # type: ignore[no-untyped-def]
    completion = client.chat.completions.create(model="m", messages=user("#lorem 8"), n=3, seed=10)
    assert [c.index for c in completion.choices] == [0, 1, 2]
    assert len({c.message.content for c in completion.choices}) == 1
    assert sorted(r.sampling.seed for r in server.executor.requests[-3:]) == [10, 11, 12]
    one = client.chat.completions.create(model="m", messages=user("#lorem 8")).usage
    assert completion.usage is not None and one is not None
    assert completion.usage.completion_tokens == 3 * one.completion_tokens
    assert completion.usage.prompt_tokens == one.prompt_tokens  # the prompt counts once
    said = stream_chat(raw, {"messages": user("#lorem 8"), "n": 2, "stream_options": {"include_usage": True}})
    assert [c["finish_reason"] for c in said["choices"]] == ["stop", "stop"]
    assert said["choices"][0]["content"] == said["choices"][1]["content"]
    assert said["usage"]["completion_tokens"] == 2 * one.completion_tokens


def test_logprobs(client: openai.OpenAI, raw: httpx.Client) -> None:
    completion = client.chat.completions.create(
        model="m", messages=user("#lorem 6"), logprobs=True, top_logprobs=3
    )
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None and len(logprobs.content) == 6
    first = logprobs.content[0]
    assert first.logprob == -0.5 and len(first.top_logprobs) == 3 and first.bytes
    assert "".join(t.token for t in logprobs.content) == completion.choices[0].message.content
    said = stream_chat(raw, {"messages": user("#lorem 6"), "logprobs": True, "top_logprobs": 2})
    assert len(said["choices"][0]["logprobs"]) == 6
    assert all(len(t["top_logprobs"]) == 2 for t in said["choices"][0]["logprobs"])
    plain = client.chat.completions.create(model="m", messages=user("#lorem 6"))
    assert plain.choices[0].logprobs is None


# -- errors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"messages": []}, "messages", None),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", None),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages[0].content[0]",
            "unsupported_content_type",
        ),
        (
            {"messages": [*user("x"), {"role": "tool", "tool_call_id": "call_1", "content": "r"}]},
            "messages[1].tool_call_id",
            None,
        ),
        (
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}
                ]
            },
            "messages[0].tool_calls[0].id",
            None,
        ),
        (
            {"messages": user("x"), "tools": [{"type": "function", "function": {"name": "bad name"}}]},
            "tools[0].function.name",
            None,
        ),
        (
            {"messages": user("x"), "tools": [{"type": "custom", "custom": {"name": "f"}}]},
            "tools[0].type",
            None,
        ),
        ({"messages": user("x"), "tool_choice": "sometimes"}, "tool_choice", None),
        ({"messages": user("x"), "max_completion_tokens": 0}, "max_completion_tokens", None),
        # Past a signed 64-bit integer: a 400 as on /v1/responses (it was a 500: orjson cannot write it back).
        ({"messages": user("x"), "seed": 2**64}, "seed", None),
        ({"messages": user("x"), "max_tokens": 2**64}, "max_tokens", None),
        ({"messages": user("x"), "max_completion_tokens": 2**64}, "max_completion_tokens", None),
        ({"messages": user("x"), "service_tier": "turbo"}, "service_tier", "invalid_value"),
        ({"messages": user("x"), "verbosity": "loud"}, "verbosity", None),
        ({"messages": user("x"), "prompt_cache_retention": "1y"}, "prompt_cache_retention", None),
        ({"messages": user("x"), "n": 17}, "n", None),
        ({"messages": user("x"), "stop": ["a", "b", "c", "d", "e"]}, "stop", None),
        ({"messages": user("x"), "stop": ["a", "b" * 257]}, "stop[1]", None),
        ({"messages": user("x"), "top_logprobs": 2}, "top_logprobs", None),
        ({"messages": user("x"), "temperature": 3}, "temperature", None),
        ({"messages": user("x"), "reasoning_effort": "huge"}, "reasoning_effort", None),
        ({"messages": user("x"), "response_format": {"type": "yaml"}}, "response_format.type", None),
        ({"messages": user("x"), "stream_options": {"include_usage": True}}, "stream_options", None),
    ],
)
def test_bad_requests_name_the_chat_field(
    raw: httpx.Client, body: dict[str, Any], param: str, code: str | None
) -> None:
    response = raw.post("/v1/chat/completions", json={"model": "m", **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error", error
    if code is not None:
        assert error["code"] == code


def test_sdk_raises_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=[])
    assert info.value.param == "messages"


def test_not_json_and_wrong_method(raw: httpx.Client) -> None:
    response = raw.post(
        "/v1/chat/completions", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    response = raw.get("/v1/chat/completions")
    assert response.status_code == 405 and response.headers["allow"] == "POST"


def test_body_over_max_input_bytes(serve) -> None:  # type: ignore[no-untyped-def]
    running = serve(max_input_bytes=2000)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            response = raw.post("/v1/chat/completions", json={"model": "m", "messages": user("x" * 5000)})
        error = response.json()["error"]
        assert response.status_code == 400 and error["code"] == "context_length_exceeded"
        assert error["param"] == "messages"  # the chat field (not the Responses field it is translated to)
    finally:
        running.stop()


class FailingEcho(EchoExecutor):
    """The echo executor, failing after 3 tokens when the prompt asks for ``#lorem 99``."""

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        count = 0
        fail = "#lorem 99" in self._enc.decode(request.prompt_token_ids[-30:])
        async for delta in super().generate(request):
            count += 1
            if fail and count > 3:
                raise ExecutorError("the GPU fell over")
            yield delta


def test_failure_after_the_stream_started(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    running = serve(FailingEcho(encoding))
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            said = stream_chat(raw, {"messages": user("#lorem 99")})
            assert said["error"]["type"] == "server_error" and "the GPU fell over" in said["error"]["message"]
            said = stream_chat(raw, {"messages": user("#lorem 99"), "n": 2})  # one error chunk, not two
            assert "the GPU fell over" in said["error"]["message"]
            response = raw.post("/v1/chat/completions", json={"model": "m", "messages": user("#lorem 99")})
            assert response.status_code == 500 and "the GPU fell over" in response.json()["error"]["message"]
        with openai.OpenAI(base_url=running.base_url + "/v1", api_key="x", max_retries=0) as client:
            with pytest.raises(openai.APIError, match="the GPU fell over"):
                for _ in client.chat.completions.create(model="m", messages=user("#lorem 99"), stream=True):
                    pass
    finally:
        running.stop()


def test_client_disconnect_aborts_the_generation(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    executor = RecordingEcho(encoding, tokens_per_second=200)
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            body = {"model": "m", "messages": user("#lorem 5000"), "stream": True}
            with raw.stream("POST", "/v1/chat/completions", json=body) as response:
                for line in response.iter_lines():
                    if '"content"' in line and '"role"' not in line:
                        break
        deadline = time.monotonic() + 10
        while not executor.aborted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert executor.aborted
    finally:
        running.stop()


def test_completion_validates_against_the_sdk(raw: httpx.Client) -> None:
    body = raw.post(
        "/v1/chat/completions", json={"model": "m", "messages": user("Hi"), "tools": [WEATHER]}
    ).json()
    ChatCompletion.model_validate(body)
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_api_key_access_log_and_metrics(serve: ServerFactory, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    import logging

    running = serve(api_key="sekret-key")
    try:
        body = {"model": "m", "messages": user("Hi"), "stream": True}
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                response = raw.post("/v1/chat/completions", json=body, headers=headers)
                assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
                assert "sekret" not in response.text
            with caplog.at_level(logging.INFO, logger="trtllm_responses.access"):
                ok = raw.post(
                    "/v1/chat/completions",
                    json=body,
                    headers={"Authorization": "Bearer sekret-key", "x-request-id": "chat-log-1"},
                )
                deadline = time.monotonic() + 10  # the line is written once the response has been sent
                while (
                    not any("chat-log-1" in r.getMessage() for r in caplog.records)
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.02)
            assert ok.status_code == 200 and ok.headers["x-request-id"] == "chat-log-1"
            (line,) = [r.getMessage() for r in caplog.records if "chat-log-1" in r.getMessage()]
            assert line.startswith("POST /v1/chat/completions 200") and "response_id=chatcmpl-" in line
            assert "output_tokens=" in line and "sekret" not in line
            metrics = raw.get("/metrics").text
        assert 'trtllm_requests_total{method="POST",route="/v1/chat/completions",status="200"} 1.0' in metrics
        assert 'route="/v1/chat/completions",status="401"' in metrics
    finally:
        running.stop()


def test_max_input_bytes_applies_to_the_body_the_client_sent(serve) -> None:  # type: ignore[no-untyped-def]
    # Before: a body under the limit was refused because its translated form (items with types) is larger.
    limit = 20_000
    messages = [{"role": "user", "content": "hi"}] * 600
    body = orjson.dumps({"model": "m", "messages": messages, "max_tokens": 5})
    assert len(body) < limit
    running = serve(max_input_bytes=limit)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            headers = {"content-type": "application/json"}
            response = raw.post("/v1/chat/completions", content=body, headers=headers)
            assert response.status_code == 200, response.text
            over = orjson.dumps({"model": "m", "messages": messages, "max_tokens": 5, "user": "x" * limit})
            response = raw.post("/v1/chat/completions", content=over, headers=headers)
            assert (
                response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
            )
    finally:
        running.stop()
