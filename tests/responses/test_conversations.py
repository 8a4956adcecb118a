"""The Conversations API with the openai SDK, ``conversation=`` in responses, and an Agents SDK session."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def server_options(request, tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from trtllm_responses.store import open_store

    url = "memory" if request.param == "memory" else f"sqlite:///{tmp_path_factory.mktemp('conv') / 'c.db'}"
    return {"store": open_store(url, max_responses=1000, max_bytes=1 << 30)}


@pytest.fixture
def client(server) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


def test_conversation_crud_and_items(client: openai.OpenAI) -> None:
    conv = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "hello"}], metadata={"topic": "demo"}
    )
    assert (
        conv.object == "conversation" and conv.id.startswith("conv_") and conv.metadata == {"topic": "demo"}
    )
    assert client.conversations.retrieve(conv.id).created_at == conv.created_at
    assert client.conversations.update(conv.id, metadata={"topic": "new"}).metadata == {"topic": "new"}
    added = client.conversations.items.create(
        conv.id,
        items=[
            {"type": "message", "role": "assistant", "content": "hi there"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and you?"}]},
        ],
    )
    assert [item.type for item in added.data] == ["message", "message"]
    items = client.conversations.items.list(conv.id, order="asc")
    texts = [item.content[0].text for item in items.data]  # type: ignore[union-attr]
    assert texts == ["hello", "hi there", "and you?"]
    # Pagination: newest first by default, `after` and `limit`.
    page = client.conversations.items.list(conv.id, limit=2)
    assert [i.id for i in page.data] == [items.data[2].id, items.data[1].id] and page.has_more
    rest = client.conversations.items.list(conv.id, limit=2, after=page.data[-1].id)
    assert [i.id for i in rest.data] == [items.data[0].id] and not rest.has_more
    assert list(i.id for i in client.conversations.items.list(conv.id, order="asc", limit=1)) == [
        i.id for i in items.data
    ]
    one = client.conversations.items.retrieve(items.data[1].id, conversation_id=conv.id)
    assert one.id == items.data[1].id
    after_delete = client.conversations.items.delete(items.data[1].id, conversation_id=conv.id)
    assert after_delete.id == conv.id
    assert len(client.conversations.items.list(conv.id).data) == 2
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve(items.data[1].id, conversation_id=conv.id)
    deleted = client.conversations.delete(conv.id)
    assert deleted.deleted and deleted.id == conv.id
    for call in (
        lambda: client.conversations.retrieve(conv.id),
        lambda: client.conversations.items.list(conv.id),
        lambda: client.conversations.delete(conv.id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()


def test_bad_conversation_requests_are_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.conversations.create(items=[{"type": "bogus"}])  # type: ignore[list-item]
    assert info.value.body["param"].startswith("items[0]")  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        client.conversations.create(metadata={"k": 1})  # type: ignore[dict-item]
    with pytest.raises(openai.BadRequestError):
        client.conversations.create(items=[{"type": "message", "role": "user", "content": "x"}] * 21)
    conv = client.conversations.create()
    with pytest.raises(openai.BadRequestError):
        client.conversations.items.list(conv.id, after="msg_nope")


def test_responses_in_a_conversation(client: openai.OpenAI) -> None:
    conv = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "My name is Ada."}]
    )
    first = client.responses.create(
        model="m", input="Weather in Rome?", tools=[WEATHER], conversation=conv.id
    )
    assert first.conversation is not None and first.conversation.id == conv.id
    call = next(item for item in first.output if item.type == "function_call")
    second = client.responses.create(
        model="m",
        conversation={"id": conv.id},
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "warm"}],
        tools=[WEATHER],
    )
    assert second.output_text == "get_weather returned: warm"
    third = client.responses.create(model="m", input="#prompt", conversation=conv.id)
    # The conversation's items come before the input, in order.
    prompt = third.output_text
    assert prompt.index("My name is Ada.") < prompt.index("Weather in Rome?") < prompt.index("warm")
    kinds = [item.type for item in client.conversations.items.list(conv.id, order="asc", limit=100).data]
    # seed message, then each turn's input and output items.
    assert (
        kinds[:1] == ["message"]
        and kinds.count("function_call") == 1
        and kinds.count("function_call_output") == 1
    )
    assert len(kinds) == 1 + (1 + len(first.output)) + (1 + len(second.output)) + (1 + len(third.output))


def test_a_remembered_conversation_history_renders_like_its_items(
    server, client: openai.OpenAI, adapter
) -> None:  # type: ignore[no-untyped-def]
    """The next turn continues the history kept from the last one; it must equal rendering the items."""
    from trtllm_responses.responses.conversations import ConversationsService

    conv = client.conversations.create(items=[{"type": "message", "role": "user", "content": "Hi, I am Bo."}])
    first = client.responses.create(
        model="m", input="Weather in Rome?", tools=[WEATHER], conversation=conv.id
    )
    call = next(item for item in first.output if item.type == "function_call")
    client.responses.create(
        model="m",
        conversation=conv.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "warm"}],
        tools=[WEATHER],
    )
    service = server.app.state.service.conversations
    remembered = service._histories.get(conv.id)
    assert remembered is not None  # kept from the last turn: the next one renders nothing old
    kept, seen, _ = asyncio.run(service.history(conv.id))
    assert kept is remembered[2]
    fresh, fresh_seen, _ = asyncio.run(ConversationsService(server.store, adapter).history(conv.id))
    assert fresh_seen == seen
    assert adapter.conversation_tokens(kept.messages) == adapter.conversation_tokens(fresh.messages)
    assert dict(kept.calls) == dict(fresh.calls)
    # Items added through the API invalidate it: they are rendered.
    client.conversations.items.create(
        conv.id, items=[{"type": "message", "role": "user", "content": "More."}]
    )
    after, _, _ = asyncio.run(service.history(conv.id))
    assert len(after.messages) == len(fresh.messages) + 1


def test_conversation_errors_in_responses(client: openai.OpenAI) -> None:
    conv = client.conversations.create()
    prior = client.responses.create(model="m", input="hi")
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="m", input="x", conversation=conv.id, previous_response_id=prior.id)
    assert "Mutually exclusive" in info.value.message
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="m", input="x", conversation="conv_nope")
    assert missing.value.body["param"] == "conversation"  # type: ignore[index]


def test_agents_sdk_conversations_session_runs_a_tool_using_agent(server) -> None:  # type: ignore[no-untyped-def]
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from agents.memory import OpenAIConversationsSession

    set_tracing_disabled(True)
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    async def run() -> tuple[str, str, list[dict]]:
        client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
        model = OpenAIResponsesModel(model="gpt-oss", openai_client=client)
        agent = Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather], model=model)
        session = OpenAIConversationsSession(openai_client=client)
        first = await Runner.run(agent, "Paris", session=session)
        second = await Runner.run(agent, "#prompt", session=session)
        items = await session.get_items()
        await client.close()
        return str(first.final_output), str(second.final_output), items

    first, second, items = asyncio.run(run())
    assert calls == ["Paris"]
    assert first == "get_weather returned: sunny in Paris"
    # The second turn saw the first one through the session's conversation.
    assert "sunny in Paris" in second and "get_weather returned" in second
    kinds = [item.get("type", "message") for item in items]
    assert kinds.count("function_call") == 1 and kinds.count("function_call_output") == 1
