"""Agent-loop endpoints over HTTP with the openai SDK: input token counts, cancel, encrypted reasoning, compaction."""

from __future__ import annotations

import base64
from typing import Any

import openai
import pytest
from support.server_harness import RecordingEcho, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.responses.sealing import SUMMARY_PREFIX, ContentSealer, load_key

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}
ENCRYPTED = ["reasoning.encrypted_content"]


def dump(item: Any) -> dict[str, Any]:
    # warnings=False: the SDK types compacted user messages as output messages (it parses them leniently).
    return item.model_dump(mode="json", exclude_none=True, warnings=False)


# -- input tokens ---------------------------------------------------------------------------------


def test_input_tokens_equal_the_prompt_of_the_same_create(client: openai.OpenAI) -> None:
    body: dict[str, Any] = {
        "model": "gpt-oss",
        "input": [{"role": "user", "content": "What is the weather in Paris?"}],
        "instructions": "Answer briefly.",
        "tools": [WEATHER],
    }
    count = client.responses.input_tokens.count(**body)
    assert count.object == "response.input_tokens"
    created = client.responses.create(**body)
    assert created.usage is not None and count.input_tokens == created.usage.input_tokens
    # A continuation: the stored conversation counts too, function outputs included.
    call = next(item for item in created.output if item.type == "function_call")
    follow: dict[str, Any] = {
        "model": "gpt-oss",
        "previous_response_id": created.id,
        "input": [{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        "tools": [WEATHER],
    }
    counted = client.responses.input_tokens.count(**follow).input_tokens
    continued = client.responses.create(**follow)
    assert continued.usage is not None and counted == continued.usage.input_tokens
    assert counted > count.input_tokens


def test_input_tokens_errors_are_those_of_create(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.responses.input_tokens.count(model="m", input="x", previous_response_id="resp_unknown")
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.input_tokens.count(
            model="m", input=[{"type": "function_call_output", "call_id": "nope", "output": "x"}]
        )
    assert bad.value.body["param"] == "input[0].call_id"  # type: ignore[index]


@pytest.mark.parametrize("path", ["/v1/responses/input_tokens", "/v1/responses/compact"])
def test_bodies_over_the_input_limit_are_refused_like_create(http, path: str) -> None:  # type: ignore[no-untyped-def]
    body = {"input": "x" * (3 << 20)}
    assert http.post("/v1/responses", json=body).status_code == 400
    answer = http.post(path, json=body)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "context_length_exceeded"


def test_cancel_of_a_foreground_response_is_400(client: openai.OpenAI) -> None:
    created = client.responses.create(model="m", input="hi")
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_unknown")


# -- encrypted reasoning --------------------------------------------------------------------------


def test_encrypted_reasoning_round_trip_equals_the_stored_continuation(client: openai.OpenAI) -> None:
    """A store:false loop replaying encrypted reasoning (content dropped) renders the stored loop's prompt."""
    first = {"model": "m", "input": 'call get_weather {"city":"Paris"}', "tools": [WEATHER]}
    stored = client.responses.create(**first, include=ENCRYPTED)
    stateless = client.responses.create(**first, include=ENCRYPTED, store=False)
    reasoning = [dump(item) for item in stateless.output if item.type == "reasoning"]
    assert reasoning and all(r["encrypted_content"].startswith("v1.") for r in reasoning)
    assert reasoning[0]["content"][0]["text"] == "Calling get_weather."  # not redacted by default

    def follow(call_id: str) -> list[dict[str, Any]]:
        return [
            {"type": "function_call_output", "call_id": call_id, "output": "sunny"},
            {"role": "user", "content": "#prompt"},
        ]

    stored_call = next(item for item in stored.output if item.type == "function_call")
    continued = client.responses.create(
        model="m", previous_response_id=stored.id, input=follow(stored_call.call_id), tools=[WEATHER]
    )
    replay: list[dict[str, Any]] = [{"role": "user", "content": first["input"]}]
    for item in stateless.output:
        data = dump(item)
        if data["type"] == "reasoning":
            data.pop("content")  # only the encrypted blob carries it
        replay.append(data)
    stateless_call = next(item for item in stateless.output if item.type == "function_call")
    replayed = client.responses.create(
        model="m", store=False, input=[*replay, *follow(stateless_call.call_id)], tools=[WEATHER]
    )
    assert continued.usage is not None and replayed.usage is not None
    assert replayed.usage.input_tokens == continued.usage.input_tokens
    # The echo's #prompt answer is the decoded prompt; call ids differ between the two loops.
    shown = continued.output_text.replace(stored_call.call_id, "CALL")
    assert "Calling get_weather." in shown  # the reasoning is in the prompt (a tool call is pending)
    assert replayed.output_text.replace(stateless_call.call_id, "CALL") == shown


def test_replayed_encrypted_reasoning_is_the_stored_prompt_token_for_token(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    executor = RecordingEcho(encoding)
    running = serve(executor)
    try:
        with openai.OpenAI(base_url=running.base_url + "/v1", api_key="unused", max_retries=0) as client:
            first_input = 'call get_weather {"city":"Oslo"}'
            first = client.responses.create(model="m", input=first_input, tools=[WEATHER], include=ENCRYPTED)
            call = next(item for item in first.output if item.type == "function_call")
            follow = [
                {"type": "function_call_output", "call_id": call.call_id, "output": "cold"},
                {"role": "user", "content": "Thanks."},
            ]
            stored = client.responses.create(
                model="m",
                previous_response_id=first.id,
                input=follow,
                tools=[WEATHER],  # type: ignore[arg-type]
            )
            replay: list[dict[str, Any]] = [{"role": "user", "content": first_input}]
            for item in first.output:
                data = dump(item)
                if data["type"] == "reasoning":
                    assert data.pop("content")  # only the encrypted blob carries it now
                replay.append(data)
            stateless = client.responses.create(
                model="m",
                store=False,
                input=[*replay, *follow],
                tools=[WEATHER],  # type: ignore[list-item]
            )
        assert executor.prompts[stateless.id] == executor.prompts[stored.id]
        shown = encoding.decode(executor.prompts[stored.id])
        assert "Calling get_weather." in shown  # the reasoning is part of it (its turn is still open)
    finally:
        running.stop()


def _tampered(blob: str) -> str:
    raw = bytearray(base64.urlsafe_b64decode(blob[3:]))
    raw[-1] ^= 1
    return "v1." + base64.urlsafe_b64encode(bytes(raw)).decode()


@pytest.mark.parametrize("how", ["tampered", "truncated", "foreign", "garbage"])
def test_a_bad_encrypted_blob_is_400_naming_the_item(client: openai.OpenAI, how: str) -> None:
    made = client.responses.create(model="m", input="hello", include=ENCRYPTED, store=False)
    item = dump(next(i for i in made.output if i.type == "reasoning"))
    blob = item["encrypted_content"]
    item["encrypted_content"] = {
        "tampered": _tampered(blob),
        "truncated": blob[: len(blob) // 2],
        "foreign": ContentSealer(b"k" * 32).seal_reasoning("Echoing the user."),
        "garbage": "not a blob",
    }[how]
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="m", store=False, input=[{"role": "user", "content": "a"}, item])
    assert bad.value.code == "invalid_encrypted_content"
    assert bad.value.param == "input[1].encrypted_content"


def test_redacted_reasoning_streams_no_text_and_still_continues(serve) -> None:  # type: ignore[no-untyped-def]
    import httpx

    running = serve(redact_reasoning=True)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as http:
            events = stream_events(http, {"input": 'call get_weather {"city":"Oslo"}', "tools": [WEATHER]})
            final = check_stream(events)
            assert not [e for e in events if e["type"].startswith("response.reasoning_text")]
            reasoning = next(i for i in final["output"] if i["type"] == "reasoning")
            assert reasoning["content"] == [] and reasoning["encrypted_content"].startswith("v1.")
            call = next(i for i in final["output"] if i["type"] == "function_call")
            body = {
                "previous_response_id": final["id"],
                "tools": [WEATHER],
                "input": [
                    {"type": "function_call_output", "call_id": call["call_id"], "output": "cold"},
                    {"role": "user", "content": "#prompt"},
                ],
            }
            shown = http.post("/v1/responses", json=body).json()
            text = shown["output"][-1]["content"][0]["text"]
            assert "Calling get_weather." in text  # the stored history kept the redacted reasoning
    finally:
        running.stop()


def test_key_is_generated_once_with_mode_0600(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("TRTLLM_RESPONSES_ENCRYPTION_KEY", raising=False)
    monkeypatch.setenv("TRTLLM_RESPONSES_CACHE", str(tmp_path))
    key = load_key()
    path = tmp_path / "encryption.key"
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_key() == key and len(key) == 32
    monkeypatch.setenv("TRTLLM_RESPONSES_ENCRYPTION_KEY", base64.b64encode(b"e" * 32).decode())
    assert load_key() == b"e" * 32
    key_file = tmp_path / "given.key"
    key_file.write_text(base64.b64encode(b"f" * 32).decode())
    assert load_key(str(key_file)) == b"f" * 32
    key_file.write_text("c2hvcnQ=")
    with pytest.raises(ValueError, match="32 bytes"):
        load_key(str(key_file))


# -- compaction -----------------------------------------------------------------------------------


def test_compact_then_continue_from_its_output(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="Fix the parser in src/parse.py")
    second = client.responses.create(model="m", previous_response_id=first.id, input="Also add tests")
    compacted = client.responses.compact(model="m", previous_response_id=second.id)
    assert compacted.object == "response.compaction"
    kinds = [item.type for item in compacted.output]
    assert kinds == ["message", "message", "compaction"]
    texts = [dump(item)["content"][0]["text"] for item in compacted.output[:2]]
    assert texts == ["Fix the parser in src/parse.py", "Also add tests"]
    assert compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0
    # SDK 3.54 requires cache_write_tokens: the summarization prompt, computed in full.
    assert compacted.usage.input_tokens_details.cache_write_tokens == compacted.usage.input_tokens
    compaction = dump(compacted.output[-1])
    assert compaction["encrypted_content"].startswith("v1.")
    # Continue statelessly from the compacted window: the summary is read as a user message.
    window = [dump(item) for item in compacted.output]
    shown = client.responses.create(
        model="m", store=False, input=[*window, {"role": "user", "content": "#prompt"}]
    )
    assert SUMMARY_PREFIX.strip() in shown.output_text
    assert "the last message said: Also add tests" in shown.output_text
    # A compaction blob is not a reasoning blob, and a tampered one is refused.
    compaction["encrypted_content"] = _tampered(compaction["encrypted_content"])
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="m", store=False, input=[*window[:2], compaction])
    assert bad.value.code == "invalid_encrypted_content" and bad.value.param == "input[2].encrypted_content"


def test_compact_requires_a_model(http) -> None:  # type: ignore[no-untyped-def]
    # As the SDK's ResponseCompactParams and the Open Responses case compact-missing-model require.
    reply = http.post("/v1/responses/compact", json={"input": "Compact this conversation."})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "model"


def test_automatic_compaction_under_a_small_threshold(client: openai.OpenAI, http) -> None:  # type: ignore[no-untyped-def]
    first = client.responses.create(model="m", input="Plan the refactor of module X")
    body = {
        "model": "m",
        "previous_response_id": first.id,
        "input": "#prompt",
        "context_management": [{"type": "compaction", "compact_threshold": 50}],
    }
    uncompacted = client.responses.input_tokens.count(
        model="m", previous_response_id=first.id, input="#prompt"
    )
    events = stream_events(http, body)
    final = check_stream(events)
    types = [e["type"] for e in events]
    assert types[2:5] == [
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
    ]
    assert final["output"][0]["type"] == "compaction" and final["output"][0]["encrypted_content"].startswith(
        "v1."
    )
    shown = final["output"][-1]["content"][0]["text"]
    assert SUMMARY_PREFIX.strip() in shown and "the last message said: #prompt" in shown
    assert shown.count("Plan the refactor of module X") == 1  # the user message, not the assistant's echo
    # Usage counts the summarization run and the response's own generation.
    assert final["usage"]["input_tokens"] > uncompacted.input_tokens
    # The stored conversation continues from the compacted window.
    after = client.responses.create(model="m", previous_response_id=final["id"], input="#prompt")
    assert SUMMARY_PREFIX.strip() in after.output_text
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="m", input="x", context_management=[{"type": "other"}])  # type: ignore[list-item, typeddict-item]
    assert bad.value.param == "context_management[0].type"


async def test_agents_sdk_compaction_session(echo_server) -> None:  # type: ignore[no-untyped-def]
    """The Agents SDK's OpenAIResponsesCompactionSession compacts through /v1/responses/compact and continues."""
    agents = pytest.importorskip("agents")
    from agents.memory import OpenAIResponsesCompactionSession

    agents.set_tracing_disabled(True)
    async with openai.AsyncOpenAI(base_url=echo_server.base_url + "/v1", api_key="unused") as client:
        session = OpenAIResponsesCompactionSession(
            "compacting",
            agents.SQLiteSession("compacting"),
            client=client,
            model="gpt-4.1",  # the session insists on an OpenAI model name; the server serves its own
            should_trigger_compaction=lambda context: True,
        )
        agent = agents.Agent(
            name="coder", model=agents.OpenAIResponsesModel(model="gpt-oss", openai_client=client)
        )
        first = await agents.Runner.run(agent, "Fix the bug in a.py", session=session)
        assert first.final_output == "Fix the bug in a.py"
        assert [item.get("type") for item in await session.get_items()] == ["message", "compaction"]
        shown = (await agents.Runner.run(agent, "#prompt", session=session)).final_output
    assert "<|start|>user<|message|>Fix the bug in a.py<|end|>" in shown
    assert SUMMARY_PREFIX.strip() in shown and shown.endswith("#prompt<|end|><|start|>assistant")
