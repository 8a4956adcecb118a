"""Sealed content across tenants, through a real server with a tenants file and the official SDKs: encrypted
reasoning, compaction blobs and thinking signatures open only for the tenant they were sealed for, and only as
their kind (docs/tenants.md#sealed-content-kv-prefixes-and-caches). The issue's attack, exactly: a signature
made with ``display: omitted`` in A's conversation, replayed in B's, is a 400; in A's own it opens.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from support.lazy import lazy_import
from support.server_harness import RecordingEcho, RunningServer, ServerFactory
from support.tenant_files import write_tenants

from trtllm_responses.harmony import HarmonyEncoding

anthropic = lazy_import("anthropic")  # the clients extra (not in TensorRT-LLM's container)

MODEL = "gpt-oss-test"
WEATHER = {
    "name": "get_weather",
    "description": "Weather now",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
OMITTED = {"type": "adaptive", "display": "omitted"}
ENCRYPTED = ["reasoning.encrypted_content"]


@pytest.fixture(scope="module")
def server(
    serve: ServerFactory, encoding: HarmonyEncoding, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    path = write_tenants(tmp_path_factory.mktemp("tenants") / "tenants.json")
    with serve(RecordingEcho(encoding), tenants_file=str(path)) as running:
        yield running


_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Each test's clients are closed when it ends (their sockets with them). Before: left to the collector,
    a socket's ResourceWarning fell into whichever test the in-process server's full collection ran in."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def responses_client(server: RunningServer, key: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0)
    _OPEN.append(client)
    return client


def messages_client(server: RunningServer, key: str) -> Any:
    client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
    _OPEN.append(client)
    return client


def sealed_reasoning(client: openai.OpenAI, text: str = "Hello") -> dict[str, Any]:
    """A reasoning item with its ``encrypted_content``, as a stateless client keeps it."""
    response = client.responses.create(model=MODEL, input=text, store=False, include=ENCRYPTED)
    item = next(item for item in response.output if item.type == "reasoning")
    assert item.encrypted_content
    return {"type": "reasoning", "summary": [], "encrypted_content": item.encrypted_content}


def replay(client: openai.OpenAI, item: dict[str, Any]) -> Any:
    return client.responses.create(
        model=MODEL,
        store=False,
        input=[{"role": "user", "content": "Hello"}, item, {"role": "user", "content": "Go"}],
    )


def test_encrypted_reasoning_opens_for_its_tenant_only(server: RunningServer) -> None:
    a, b = responses_client(server, "key-a"), responses_client(server, "key-b")
    item = sealed_reasoning(a)
    assert replay(a, item).status == "completed"  # its own: opens
    with pytest.raises(openai.BadRequestError) as refused:
        replay(b, item)
    assert refused.value.code == "invalid_encrypted_content"
    assert refused.value.param == "input[1].encrypted_content"
    assert replay(b, sealed_reasoning(b)).status == "completed"  # B's own opens for B


def test_a_compaction_blob_opens_for_its_tenant_only(server: RunningServer) -> None:
    a, b = responses_client(server, "key-a"), responses_client(server, "key-b")
    compacted = a.responses.compact(model=MODEL, input=[{"role": "user", "content": "Fix the parser"}])
    window = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    assert window[-1]["type"] == "compaction"
    go = {"role": "user", "content": "#prompt"}
    assert a.responses.create(model=MODEL, store=False, input=[*window, go]).status == "completed"
    with pytest.raises(openai.BadRequestError) as refused:
        b.responses.create(model=MODEL, store=False, input=[*window, go])
    assert refused.value.code == "invalid_encrypted_content"
    assert refused.value.param == f"input[{len(window) - 1}].encrypted_content"
    # Nor does B's compaction open it: /responses/compact opens what it is given as its asker's.
    with pytest.raises(openai.BadRequestError):
        b.responses.compact(model=MODEL, input=[*window, go])


def thinking_turn(client: Any, thinking: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    """A first Messages turn that calls get_weather after thinking: the history to replay, and its thinking block."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Paris"}]
    first = client.messages.create(
        model=MODEL, max_tokens=3000, tools=[WEATHER], thinking=thinking, messages=history
    )
    block, call = first.content
    assert block.type == "thinking" and block.signature and call.type == "tool_use"
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}],
    }
    return [*history, first.to_param(), result], block


def test_an_omitted_signature_replayed_in_another_tenants_conversation_is_a_400(
    server: RunningServer, encoding: HarmonyEncoding
) -> None:
    """The issue's attack: A's hidden reasoning (``display: omitted``), its signature pasted into B's conversation."""
    a, b = messages_client(server, "key-a"), messages_client(server, "key-b")
    replayed, block = thinking_turn(a, OMITTED)
    assert block.thinking == ""  # hidden from A's client too
    answer = a.messages.create(
        model=MODEL, max_tokens=3000, tools=[WEATHER], thinking=OMITTED, messages=replayed
    )
    assert answer.content[-1].text == "get_weather returned: sunny"
    executor = server.executor
    assert isinstance(executor, RecordingEcho)
    prompt = encoding.decode(executor.requests[-1].prompt_token_ids)
    assert "<|channel|>analysis<|message|>Calling get_weather.<|end|>" in prompt  # A's own opened
    with pytest.raises(anthropic.BadRequestError) as refused:
        b.messages.create(model=MODEL, max_tokens=3000, tools=[WEATHER], thinking=OMITTED, messages=replayed)
    assert "'messages[1].content[0].signature'" in refused.value.message
    assert refused.value.body["error"]["type"] == "invalid_request_error"


def test_a_thinking_signature_is_not_a_responses_blob_nor_the_reverse(server: RunningServer) -> None:
    """The issue's 'Why' 3, second half: one tenant, each API's blob refused by the other (kinds are bound)."""
    messages, responses = messages_client(server, "key-a"), responses_client(server, "key-a")
    _, block = thinking_turn(messages, {"type": "enabled", "budget_tokens": 1024})
    as_reasoning = {"type": "reasoning", "summary": [], "encrypted_content": block.signature}
    with pytest.raises(openai.BadRequestError) as refused:
        replay(responses, as_reasoning)
    assert refused.value.code == "invalid_encrypted_content"
    blob = sealed_reasoning(responses)["encrypted_content"]
    history = [
        {"role": "user", "content": "Paris"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": blob}]},
        {"role": "user", "content": "Go"},
    ]
    with pytest.raises(anthropic.BadRequestError) as refused_messages:
        messages.messages.create(model=MODEL, max_tokens=300, messages=history)
    assert "'messages[1].content[0].signature'" in refused_messages.value.message
    history[1]["content"] = [{"type": "redacted_thinking", "data": blob}]
    with pytest.raises(anthropic.BadRequestError):
        messages.messages.create(model=MODEL, max_tokens=300, messages=history)
