"""The official openai SDK, sync and async, against the echo server on loopback."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from support.stream_grammar import check_stream

from trtllm_responses.core.wire import to_dict

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}


def dumped(events: list[Any]) -> list[dict[str, Any]]:
    """Events as dicts; drops ``parsed_arguments``, which the SDK's stream helper adds to its own parsed copy."""
    out = [e.model_dump(mode="json", exclude_unset=True) for e in events]
    for event in out:
        for item in (event.get("response") or {}).get("output", []):
            item.pop("parsed_arguments", None)
    return out


def test_create_non_streaming(client: openai.OpenAI) -> None:
    response = client.responses.create(model="gpt-oss-120b", input="Hi there", instructions="Be kind.")
    assert response.status == "completed" and response.output_text == "Hi there"
    assert response.model == "gpt-oss-test" and response.instructions == "Be kind."
    assert response.usage is not None and response.usage.output_tokens > 0


def test_create_streaming(client: openai.OpenAI) -> None:
    with client.responses.create(model="m", input="Streamed!", stream=True) as stream:
        events = list(stream)
    response = check_stream(dumped(events))
    assert response["output"][-1]["content"][0]["text"] == "Streamed!"


def test_stream_helper_final_response_equals_terminal_event(client: openai.OpenAI) -> None:
    with client.responses.stream(model="m", input="Helper", tools=[WEATHER], tool_choice="none") as stream:
        events = list(stream)
        final = stream.get_final_response()
    terminal = events[-1]
    assert terminal.type == "response.completed"
    assert final.model_dump(exclude={"output_text"}) == terminal.response.model_dump(exclude={"output_text"})
    assert final.output_text == "Helper"


def test_function_call_answered_via_previous_response_id(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="Paris", tools=[WEATHER])
    call = first.output[-1]
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Paris"}
    second = client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "21C"}],
        tools=[WEATHER],
    )
    assert second.output_text == "get_weather returned: 21C"
    assert second.previous_response_id == first.id


def test_function_call_answered_statelessly(client: openai.OpenAI) -> None:
    user = {"role": "user", "content": "Oslo"}
    first = client.responses.create(model="m", input=[user], tools=[WEATHER], store=False)
    call = first.output[-1]
    replay = [
        user,
        *[to_dict(item) for item in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "-3C"},
    ]
    second = client.responses.create(model="m", input=replay, tools=[WEATHER], store=False)
    assert second.output_text == "get_weather returned: -3C"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)


def test_streamed_function_call_then_answer(client: openai.OpenAI) -> None:
    with client.responses.stream(model="m", input="Rome", tools=[WEATHER]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    check_stream(dumped(events))
    call = final.output[-1]
    assert call.type == "function_call"
    assert [e.type for e in events].count("response.function_call_arguments.delta") >= 1
    answer = client.responses.create(
        model="m",
        previous_response_id=final.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "ok"}],
    )
    assert answer.output_text == "get_weather returned: ok"


def test_three_turn_chain(client: openai.OpenAI) -> None:
    one = client.responses.create(model="m", input="one")
    two = client.responses.create(model="m", input="two", previous_response_id=one.id)
    three = client.responses.create(model="m", input="#prompt", previous_response_id=two.id)
    prompt = three.output_text
    assert (
        "<|start|>user<|message|>one<|end|>" in prompt and "<|channel|>final<|message|>one<|end|>" in prompt
    )
    assert (
        "<|start|>user<|message|>two<|end|>" in prompt and "<|channel|>final<|message|>two<|end|>" in prompt
    )
    assert "Echoing the user." not in prompt, "finished turns' reasoning is dropped"
    assert prompt.endswith("<|start|>user<|message|>#prompt<|end|><|start|>assistant")


def test_new_request_sets_instructions_tools_and_effort(client: openai.OpenAI) -> None:
    one = client.responses.create(model="m", input="a", instructions="OLD RULES", reasoning={"effort": "low"})
    two = client.responses.create(
        model="m",
        input="#prompt",
        previous_response_id=one.id,
        instructions="NEW RULES",
        reasoning={"effort": "high"},
    )
    assert "NEW RULES" in two.output_text and "OLD RULES" not in two.output_text
    assert "Reasoning: high" in two.output_text


def test_retrieve_delete_and_input_items(client: openai.OpenAI) -> None:
    created = client.responses.create(
        model="m",
        input=[
            {"role": "developer", "content": "Rules."},
            {"role": "user", "content": "first"},
            {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
        ],
    )
    assert client.responses.retrieve(created.id) == created
    items = client.responses.input_items.list(created.id)
    assert [i.content[0].text for i in items.data] == ["second", "first", "Rules."]  # newest first by default
    asc = client.responses.input_items.list(created.id, order="asc", limit=2)
    assert [i.content[0].text for i in asc.data] == ["Rules.", "first"] and asc.has_more
    rest = client.responses.input_items.list(created.id, order="asc", after=asc.last_id)
    assert [i.content[0].text for i in rest.data] == ["second"] and not rest.has_more
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(created.id)


async def test_async_client_end_to_end(aclient: openai.AsyncOpenAI) -> None:
    first = await aclient.responses.create(model="m", input="Berlin", tools=[WEATHER])
    call = first.output[-1]
    assert call.type == "function_call"
    stream = await aclient.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "12C"}],
        stream=True,
    )
    events = [e async for e in stream]
    response = check_stream(dumped(events))
    assert response["output"][-1]["content"][0]["text"] == "get_weather returned: 12C"
    async with aclient.responses.stream(model="m", input="async helper") as helper:
        async for _ in helper:
            pass
        final = await helper.get_final_response()
    assert final.output_text == "async helper"
    assert (await aclient.responses.retrieve(final.id)).id == final.id
    items = await aclient.responses.input_items.list(final.id)
    assert items.data[0].content[0].text == "async helper"


def test_models_endpoint(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["gpt-oss-test"]
