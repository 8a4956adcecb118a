"""``tool_search`` (issue 32): a client-run search tool, ``tool_search_call``/``tool_search_output`` items and
deferred tools, through a real server and the openai SDK (strict validation), streamed and stored."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from support.stream_grammar import check_stream

SEARCH = {"type": "tool_search", "execution": "client", "description": "Find the tools you need."}
LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Look a customer up",
    "defer_loading": True,
    "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
}
CRM = {"type": "namespace", "name": "crm", "description": "CRM tools", "tools": [LOOKUP]}
VISIBLE = {"type": "function", "name": "visible", "parameters": {"type": "object", "properties": {}}}
TOOLS: list[Any] = [SEARCH, VISIBLE, CRM]


def _strict(echo_server) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    return openai.OpenAI(
        base_url=echo_server.base_url + "/v1",
        api_key="unused",
        max_retries=0,
        _strict_response_validation=True,
    )


def _found(call_id: str | None) -> dict[str, Any]:
    """The tool_search_output a client answers a search with: the crm namespace (its deferred lookup)."""
    return {"type": "tool_search_output", "call_id": call_id, "execution": "client", "tools": [CRM]}


def test_deferred_tools_are_not_shown_until_a_search_loads_them(echo_server) -> None:  # type: ignore[no-untyped-def]
    with _strict(echo_server) as client:
        shown = client.responses.create(model="m", input="#prompt", tools=TOOLS).output_text
        assert "type tool_search = " in shown and "Find the tools you need." in shown
        assert "type visible = " in shown and "lookup" not in shown and "namespace crm" not in shown
        # A hosted tool_search (this server runs none): nothing would load them, so deferred tools are shown.
        hosted = client.responses.create(model="m", input="#prompt", tools=[{"type": "tool_search"}, CRM])
        assert "type lookup = " in hosted.output_text and "tool_search" not in hosted.output_text


def test_a_search_call_streams_and_is_stored_as_the_sdk_types_it(echo_server) -> None:  # type: ignore[no-untyped-def]
    """``#search Q`` (the echo's rule) calls functions.tool_search: a ``tool_search_call`` item (its arguments
    an object, ``execution: client``, a call_id), added then done with no delta events, ending the turn."""
    with _strict(echo_server) as client:
        with client.responses.create(
            model="m", input="#search customer lookup", tools=TOOLS, stream=True
        ) as s:
            events = [e.model_dump(mode="json", exclude_unset=True) for e in s]
        final = check_stream(events)
        call = final["output"][-1]
        assert call["type"] == "tool_search_call" and call["id"].startswith("tsc_")
        assert call["arguments"] == {"query": "customer lookup"} and call["execution"] == "client"
        assert call["status"] == "completed" and call["call_id"].startswith("call_")
        kinds = [e["type"] for e in events if e.get("output_index") == len(final["output"]) - 1]
        assert kinds == ["response.output_item.added", "response.output_item.done"]
        added = next(
            e for e in events if e["type"] == "response.output_item.added" and e["output_index"] == 1
        )
        assert added["item"]["status"] == "in_progress" and added["item"]["arguments"] == {}
        stored = client.responses.retrieve(final["id"])
        assert (
            stored.output[-1].type == "tool_search_call" and stored.output[-1].arguments == call["arguments"]
        )  # type: ignore[union-attr]


@pytest.mark.parametrize("replayed", [False, True], ids=["previous_response_id", "stateless replay"])
def test_the_model_reads_what_was_found_and_calls_it(echo_server, replayed: bool) -> None:  # type: ignore[no-untyped-def]
    """The client's tool_search_output: the model reads the tools found (as JSON from functions.tool_search) and
    may call them; the echo calls the first one found. Its call is a namespaced function_call, and the tool
    stays callable in later turns (the conversation keeps what was loaded), stored or replayed."""
    with _strict(echo_server) as client:
        first = client.responses.create(model="m", input="#search customer lookup", tools=TOOLS)
        call = first.output[-1]
        assert call.type == "tool_search_call"
        found = _found(call.call_id)
        if replayed:
            history = [{"role": "user", "content": "#search customer lookup"}]
            history += [item.model_dump(mode="json", exclude_none=True) for item in first.output]
            second = client.responses.create(model="m", input=[*history, found], tools=TOOLS, store=False)
        else:
            second = client.responses.create(
                model="m", previous_response_id=first.id, input=[found], tools=TOOLS
            )
        lookup = second.output[-1]
        assert lookup.type == "function_call" and (lookup.namespace, lookup.name) == ("crm", "lookup")  # type: ignore[union-attr]
        assert lookup.arguments == '{"who":"lookup"}'  # type: ignore[union-attr]
        output = {"type": "function_call_output", "call_id": lookup.call_id, "output": "Ada, since 1843"}  # type: ignore[union-attr]
        if replayed:
            done = [*history, found, *(i.model_dump(mode="json", exclude_none=True) for i in second.output)]
            third = client.responses.create(model="m", input=[*done, output], tools=TOOLS, store=False)
        else:
            third = client.responses.create(
                model="m", previous_response_id=second.id, input=[output], tools=TOOLS
            )
        assert third.output_text == "crm.lookup returned: Ada, since 1843"
        # Later, a call to the loaded tool is still a crm.lookup function_call (not an unknown namespace).
        fourth = client.responses.create(
            model="m",
            previous_response_id=third.id if not replayed else None,
            input='call crm.lookup {"who": "Grace"}'
            if not replayed
            else [
                *done,
                output,
                *(i.model_dump(mode="json", exclude_none=True) for i in third.output),
                {"role": "user", "content": 'call crm.lookup {"who": "Grace"}'},
            ],
            tools=TOOLS,
            store=not replayed,
        )
        again = fourth.output[-1]
        assert again.type == "function_call" and (again.namespace, again.name) == ("crm", "lookup")  # type: ignore[union-attr]


def test_what_a_search_found_is_what_the_model_reads(echo_server) -> None:  # type: ignore[no-untyped-def]
    with _strict(echo_server) as client:
        first = client.responses.create(model="m", input="#search x", tools=TOOLS)
        found = _found(first.output[-1].call_id)  # type: ignore[union-attr]
        shown = client.responses.create(
            model="m",
            previous_response_id=first.id,
            input=[found, {"role": "user", "content": "#prompt"}],
            tools=TOOLS,
        ).output_text
        assert (
            '<|start|>functions.tool_search to=assistant<|channel|>commentary<|message|>{"loaded_tools":'
            '[{"call":"crm.lookup","description":"Look a customer up","parameters":'
        ) in shown
        assert (
            '<|channel|>commentary to=functions.tool_search <|constrain|>json<|message|>{"query":"x"}'
            in shown
        )


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "tool_search_output", "tools": "crm"}, "input[0].tools"),
        ({"type": "tool_search_output", "tools": [{"type": "function"}]}, "input[0].tools[0].name"),
        (
            {"type": "tool_search_output", "tools": [{"type": "namespace", "name": "n", "tools": 3}]},
            "input[0].tools[0].tools",
        ),
        ({"type": "tool_search_call", "call_id": "c"}, "input[0].arguments"),
    ],
)
def test_malformed_search_items_are_a_400_naming_the_field(
    echo_server, item: dict[str, Any], param: str
) -> None:  # type: ignore[no-untyped-def]
    with _strict(echo_server) as client, pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="m", input=[item], tools=TOOLS)
    assert err.value.body["param"] == param  # type: ignore[index]
