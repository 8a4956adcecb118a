"""SDK 3.54's request surface through the real ``openai`` client with strict response validation.

Each test drives the echo server on loopback with ``_strict_response_validation=True`` (a response that
does not fit the SDK's types raises in the client) and checks streams with ``stream_grammar``.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types.responses import ResponseUsage
from support.stream_grammar import check_stream


@pytest.fixture
def client(echo_server) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    with openai.OpenAI(
        base_url=echo_server.base_url + "/v1",
        api_key="unused",
        max_retries=0,
        _strict_response_validation=True,
    ) as c:
        yield c


def events_of(stream: Any) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", exclude_unset=True, warnings=False) for e in stream]


# -- input items ----------------------------------------------------------------------------------


def test_goal_objective_output_without_call_id(client: openai.OpenAI) -> None:
    """Codex's goals: a function_call_output with name/namespace and no call_id, read from NAMESPACE.NAME."""
    goal = {
        "type": "function_call_output",
        "name": "goal_objective",
        "namespace": "agent",
        "output": "tidy up",
    }
    response = client.responses.create(model="m", input=[{"role": "user", "content": "hi"}, goal])
    assert response.output_text == "agent.goal_objective returned: tidy up"
    shown = client.responses.create(model="m", input=[goal, {"role": "user", "content": "#prompt"}])
    assert "<|start|>agent.goal_objective to=assistant<|channel|>commentary<|message|>tidy up<|end|>" in (
        shown.output_text
    )
    items = client.responses.input_items.list(response.id, order="asc").data
    assert items[1].type == "function_call_output" and items[1].call_id is None
    assert (items[1].name, items[1].namespace) == ("goal_objective", "agent")
    # Without a namespace the tool is functions.NAME; with neither call_id nor name it is a 400.
    plain = client.responses.create(
        model="m", input=[{"type": "function_call_output", "name": "note", "output": "x"}]
    )
    assert plain.output_text == "note returned: x"
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="m", input=[{"type": "function_call_output", "output": "x"}])
    assert err.value.body["param"] == "input[0].call_id"  # type: ignore[index]


# -- usage ----------------------------------------------------------------------------------------


def test_cache_write_tokens_are_the_computed_prompt(client: openai.OpenAI) -> None:
    with client.responses.create(model="m", input="count me", stream=True) as stream:
        events = events_of(stream)
    usage = check_stream(events)["usage"]
    details = usage["input_tokens_details"]
    assert details["cache_write_tokens"] == usage["input_tokens"] - details["cached_tokens"] > 0


def test_compact_usage_has_cache_write_tokens(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="remember the tides")
    # Not strictly validated as a whole: the SDK types a compaction's output as output items, and OpenAI's
    # own compactions (like ours) hold user messages there. Its usage is validated as the SDK's ResponseUsage.
    raw = client.with_options().responses.with_raw_response.compact(model="m", previous_response_id=first.id)
    usage = ResponseUsage.model_validate(raw.http_response.json()["usage"], strict=True)
    details = usage.input_tokens_details
    assert details.cache_write_tokens == usage.input_tokens > 0 and details.cached_tokens == 0


# -- malformed ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "param", "prefix"),
    [
        (lambda c: c.responses.retrieve("abc"), "response_id", "resp"),
        (lambda c: c.responses.delete("abc"), "response_id", "resp"),
        (lambda c: c.responses.cancel("abc"), "response_id", "resp"),
        (lambda c: c.responses.input_items.list("abc"), "response_id", "resp"),
        (
            lambda c: c.responses.create(model="m", input="x", previous_response_id="abc"),
            "previous_response_id",
            "resp",
        ),
        (lambda c: c.conversations.retrieve("abc"), "conversation_id", "conv"),
        (lambda c: c.conversations.items.list("abc"), "conversation_id", "conv"),
        (lambda c: c.responses.create(model="m", input="x", conversation="abc"), "conversation", "conv"),
    ],
)
def test_malformed_ids_are_400_naming_the_prefix(
    client: openai.OpenAI, call: Any, param: str, prefix: str
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        call(client)
    body = err.value.body
    assert body == {  # type: ignore[comparison-overlap]
        "message": f"Invalid '{param}': 'abc'. Expected an ID that begins with '{prefix}'.",
        "type": "invalid_request_error",
        "param": param,
        "code": "invalid_value",
    }


def test_ids_with_other_characters_and_unknown_well_formed_ids(client: openai.OpenAI) -> None:
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError) as err:
        client.conversations.items.retrieve("msg_a.b", conversation_id=conversation.id)
    assert "contains letters, numbers, underscores, or dashes" in err.value.message
    assert err.value.body["param"] == "item_id"  # type: ignore[index]
    # Well formed but unknown stays a 404.
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_0123")
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve("msg_0123", conversation_id=conversation.id)


# -- item_reference -------------------------------------------------------------------------------


def test_item_reference_from_the_stored_chain(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="Echo me back")
    first_input = client.responses.input_items.list(first.id).data[0]
    second = client.responses.create(model="m", input="something else", previous_response_id=first.id)
    # Two responses back, by id: the referenced message is put where the reference is (last here).
    third = client.responses.create(
        model="m", previous_response_id=second.id, input=[{"type": "item_reference", "id": first_input.id}]
    )
    assert third.output_text == "Echo me back"
    listed = client.responses.input_items.list(third.id).data
    assert [(i.type, i.id) for i in listed] == [("message", first_input.id)]
    # An output item of the chain, with the SDK's type-less form of a reference.
    reply = first.output[-1]
    fourth = client.responses.create(
        model="m",
        previous_response_id=third.id,
        input=[{"id": reply.id}, {"role": "user", "content": "#prompt"}],  # type: ignore[list-item]
    )
    assert fourth.output_text.count("<|channel|>final<|message|>Echo me back<|end|>") == 3


@pytest.mark.parametrize("typed", [True, False], ids=["item_reference", "type-less"])
def test_item_reference_from_the_conversation(client: openai.OpenAI, typed: bool) -> None:
    """The SDK's ItemReference may leave ``type`` out: ``{"id": ...}`` is a reference, not a new item."""
    conversation = client.conversations.create(
        items=[{"role": "user", "content": "Quoted from the conversation"}]
    )
    item = client.conversations.items.list(conversation.id).data[0]
    reference = {"type": "item_reference", "id": item.id} if typed else {"id": item.id}
    response = client.responses.create(model="m", conversation=conversation.id, input=[reference])
    assert response.output_text == "Quoted from the conversation"


def test_item_reference_to_any_stored_item(client: openai.OpenAI) -> None:
    """As on OpenAI, a reference finds any item the store holds, outside the request's chain and conversation
    (the store's item index): another chain's input and output items, with no previous_response_id at all."""
    elsewhere = client.responses.create(model="m", input="Said in another chain")
    asked = client.responses.input_items.list(elsewhere.id).data[0]
    answer = elsewhere.output[-1]
    other = client.responses.create(model="m", input="an unrelated chain")
    response = client.responses.create(
        model="m",
        previous_response_id=other.id,
        input=[{"type": "item_reference", "id": asked.id}, {"type": "item_reference", "id": answer.id}],
    )
    listed = client.responses.input_items.list(response.id, order="asc").data
    assert [(i.type, i.id) for i in listed] == [("message", asked.id), ("message", answer.id)]
    alone = client.responses.create(
        model="m",
        input=[{"id": asked.id}, {"role": "user", "content": "#prompt"}],  # type: ignore[list-item]
        store=False,
    )
    assert "<|start|>user<|message|>Said in another chain<|end|>" in alone.output_text
    # Deleted (with the response that stored it as its own input), it is gone: the reference is a 400 naming it.
    client.responses.delete(elsewhere.id)
    client.responses.delete(response.id)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="m", input=[{"type": "item_reference", "id": asked.id}])
    assert err.value.body["code"] == "item_not_found" and err.value.body["param"] == "input[0].id"  # type: ignore[index]


def test_unknown_item_reference_is_a_400_naming_it(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="hello")
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(
            model="m",
            previous_response_id=first.id,
            input=[{"role": "user", "content": "x"}, {"type": "item_reference", "id": "msg_unknown"}],
        )
    assert err.value.body["param"] == "input[1].id"  # type: ignore[index]
    assert "msg_unknown" in err.value.message


# -- configuration_update -------------------------------------------------------------------------

CITY = {
    "type": "json_schema",
    "name": "city",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def test_configuration_update_applies_to_this_and_later_responses(client: openai.OpenAI) -> None:
    update = {"type": "configuration_update", "reasoning": {"effort": "high"}}
    first = client.responses.create(model="m", input=[update, {"role": "user", "content": "#prompt"}])
    assert "Reasoning: high" in first.output_text and first.reasoning and first.reasoning.effort == "high"
    # A later response of the chain keeps it, even when the request names another effort.
    second = client.responses.create(
        model="m", previous_response_id=first.id, input="#prompt", reasoning={"effort": "low"}
    )
    assert "Reasoning: high" in second.output_text and second.reasoning and second.reasoning.effort == "high"
    # A text format update: the responses after it answer in JSON of the schema, until replaced.
    third = client.responses.create(
        model="m",
        previous_response_id=second.id,
        input=[
            {"type": "configuration_update", "text": {"format": CITY}},
            {"role": "user", "content": "Lyon"},
        ],
    )
    assert third.output_text == '{"city":"Lyon"}' and third.text and third.text.format.type == "json_schema"
    fourth = client.responses.create(model="m", previous_response_id=third.id, input="Nice")
    assert fourth.output_text == '{"city":"Nice"}'
    back = {"type": "configuration_update", "text": {"format": {"type": "text"}}}
    fifth = client.responses.create(
        model="m", previous_response_id=fourth.id, input=[back, {"role": "user", "content": "Nice"}]
    )
    assert fifth.output_text == "Nice"


def test_configuration_update_in_a_conversation(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(
        items=[{"type": "configuration_update", "reasoning": {"effort": "low"}}]  # type: ignore[list-item]
    )
    response = client.responses.create(model="m", conversation=conversation.id, input="#prompt")
    assert (
        "Reasoning: low" in response.output_text and response.reasoning and response.reasoning.effort == "low"
    )
    kinds = [item.type for item in client.conversations.items.list(conversation.id, order="asc").data]
    assert kinds[0] == "configuration_update"


def test_configuration_update_checked(client: openai.OpenAI) -> None:
    for bad, param in (
        ({"type": "configuration_update"}, "input[0]"),
        ({"type": "configuration_update", "reasoning": {"effort": "maximal"}}, "input[0].reasoning.effort"),
        (
            {"type": "configuration_update", "text": {"format": {"type": "json_object"}}},
            "input[0].text.format.type",
        ),
    ):
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="m", input=[bad, {"role": "user", "content": "x"}])  # type: ignore[list-item]
        assert err.value.body["param"] == param  # type: ignore[index]


# -- truncation: "auto" ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_window(encoding, serve):  # type: ignore[no-untyped-def]
    """An echo server whose context window is 2048 tokens, recording each generation's prompt."""
    from support.server_harness import RecordingEcho

    running = serve(RecordingEcho(encoding, max_seq_len=2048))
    yield running
    running.stop()


def test_truncation_auto_drops_the_oldest_whole_items(small_window, encoding) -> None:  # type: ignore[no-untyped-def]
    long = "word " * 1000
    history: list[Any] = [
        {"role": "user", "content": "Look it up."},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "tide table " + long},
        {"role": "user", "content": "And then? " + long},
        {"role": "assistant", "content": "Then nothing."},
        {"role": "user", "content": "Say it once more."},
    ]
    with openai.OpenAI(
        base_url=small_window.base_url + "/v1", api_key="x", max_retries=0, _strict_response_validation=True
    ) as client:
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="m", input=history, max_output_tokens=700)
        assert err.value.code == "context_length_exceeded"
        response = client.responses.create(model="m", input=history, max_output_tokens=700, truncation="auto")
    assert response.status == "completed" and response.output_text == "Say it once more."
    assert response.truncation == "auto"
    # The first user message alone is not enough: the call goes, and its output with it (3 items).
    assert (response.model_extra or {}).get("truncated_input_messages") == 3
    prompt = encoding.decode(small_window.executor.prompts[response.id])
    assert "Look it up." not in prompt and "lookup" not in prompt and "tide table" not in prompt
    assert "And then?" in prompt and len(small_window.executor.prompts[response.id]) + 700 <= 2048


def test_truncation_auto_never_drops_the_last_user_message(small_window) -> None:  # type: ignore[no-untyped-def]
    with openai.OpenAI(base_url=small_window.base_url + "/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="m", input="word " * 3000, truncation="auto")
    assert err.value.code == "context_length_exceeded"


# -- prompt templates -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def templated(encoding, serve, tmp_path_factory):  # type: ignore[no-untyped-def]
    """An echo server with ``--prompts DIR``: prompt ``pmpt_tides`` in versions 1 and 2."""
    import json

    from support.server_harness import RecordingEcho

    folder = tmp_path_factory.mktemp("prompts")
    (folder / "pmpt_tides").mkdir()
    (folder / "pmpt_tides" / "1.json").write_text(json.dumps({"instructions": "Old version."}))
    (folder / "pmpt_tides" / "2.json").write_text(
        json.dumps(
            {
                "instructions": "You are a {{role}}.",
                "input": [{"role": "user", "content": "Tell me about {{ topic }} at {{place}}."}],
                "variables": {"role": "tide guide", "place": "Brest"},
            }
        )
    )
    (folder / "pmpt_huge").mkdir()
    (folder / "pmpt_huge" / "1.json").write_text(json.dumps({"instructions": "x" * (1 << 20)}))
    running = serve(RecordingEcho(encoding), prompts=str(folder))
    yield running
    running.stop()


def test_prompt_template_rendered_with_variables_and_defaults(templated) -> None:  # type: ignore[no-untyped-def]
    with openai.OpenAI(
        base_url=templated.base_url + "/v1", api_key="x", max_retries=0, _strict_response_validation=True
    ) as client:
        prompt = {"id": "pmpt_tides", "variables": {"topic": {"type": "input_text", "text": "neap tides"}}}
        response = client.responses.create(model="m", prompt=prompt)  # type: ignore[arg-type]
        assert response.output_text == "Tell me about neap tides at Brest."
        assert response.prompt is not None and response.prompt.id == "pmpt_tides"
        shown = client.responses.create(
            model="m",
            prompt={"id": "pmpt_tides", "version": "2", "variables": {"topic": "x", "role": "pilot"}},
            input="#prompt",
            instructions="Be brief.",
        )
        assert "You are a pilot.\n\nBe brief." in shown.output_text
        assert "Tell me about x at Brest." in shown.output_text
        old = client.responses.create(model="m", prompt={"id": "pmpt_tides", "version": "1"}, input="#prompt")
        assert "Old version." in old.output_text
        image = {"type": "input_image", "image_url": "https://x/i.png"}
        for prompt, status, param in (
            ({"id": "pmpt_nope"}, 404, "prompt.id"),
            ({"id": "pmpt_tides", "version": "9"}, 404, "prompt.version"),
            ({"id": "pmpt_tides"}, 400, "prompt.variables.topic"),  # no value, no default
            ({"id": "pmpt_tides", "variables": {"topic": image}}, 400, "input[0].content[1]"),  # text only
            ({"id": "../etc"}, 400, "prompt.id"),
            ({"id": "pmpt_huge"}, 400, "prompt"),  # over MAX_TEMPLATE_BYTES (1 MiB)
        ):
            with pytest.raises(openai.APIStatusError) as err:
                client.responses.create(model="m", prompt=prompt)  # type: ignore[arg-type]
            assert (err.value.status_code, err.value.body["param"]) == (status, param), prompt  # type: ignore[index]


def test_prompt_without_prompts_flag_is_a_400_saying_how(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="m", prompt={"id": "pmpt_tides"})
    assert "--prompts DIR" in err.value.message and err.value.body["param"] == "prompt"  # type: ignore[index]


def test_safety_identifier_and_service_tier_echoed(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="m", input="hi", safety_identifier="user-1f3a", service_tier="flex", prompt_cache_key="tides"
    )
    assert (response.safety_identifier, response.service_tier, response.prompt_cache_key) == (
        "user-1f3a",
        "flex",
        "tides",
    )
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input="hi", safety_identifier="x" * 65)


# -- stream obfuscation ---------------------------------------------------------------------------


def test_include_obfuscation_pads_every_delta(client: openai.OpenAI) -> None:
    import re

    body: dict[str, Any] = {"model": "m", "input": "#lorem 40", "stream": True}
    with client.responses.create(**body, stream_options={"include_obfuscation": True}) as stream:
        events = events_of(stream)
    check_stream(events)
    deltas = [e for e in events if e["type"].endswith(".delta")]
    assert {e["type"] for e in deltas} == {"response.reasoning_text.delta", "response.output_text.delta"}
    for event in deltas:
        noise = event["obfuscation"]
        assert re.fullmatch(r"[A-Za-z0-9]+", noise) and (len(event["delta"]) + len(noise)) % 16 == 0
    assert len({e["obfuscation"] for e in deltas}) > len(deltas) // 2, "random per event"
    assert all("obfuscation" not in e for e in events if not e["type"].endswith(".delta"))
    # Off by default (and with false): no field, nothing added to the hot path.
    for options in ({}, {"stream_options": {"include_obfuscation": False}}):
        with client.responses.create(**body, **options) as stream:
            assert all("obfuscation" not in e for e in events_of(stream))


def test_include_obfuscation_in_a_background_stream_and_its_replay(client: openai.OpenAI) -> None:
    options: dict[str, Any] = {"stream_options": {"include_obfuscation": True}}
    with client.responses.create(
        model="m", input="#lorem 5", stream=True, background=True, **options
    ) as stream:
        events = events_of(stream)
    response_id = check_stream(events)["id"]
    with client.responses.retrieve(response_id, stream=True, starting_after=0) as replay:
        replayed = events_of(replay)
    for seen in (events, replayed):
        deltas = [e for e in seen if e["type"].endswith(".delta")]
        assert deltas and all(
            len(e["obfuscation"]) + len(e["delta"]) == 16 for e in deltas if len(e["delta"]) < 16
        )


# -- verbosity, reasoning context -------------------------------------------------------------------


def test_verbosity_becomes_an_instruction_and_context_is_the_current_turn(client: openai.OpenAI) -> None:
    from trtllm_responses.adapter.adapter import VERBOSITY

    low = client.responses.create(model="m", input="#prompt", text={"verbosity": "low"}, instructions="Hi.")
    assert f"Hi.\n\n{VERBOSITY['low']}" in low.output_text and low.text and low.text.verbosity == "low"
    medium = client.responses.create(model="m", input="#prompt", text={"verbosity": "medium"})
    assert not any(sentence in medium.output_text for sentence in VERBOSITY.values())
    high = client.responses.create(
        model="m",
        input="#prompt",
        text={"verbosity": "high"},
        reasoning={"effort": "max", "context": "all_turns"},
    )
    assert VERBOSITY["high"] in high.output_text and "Reasoning: high" in high.output_text
    assert high.reasoning and (high.reasoning.effort, high.reasoning.context) == ("max", "current_turn")


# -- prompt caching -------------------------------------------------------------------------------


def test_prompt_cache_options_echoed_and_diagnostics_when_asked(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="a long shared question", prompt_cache_key="k1")
    assert first.prompt_cache_options is None and first.prompt_cache_diagnostics is None

    def diagnose(**fields: Any) -> Any:
        options = {"ttl": "12h", "comparison_response_id": first.id}
        response = client.responses.create(model="m", prompt_cache_options=options, **fields)  # type: ignore[arg-type]
        assert response.prompt_cache_options is not None and response.prompt_cache_options.ttl == "12h"
        assert response.prompt_cache_options.mode == "implicit"
        return response.prompt_cache_diagnostics

    # Continuing it: everything it held is a prefix of this prompt.
    hit = diagnose(input="and then?", previous_response_id=first.id, prompt_cache_key="k1")
    assert hit.type == "cache_hit"
    assert diagnose(input="x", prompt_cache_key="k2").reason == "prompt_cache_key_changed"
    assert diagnose(input="x", prompt_cache_key="k1", service_tier="flex").reason == "service_tier_changed"
    assert diagnose(input="x", prompt_cache_key="k1", text={"verbosity": "low"}).reason == "verbosity_changed"
    miss = diagnose(input="a long different question", prompt_cache_key="k1")
    assert miss.type == "cache_miss" and miss.reason == "input_changed"
    assert miss.comparison_reusable_tokens > 0 and miss.cache_missed_tokens > 0
    gone = client.responses.create(
        model="m",
        input="x",
        prompt_cache_options={"comparison_response_id": "resp_gone"},  # type: ignore[typeddict-item]
    )
    assert gone.prompt_cache_diagnostics is not None
    assert gone.prompt_cache_diagnostics.type == "comparison_response_not_found"
    retained = client.responses.create(model="m", input="x", prompt_cache_retention="24h")
    assert retained.prompt_cache_retention == "24h"
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="m", input="x", prompt_cache_options={"prewarm": True})
    assert err.value.body["param"] == "prompt_cache_options.prewarm"  # type: ignore[index]


async def test_item_reference_looks_no_further_than_max_chain_responses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chain walk is bounded (references.MAX_CHAIN_RESPONSES): an item further back is not found there (nor
    in this store's item index, which holds none of them, as for responses stored before the index)."""
    import orjson

    from trtllm_responses.adapter.adapter import EMPTY_HISTORY
    from trtllm_responses.core.errors import InvalidRequestError
    from trtllm_responses.request.items import parse_items
    from trtllm_responses.responses import references
    from trtllm_responses.store import StoredResponse

    class Chain:
        async def item_responses(self, item_ids: object) -> dict[str, str]:
            return {}

        async def get(self, response_id: str) -> StoredResponse | None:
            n = int(response_id.removeprefix("resp_"))
            previous = f"resp_{n - 1}" if n > 0 else None
            item = {"type": "message", "id": f"msg_{n}", "role": "user", "content": f"turn {n}"}
            body = {"id": response_id, "output": [], "previous_response_id": previous}
            return StoredResponse(
                response_id, orjson.dumps(body), (f"msg_{n}",), (orjson.dumps(item),), EMPTY_HISTORY
            )

    monkeypatch.setattr(references, "MAX_CHAIN_RESPONSES", 3)
    found, _ = await references.resolve_references(
        parse_items([{"type": "item_reference", "id": "msg_7"}]),
        store=Chain(),
        previous_response_id="resp_9",
        conversation_items=None,
    )  # type: ignore[arg-type]
    assert [item.data for item in found] == [
        {"type": "message", "id": "msg_7", "role": "user", "content": "turn 7"}
    ]
    with pytest.raises(InvalidRequestError):
        await references.resolve_references(
            parse_items([{"type": "item_reference", "id": "msg_6"}]),
            store=Chain(),
            previous_response_id="resp_9",
            conversation_items=None,
        )  # type: ignore[arg-type]


def test_compaction_trigger_compacts_before_answering(client: openai.OpenAI) -> None:
    from trtllm_responses.responses.compaction import SUMMARY_PREFIX

    first = client.responses.create(model="m", input="Plan the refactor of module X")
    with client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[{"role": "user", "content": "#prompt"}, {"type": "compaction_trigger"}],
        stream=True,
    ) as stream:
        events = events_of(stream)
    final = check_stream(events)
    assert [e["type"] for e in events][2:5] == [
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
    ]
    assert final["output"][0]["type"] == "compaction"
    assert SUMMARY_PREFIX.strip() in final["output"][-1]["content"][0]["text"]
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(
            model="m", input=[{"type": "compaction_trigger"}, {"role": "user", "content": "x"}]
        )
    assert err.value.body["param"] == "input[0]"  # type: ignore[index]
