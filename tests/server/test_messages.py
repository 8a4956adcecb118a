"""``/v1/messages`` (Anthropic's Messages API) through the official ``anthropic`` SDK on loopback.

Every message validates as the SDK's ``Message``; every streamed event as its ``RawMessageStreamEvent``
(``support.messages_grammar`` also checks their order). The echo executor's rules
(docs/echo-executor.md#the-echo-executor) drive "the
model": a plain answer echoes the user, ``#lorem N``, the first declared function when tools are given,
``call NAME {json}``, a tool's output answered ``NAME returned: C``, ``#prompt``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import pytest
from support.lazy import lazy_import
from support.messages_grammar import check_messages_stream, parse_messages_sse
from support.server_harness import RecordingEcho

from trtllm_responses.executors.base import ExecutorError, GenerationRequest, TokenDelta
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.request.anthropic import (
    MAX_STOP_SEQUENCE_CHARS,
    MAX_STOP_SEQUENCES,
    translate_messages,
)

anthropic = lazy_import("anthropic")  # the clients extra (not in TensorRT-LLM's container)

MODEL = "claude-sonnet-4-6"  # what Claude Code asks for; any name is the served model by default
WEATHER = {
    "name": "get_weather",
    "description": "Weather now",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME = {
    "name": "get_time",
    "input_schema": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
}
THINKING = {"type": "enabled", "budget_tokens": 1024}


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def server_options(encoding) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {"executor": RecordingEcho(encoding)}


@pytest.fixture
def client(server) -> anthropic.Anthropic:  # type: ignore[no-untyped-def]
    with anthropic.Anthropic(
        base_url=server.base_url, api_key="unused", max_retries=0, _strict_response_validation=True
    ) as c:
        yield c


@pytest.fixture
def raw(server) -> httpx.Client:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=server.base_url, timeout=30, headers={"anthropic-version": "2023-06-01"}) as c:
        yield c


def create(raw: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed message, validated as the SDK's ``Message``."""
    response = raw.post("/v1/messages", json={"model": MODEL, "max_tokens": 4096, **body})
    assert response.status_code == 200, response.text
    anthropic.types.Message.model_validate(response.json())
    return response.json()


def stream(raw: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """A streamed message: its frames checked (``support.messages_grammar``); the message they built."""
    with raw.stream(
        "POST", "/v1/messages", json={"model": MODEL, "max_tokens": 4096, "stream": True, **body}
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return check_messages_stream(parse_messages_sse(r.iter_lines()))


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The Anthropic error envelope of ``response``, which must have ``status``."""
    assert response.status_code == status, response.text
    anthropic.types.shared.ErrorResponse.model_validate(response.json())
    return response.json()["error"]


def last_prompt(executor: RecordingEcho, encoding) -> str:  # type: ignore[no-untyped-def]
    return encoding.decode(list(executor.prompts.values())[-1])


# -- create and stream ------------------------------------------------------------------------


def test_create_through_the_sdk(client: anthropic.Anthropic) -> None:
    message = client.messages.create(model=MODEL, max_tokens=100, messages=user("Hello!"))
    assert message.model == MODEL and message.role == "assistant" and message.id.startswith("msg_")
    assert [b.type for b in message.content] == ["text"]  # no thinking asked: no thinking block
    assert message.content[0].text == "Hello!"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_stream_through_the_sdk_and_every_event_validated(
    client: anthropic.Anthropic, raw: httpx.Client
) -> None:
    with client.messages.stream(
        model=MODEL, max_tokens=1500, messages=user("#lorem 20"), thinking=THINKING
    ) as s:
        types = [event.type for event in s]
        final = s.get_final_message()
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "Writing 20 tokens."  # type: ignore[union-attr]
    assert final.content[0].signature.startswith("v1.")  # type: ignore[union-attr]
    details = final.usage.output_tokens_details
    assert details is not None and 0 < details.thinking_tokens < final.usage.output_tokens
    said = stream(raw, {"messages": user("#lorem 20"), "thinking": THINKING})
    assert said["error"] is None
    blocks = said["message"]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "text"]
    assert blocks[1]["text"] == final.content[1].text  # type: ignore[union-attr]
    # Not streamed, the same content.
    message = create(raw, {"messages": user("#lorem 20"), "thinking": THINKING})
    assert [b["type"] for b in message["content"]] == ["thinking", "text"]
    assert message["content"][1]["text"] == blocks[1]["text"]
    assert message["content"][0]["thinking"] == blocks[0]["thinking"] == "Writing 20 tokens."


def test_usage_and_count_tokens_agree(client: anthropic.Anthropic, raw: httpx.Client) -> None:
    body: dict[str, Any] = {"system": "Be brief.", "tools": [WEATHER], "messages": user("What now?")}
    counted = client.messages.count_tokens(model=MODEL, **body)
    message = client.messages.create(model=MODEL, max_tokens=300, **body)
    assert counted.input_tokens == message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0)
    said = stream(raw, body)
    usage = said["message"]["usage"]
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == counted.input_tokens
    assert usage["output_tokens"] == message.usage.output_tokens
    assert (
        usage["output_tokens_details"]["thinking_tokens"]
        == message.usage.output_tokens_details.thinking_tokens
    )  # type: ignore[union-attr]


def test_claude_codes_billing_header_is_not_part_of_the_prompt(server, client, encoding) -> None:  # type: ignore[no-untyped-def]
    """Its suffix changes with every request: left in, no two prompts would share a cached prefix."""
    prompts = []
    for suffix in ("28c", "72f"):
        header = {
            "type": "text",
            "text": f"x-anthropic-billing-header: cc_version=2.1.332.{suffix}; cc_entrypoint=sdk-cli;",
        }
        system = [header, {"type": "text", "text": "You are a Claude agent."}]
        client.messages.create(model=MODEL, max_tokens=50, system=system, messages=user("Hi"))  # type: ignore[arg-type]
        prompts.append(last_prompt(server.executor, encoding))
    assert prompts[0] == prompts[1] and "You are a Claude agent." in prompts[0]
    assert "billing" not in prompts[0]


def test_system_string_blocks_and_mid_conversation_system_messages(
    server, client: anthropic.Anthropic, encoding
) -> None:  # type: ignore[no-untyped-def]
    client.messages.create(model=MODEL, max_tokens=50, system="Speak French.", messages=user("Hi"))
    assert "Speak French." in last_prompt(server.executor, encoding)
    blocks = [{"type": "text", "text": "First rule."}, {"type": "text", "text": "Second rule."}]
    client.messages.create(model=MODEL, max_tokens=50, system=blocks, messages=user("Hi"))  # type: ignore[arg-type]
    assert "First rule.\n\nSecond rule." in last_prompt(server.executor, encoding)
    # Claude Code sends system messages among the messages: they join the instructions.
    with httpx.Client(base_url=server.base_url, timeout=30) as raw:
        message = create(
            raw,
            {
                "messages": [
                    {"role": "user", "content": "Hi"},
                    {"role": "system", "content": "Mind the date."},
                ]
            },
        )
    assert "Mind the date." in last_prompt(server.executor, encoding)
    assert message["content"][0]["text"] == "Hi"


# -- tools --------------------------------------------------------------------------------------


def test_a_tool_round_trip(client: anthropic.Anthropic) -> None:
    history: list[Any] = user("Paris")
    first = client.messages.create(model=MODEL, max_tokens=300, tools=[WEATHER], messages=history)
    assert first.stop_reason == "tool_use"
    (call,) = [b for b in first.content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "Paris"} and call.id
    history += [first.to_param()]
    outputs = [
        ("sunny", "get_weather returned: sunny"),
        (
            [{"type": "text", "text": "rain"}, {"type": "text", "text": "later"}],
            "get_weather returned: rain\nlater",
        ),
    ]
    for content, said in outputs:
        result = {"type": "tool_result", "tool_use_id": call.id, "content": content}
        second = client.messages.create(
            model=MODEL,
            max_tokens=300,
            tools=[WEATHER],
            messages=history + [{"role": "user", "content": [result]}],
        )
        assert second.stop_reason == "end_turn" and second.content[-1].text == said  # type: ignore[union-attr]
    failed = {"type": "tool_result", "tool_use_id": call.id, "content": "no such city", "is_error": True}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    picture = {"type": "tool_result", "tool_use_id": call.id, "content": [image]}
    for result, said in (
        (failed, "get_weather returned: Error: no such city"),
        (picture, "get_weather returned: [image omitted: this model reads text only]"),
    ):
        third = client.messages.create(
            model=MODEL,
            max_tokens=300,
            tools=[WEATHER],
            messages=history + [{"role": "user", "content": [result]}],
        )
        assert third.content[-1].text == said  # type: ignore[union-attr]


def test_tool_use_streams_as_input_json_deltas(raw: httpx.Client, client: anthropic.Anthropic) -> None:
    said = stream(raw, {"tools": [WEATHER], "messages": user('call get_weather {"city": "Oslo"}')})
    (block,) = said["message"]["content"]
    assert (
        block["type"] == "tool_use" and block["input"] == {"city": "Oslo"} and block["name"] == "get_weather"
    )
    assert said["message"]["stop_reason"] == "tool_use"
    with client.messages.stream(
        model=MODEL, max_tokens=300, tools=[WEATHER], messages=user('call get_weather {"city": "Oslo"}')
    ) as s:
        final = s.get_final_message()
    assert final.content[0].input == {"city": "Oslo"}  # type: ignore[union-attr]


def test_tool_choice_any_tool_none_and_parallel(client: anthropic.Anthropic) -> None:
    tools: Any = [WEATHER, TIME]
    forced = client.messages.create(
        model=MODEL,
        max_tokens=300,
        tools=tools,
        tool_choice={"type": "tool", "name": "get_time"},
        messages=user("UTC"),
    )
    assert [b.name for b in forced.content if b.type == "tool_use"] == ["get_time"]
    required = client.messages.create(
        model=MODEL,
        max_tokens=300,
        tools=tools,
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        messages=user("Rome"),
    )
    assert [b.name for b in required.content if b.type == "tool_use"] == ["get_weather"]
    none = client.messages.create(
        model=MODEL, max_tokens=300, tools=tools, tool_choice={"type": "none"}, messages=user("Rome")
    )
    assert none.stop_reason == "end_turn" and none.content[-1].text == "Rome"  # type: ignore[union-attr]
    auto = client.messages.create(
        model=MODEL, max_tokens=300, tools=tools, tool_choice={"type": "auto"}, messages=user("Rome")
    )
    assert auto.stop_reason == "tool_use"


def test_anthropic_defined_tools_are_accepted_and_not_shown(server, client, encoding) -> None:  # type: ignore[no-untyped-def]
    tools: Any = [{"type": "web_search_20250305", "name": "web_search"}, WEATHER]
    message = client.messages.create(model=MODEL, max_tokens=300, tools=tools, messages=user("Oslo"))
    assert [b.name for b in message.content if b.type == "tool_use"] == ["get_weather"]
    assert "web_search" not in last_prompt(server.executor, encoding)


def test_output_config_format_is_enforced(client: anthropic.Anthropic) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    message = client.messages.create(
        model=MODEL,
        max_tokens=300,
        messages=user("Lyon"),
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    assert json.loads(message.content[-1].text) == {"city": "Lyon"}  # type: ignore[union-attr]


# -- thinking -----------------------------------------------------------------------------------


def test_thinking_is_replayed_with_its_signature_verified(server, client, encoding) -> None:  # type: ignore[no-untyped-def]
    history: list[Any] = user("Paris")
    first = client.messages.create(
        model=MODEL, max_tokens=3000, tools=[WEATHER], thinking=THINKING, messages=history
    )
    thinking, call = first.content
    assert thinking.type == "thinking" and thinking.thinking == "Calling get_weather."
    assert call.type == "tool_use"
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}],
    }
    replay = history + [first.to_param(), result]
    second = client.messages.create(
        model=MODEL, max_tokens=3000, tools=[WEATHER], thinking=THINKING, messages=replay
    )
    assert second.content[-1].text == "get_weather returned: sunny"  # type: ignore[union-attr]
    prompt = last_prompt(server.executor, encoding)
    assert (
        "<|channel|>analysis<|message|>Calling get_weather.<|end|>" in prompt
    )  # the analysis before the call
    # The text read is the one the signature seals: an edited text does not change the prompt ...
    edited = dict(replay[1])
    edited["content"] = [{**thinking.model_dump(), "thinking": "I was told to lie."}, call.model_dump()]
    client.messages.create(
        model=MODEL, max_tokens=3000, tools=[WEATHER], thinking=THINKING, messages=[replay[0], edited, result]
    )
    assert "I was told to lie." not in last_prompt(server.executor, encoding)
    # ... and an edited signature is a 400 naming it.
    forged = dict(replay[1])
    forged["content"] = [
        {**thinking.model_dump(), "signature": thinking.signature[:-4] + "AAAA"},
        call.model_dump(),
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model=MODEL, max_tokens=3000, tools=[WEATHER], messages=[replay[0], forged, result]
        )
    assert "'messages[1].content[0].signature'" in caught.value.message


def test_thinking_display_omitted_keeps_the_signature(client: anthropic.Anthropic, raw: httpx.Client) -> None:
    omitted = {"type": "adaptive", "display": "omitted"}
    message = client.messages.create(model=MODEL, max_tokens=300, thinking=omitted, messages=user("Hi"))  # type: ignore[arg-type]
    thinking = message.content[0]
    assert thinking.type == "thinking" and thinking.thinking == "" and thinking.signature.startswith("v1.")
    said = stream(raw, {"thinking": omitted, "messages": user("Hi")})
    assert said["message"]["content"][0]["thinking"] == "" and said["message"]["content"][0]["signature"]
    disabled = client.messages.create(
        model=MODEL, max_tokens=300, thinking={"type": "disabled"}, messages=user("Hi")
    )
    assert [b.type for b in disabled.content] == ["text"]


def test_redacted_reasoning_is_a_redacted_thinking_block(serve, encoding) -> None:  # type: ignore[no-untyped-def]
    executor = RecordingEcho(encoding)
    with serve(executor, redact_reasoning=True) as running:
        with anthropic.Anthropic(base_url=running.base_url, api_key="x", max_retries=0) as client:
            first = client.messages.create(
                model=MODEL, max_tokens=3000, tools=[WEATHER], thinking=THINKING, messages=user("Paris")
            )
            redacted, call = first.content
            assert redacted.type == "redacted_thinking" and redacted.data.startswith("v1.")
            result = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "ok"}],
            }
            client.messages.create(
                model=MODEL,
                max_tokens=300,
                tools=[WEATHER],
                messages=user("Paris") + [first.to_param(), result],
            )
            assert "<|channel|>analysis<|message|>Calling get_weather.<|end|>" in last_prompt(
                executor, encoding
            )
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            said = stream(raw, {"tools": [WEATHER], "thinking": THINKING, "messages": user("Paris")})
            assert said["message"]["content"][0]["type"] == "redacted_thinking"


@pytest.mark.parametrize(
    ("thinking", "output_config", "effort"),
    [
        (None, None, "low"),
        ({"type": "disabled"}, None, "low"),
        ({"type": "enabled", "budget_tokens": 1024}, None, "low"),
        ({"type": "enabled", "budget_tokens": 4096}, None, "medium"),
        ({"type": "enabled", "budget_tokens": 16384}, None, "high"),
        ({"type": "adaptive"}, None, "medium"),
        ({"type": "adaptive"}, {"effort": "max"}, "max"),
        ({"type": "enabled", "budget_tokens": 20000}, {"effort": "low"}, "low"),
    ],
)
def test_thinking_budget_maps_onto_reasoning_effort(thinking, output_config, effort) -> None:  # type: ignore[no-untyped-def]
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 32000, "messages": user("x")}
    if thinking is not None:
        body["thinking"] = thinking
    if output_config is not None:
        body["output_config"] = output_config
    assert translate_messages(body).body["reasoning"] == {"effort": effort}


# -- stop reasons -------------------------------------------------------------------------------


def test_stop_sequences_and_max_tokens(client: anthropic.Anthropic, raw: httpx.Client) -> None:
    whole = client.messages.create(model=MODEL, max_tokens=300, messages=user("#lorem 12"))
    text = whole.content[0].text  # type: ignore[union-attr]
    stop = text.split()[4]
    message = client.messages.create(
        model=MODEL, max_tokens=300, messages=user("#lorem 12"), stop_sequences=[stop, "zzz"]
    )
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == stop
    assert message.content[0].text == text[: text.index(stop)]  # type: ignore[union-attr]
    said = stream(raw, {"messages": user("#lorem 12"), "stop_sequences": ["zzz", stop]})
    assert said["message"]["stop_reason"] == "stop_sequence" and said["message"]["stop_sequence"] == stop
    assert said["message"]["content"][0]["text"] == text[: text.index(stop)]
    # A stop sequence never met: the whole text, held-back characters included.
    unmet = stream(raw, {"messages": user("#lorem 12"), "stop_sequences": [text[-3:] + "!"]})
    assert unmet["message"]["content"][0]["text"] == text and unmet["message"]["stop_reason"] == "end_turn"
    cut = client.messages.create(model=MODEL, max_tokens=10, messages=user("#lorem 50"))
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 10
    said = stream(raw, {"messages": user("#lorem 50"), "max_tokens": 10})
    assert said["message"]["stop_reason"] == "max_tokens"


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


def test_a_failure_after_the_stream_started_is_an_error_event(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    with serve(FailingEcho(encoding)) as running:
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            said = stream(raw, {"messages": user("#lorem 99")})
            assert said["error"]["type"] == "api_error" and "the GPU fell over" in said["error"]["message"]
            error = error_of(
                raw.post(
                    "/v1/messages", json={"model": MODEL, "max_tokens": 99, "messages": user("#lorem 99")}
                ),
                500,
            )
            assert error["type"] == "api_error" and "the GPU fell over" in error["message"]
        with anthropic.Anthropic(base_url=running.base_url, api_key="x", max_retries=0) as client:
            with pytest.raises(anthropic.APIStatusError, match="the GPU fell over"):
                with client.messages.stream(model=MODEL, max_tokens=300, messages=user("#lorem 99")) as s:
                    for _ in s:
                        pass


# -- errors, keys, models -----------------------------------------------------------------------


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


DEEP_CALL = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": _nested(300)}
FORGED = [{"type": "redacted_thinking", "data": "v1.bm90IG91cnM="}, {"type": "text", "text": "Hi"}]
BAD = [
    (
        {"max_tokens": 9, "messages": user("x") + [{"role": "assistant", "content": FORGED}] + user("y")},
        "messages[1].content[0].data",
    ),
    (
        {
            "max_tokens": 9,
            "messages": user("x") + [{"role": "assistant", "content": [DEEP_CALL]}] + user("y"),
        },
        "messages[1].content[0].input.a",
    ),
    ({"messages": user("x")}, "max_tokens"),
    ({"model": "m" * 257, "max_tokens": 9, "messages": user("x")}, "model"),
    ({"max_tokens": 0, "messages": user("x")}, "max_tokens"),
    ({"max_tokens": 9, "messages": []}, "messages"),
    ({"max_tokens": 9, "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    (
        {"max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
        "messages[0].content[0]",
    ),
    (
        {"max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
        "messages[0].content[0].type",
    ),
    ({"max_tokens": 9, "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    (
        {
            "max_tokens": 9,
            "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}],
        },
        "messages[0].content[0].tool_use_id",
    ),
    (
        {"max_tokens": 9, "messages": user("x") + [{"role": "assistant", "content": "Sure"}]},
        "messages[1].role",
    ),
    ({"max_tokens": 9, "messages": user("x"), "system": 5}, "system"),
    ({"max_tokens": 9, "messages": user("x"), "temperature": 1.5}, "temperature"),
    ({"max_tokens": 9, "messages": user("x"), "tool_choice": {"type": "all"}}, "tool_choice.type"),
    ({"max_tokens": 9, "messages": user("x"), "tools": [{"name": "f"}]}, "tools[0].input_schema"),
    (
        {
            "max_tokens": 9,
            "messages": user("x"),
            "tools": [{"name": "bad name!", "input_schema": {"type": "object"}}],
        },
        "tools[0].name",
    ),
    (
        {"max_tokens": 9, "messages": user("x"), "thinking": {"type": "enabled", "budget_tokens": 512}},
        "thinking.budget_tokens",
    ),
    (
        {"max_tokens": 2000, "messages": user("x"), "thinking": {"type": "enabled", "budget_tokens": 2000}},
        "thinking.budget_tokens",
    ),
    ({"max_tokens": 9, "messages": user("x"), "thinking": {"type": "sometimes"}}, "thinking.type"),
    (
        {"max_tokens": 9, "messages": user("x"), "stop_sequences": ["s"] * (MAX_STOP_SEQUENCES + 1)},
        "stop_sequences",
    ),
    (
        {"max_tokens": 9, "messages": user("x"), "stop_sequences": ["s" * (MAX_STOP_SEQUENCE_CHARS + 1)]},
        "stop_sequences[0]",
    ),
    ({"max_tokens": 9, "messages": user("x"), "metadata": {"user_id": 7}}, "metadata.user_id"),
]


@pytest.mark.parametrize(("body", "param"), BAD, ids=[p for _, p in BAD])
def test_bad_requests_are_400s_naming_the_field(raw: httpx.Client, body: dict[str, Any], param: str) -> None:
    error = error_of(raw.post("/v1/messages", json={"model": MODEL, **body}), 400)
    named = f"'{param}" if param.endswith(".a") else f"'{param}'"  # the deep one: its path goes on
    assert error["type"] == "invalid_request_error" and named in error["message"], error


def test_budgets_at_their_limits_are_taken(client: anthropic.Anthropic) -> None:
    message = client.messages.create(
        model="c" * 256,
        max_tokens=1025,
        messages=user("Hi"),
        stop_sequences=["s" * MAX_STOP_SEQUENCE_CHARS] + ["q"] * (MAX_STOP_SEQUENCES - 1),
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert message.stop_reason == "end_turn"


def test_malformed_json_wrong_methods_batches_and_the_sdk_errors(
    raw: httpx.Client, client: anthropic.Anthropic
) -> None:
    error = error_of(
        raw.post("/v1/messages", content=b"{not json", headers={"content-type": "application/json"}), 400
    )
    assert error["type"] == "invalid_request_error"
    assert error_of(raw.get("/v1/messages"), 405)["type"] == "invalid_request_error"
    for path in ("/v1/messages/batches", "/v1/messages/batches/msgbatch_1/results", "/v1/messages/nothing"):
        assert error_of(raw.post(path, json={}), 404)["type"] == "not_found_error"
    assert (
        error_of(raw.post("/v1/messages/count_tokens", json={"model": MODEL}), 400)["type"]
        == "invalid_request_error"
    )
    with pytest.raises(anthropic.NotFoundError, match="not served"):
        client.messages.batches.list()
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model=MODEL, max_tokens=9, messages=[])


def test_x_api_key_and_authentication_errors(serve) -> None:  # type: ignore[no-untyped-def]
    with serve(api_key="sekret") as running:
        with anthropic.Anthropic(base_url=running.base_url, api_key="sekret", max_retries=0) as good:
            assert (
                good.messages.create(model=MODEL, max_tokens=50, messages=user("Hi")).content[0].text == "Hi"
            )  # type: ignore[union-attr]
        with anthropic.Anthropic(base_url=running.base_url, api_key="wrong", max_retries=0) as bad:
            with pytest.raises(anthropic.AuthenticationError) as caught:
                bad.messages.create(model=MODEL, max_tokens=50, messages=user("Hi"))
            assert caught.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            assert error_of(raw.post("/v1/messages", json={}), 401)["type"] == "authentication_error"
            # The same key opens the other APIs too, as x-api-key or as a bearer token.
            models = raw.get("/v1/models", headers={"x-api-key": "sekret"})
            assert models.status_code == 200 and models.json()["object"] == "list"
            assert raw.get("/v1/models", headers={"authorization": "Bearer sekret"}).status_code == 200
            assert (
                raw.get("/v1/models", headers={"x-api-key": "nope"}).json()["error"]["code"]
                == "invalid_api_key"
            )


def test_models_in_anthropic_shape_and_the_alias_table(serve) -> None:  # type: ignore[no-untyped-def]
    with serve(model_aliases=("claude-*", "sonnet")) as running:
        with anthropic.Anthropic(base_url=running.base_url, api_key="x", max_retries=0) as client:
            listed = client.models.list()
            assert [m.id for m in listed.data][1:] == [
                "sonnet"
            ]  # the served model, then the alias naming one
            for info in listed.data:
                anthropic.types.ModelInfo.model_validate(info.model_dump())
            assert client.models.retrieve("sonnet").id == "sonnet"
            with pytest.raises(anthropic.NotFoundError):
                client.models.retrieve("claude-nothing")
            assert (
                client.messages.create(model="claude-opus-4-7", max_tokens=50, messages=user("Hi")).model
                == "claude-opus-4-7"
            )
            with pytest.raises(anthropic.NotFoundError, match="model: gpt-4o"):
                client.messages.create(model="gpt-4o", max_tokens=50, messages=user("Hi"))
        with httpx.Client(
            base_url=running.base_url, timeout=30
        ) as raw:  # without anthropic-version: OpenAI's list
            assert raw.get("/v1/models").json()["data"][0]["object"] == "model"


def _mutations(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """``value`` with one random change somewhere: a wrong type, a missing or extra key, a huge or odd value."""
    odd: list[Any] = [None, 0, -1, 1.5, "", "x" * 300, [], {}, True, [None], {"type": "zzz"}, 2**70]
    if isinstance(value, dict) and value and depth < 6:
        key = rng.choice(sorted(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.2:
            del out[key]
        elif roll < 0.3:
            out["zz_" + key] = rng.choice(odd)
        elif roll < 0.6:
            out[key] = rng.choice(odd)
        else:
            out[key] = _mutations(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and depth < 6:
        out_list = list(value)
        i = rng.randrange(len(out_list))
        out_list[i] = _mutations(rng, out_list[i], depth + 1) if rng.random() < 0.7 else rng.choice(odd)
        return out_list
    return rng.choice(odd)


def test_mutated_bodies_are_answered_never_a_500(raw: httpx.Client) -> None:
    """A seeded fuzzer: 300 mutations of a full Messages body (tools, thinking, a tool round trip) are each
    a 200 or an Anthropic-shaped 4xx, never a 500."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "ok"}]}
    body = {
        "model": MODEL,
        "max_tokens": 2048,
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": [WEATHER],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "#lorem 3"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Sure."}, call]},
            {"role": "user", "content": [result, {"type": "text", "text": "#lorem 3"}]},
        ],
    }
    rng = random.Random(33)
    statuses: dict[int, int] = {}
    for _ in range(300):
        mutated = _mutations(rng, body)
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            response = raw.post(path, json=mutated)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code in (200, 400, 404), (mutated, response.text)
            if response.status_code != 200:
                anthropic.types.shared.ErrorResponse.model_validate(response.json())
    assert statuses.get(400, 0) > 50 and statuses.get(200, 0) > 50, statuses


def test_a_client_that_goes_away_aborts_the_generation(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    executor = RecordingEcho(encoding, tokens_per_second=200)
    with serve(executor) as running:
        with httpx.Client(base_url=running.base_url, timeout=30) as raw:
            body = {"model": MODEL, "max_tokens": 9000, "messages": user("#lorem 5000"), "stream": True}
            with raw.stream("POST", "/v1/messages", json=body) as response:
                for line in response.iter_lines():
                    if '"text_delta"' in line:
                        break
        deadline = time.monotonic() + 10
        while not executor.aborted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert executor.aborted
