"""What agent clients depend on, through a real server with the openai SDK: structured outputs, tool
choice the model must obey, namespace and custom tools, faithful tool schemas, logprobs, images in
tool outputs, request ids and the access log."""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

import httpx
import openai
import pytest
from pydantic import BaseModel
from support.custom_tools import APPLY_PATCH, TICKET
from support.server_harness import stream_events
from support.stream_grammar import check_stream
from support.trip_models import Trip

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Work with sub-agents.",
    "tools": [
        {
            "type": "function",
            "name": "spawn_agent",
            "description": "Start a sub-agent.",
            "parameters": {
                "type": "object",
                "properties": {"task": {"type": "string"}},
                "required": ["task"],
                "additionalProperties": False,
            },
            "strict": True,
        }
    ],
}


def _prompt(http: httpx.Client, body: dict[str, Any]) -> str:
    """The prompt the model saw (the echo executor's ``#prompt`` rule)."""
    response = http.post("/v1/responses", json={**body, "input": "#prompt"})
    assert response.status_code == 200, response.text
    return response.json()["output"][-1]["content"][0]["text"]


# -- structured outputs --------------------------------------------------------------------------


def test_parse_sync_sets_output_parsed(client: openai.OpenAI) -> None:
    response = client.responses.parse(model="gpt-oss", input="Lyon", text_format=Trip, tools=[WEATHER])
    assert response.output_parsed == Trip(name="Lyon", stops=[])
    assert json.loads(response.output_text) == {"name": "Lyon", "stops": []}


async def test_parse_async(aclient: openai.AsyncOpenAI) -> None:
    response = await aclient.responses.parse(model="gpt-oss", input="Nice", text_format=Trip)
    assert response.output_parsed == Trip(name="Nice", stops=[])


def test_parse_streamed(client: openai.OpenAI, http: httpx.Client) -> None:
    with client.responses.stream(model="gpt-oss", input="Metz", text_format=Trip) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.output_parsed == Trip(name="Metz", stops=[]) and "".join(deltas) == final.output_text
    # The same request's raw stream keeps the event grammar.
    fmt = {"type": "json_schema", "name": "trip", "schema": Trip.model_json_schema()}
    raw = check_stream(stream_events(http, {"input": "Metz", "text": {"format": fmt}}))
    assert json.loads(raw["output"][-1]["content"][0]["text"]) == {"name": "Metz", "stops": []}


def test_response_format_is_in_the_developer_message(http: httpx.Client) -> None:
    schema = Trip.model_json_schema()
    text = _prompt(http, {"text": {"format": {"type": "json_schema", "name": "trip", "schema": schema}}})
    assert "# Response Formats\n\n## trip\n\n" + json.dumps(schema, separators=(",", ":")) in text


def test_strict_schema_rules_are_checked_at_request_time(http: httpx.Client) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": [],
        "additionalProperties": False,
    }
    body = {
        "input": "x",
        "text": {"format": {"type": "json_schema", "name": "s", "schema": schema, "strict": True}},
    }
    error = http.post("/v1/responses", json=body).json()["error"]
    assert (
        error["param"] == "text.format.schema"
        and "'a'" in error["message"]
        and "required" in error["message"]
    )
    schema = {
        "type": "object",
        "properties": {"b": {"type": "object", "properties": {}}},
        "required": ["b"],
        "additionalProperties": False,
    }
    body["text"]["format"]["schema"] = schema
    error = http.post("/v1/responses", json=body).json()["error"]
    assert "properties.b" in error["message"] and "additionalProperties" in error["message"]


# -- tool choice -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool_choice, expected",
    [
        ("required", ("function_call", "get_weather")),
        (
            {"type": "allowed_tools", "mode": "required", "tools": [{"type": "custom", "name": "ticket"}]},
            ("custom_tool_call", "ticket"),
        ),
        ({"type": "function", "name": "spawn_agent"}, ("function_call", "spawn_agent")),
        ({"type": "custom", "name": "apply_patch"}, ("custom_tool_call", "apply_patch")),
    ],
)
def test_tool_choice_the_model_must_obey(
    client: openai.OpenAI, tool_choice: Any, expected: tuple[str, str]
) -> None:
    response = client.responses.create(
        model="gpt-oss",
        input="Paris",
        tools=[WEATHER, TICKET, APPLY_PATCH, AGENTS],  # type: ignore[list-item]
        tool_choice=tool_choice,
        text={"format": {"type": "json_object"}},  # a required call wins over the format
    )
    last = response.output[-1]
    assert (last.type, last.name) == expected  # type: ignore[union-attr]


# -- namespace and custom tools -------------------------------------------------------------------


def test_namespace_call_and_replay(client: openai.OpenAI, http: httpx.Client) -> None:
    events = stream_events(
        http, {"input": 'call multi_agent_v1.spawn_agent {"task":"tests"}', "tools": [AGENTS], "store": False}
    )
    final = check_stream(events)
    call = final["output"][-1]
    assert call["type"] == "function_call" and call["namespace"] == "multi_agent_v1"
    assert call["name"] == "spawn_agent" and json.loads(call["arguments"]) == {"task": "tests"}
    assert any(e["type"] == "response.function_call_arguments.delta" for e in events)
    replay = client.responses.create(
        model="gpt-oss",
        tools=[AGENTS],  # type: ignore[list-item]
        input=[
            {"role": "user", "content": "spawn"},
            call,
            {"type": "function_call_output", "call_id": call["call_id"], "output": "agent 7 started"},
        ],  # type: ignore[list-item]
    )
    assert replay.output_text == "multi_agent_v1.spawn_agent returned: agent 7 started"
    # The replayed call renders to the same recipient the model wrote.
    text = _prompt(http, {"tools": [AGENTS]})
    assert "## multi_agent_v1\n\n// Work with sub-agents.\nnamespace multi_agent_v1 {" in text


@pytest.mark.parametrize(
    "tool, text",
    [
        (APPLY_PATCH, "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"),
        (TICKET, "ABC-123"),
    ],
    ids=["lark", "regex"],
)
def test_custom_tool_call_streamed_and_replayed(
    client: openai.OpenAI, http: httpx.Client, tool: dict[str, Any], text: str
) -> None:
    events = stream_events(http, {"input": f"call {tool['name']} {text}", "tools": [tool, WEATHER]})
    final = check_stream(events)
    call = final["output"][-1]
    assert call["type"] == "custom_tool_call" and call["name"] == tool["name"] and call["input"] == text
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert len(deltas) > 1 and "".join(deltas) == text
    assert [e["input"] for e in events if e["type"] == "response.custom_tool_call_input.done"] == [text]
    stored = client.responses.create(
        model="gpt-oss",
        previous_response_id=final["id"],
        tools=[tool, WEATHER],  # type: ignore[list-item]
        input=[{"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "done"}],
    )
    stateless = client.responses.create(
        model="gpt-oss",
        store=False,
        tools=[tool, WEATHER],  # type: ignore[list-item]
        input=[
            {"role": "user", "content": f"call {tool['name']} {text}"},
            *[i for i in final["output"] if i["type"] != "reasoning"],
            {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "done"},
        ],  # type: ignore[list-item]
    )
    assert stored.output_text == stateless.output_text == f"{tool['name']} returned: done"


def test_custom_tool_is_declared_as_freeform_with_its_grammar(http: httpx.Client) -> None:
    text = _prompt(http, {"tools": [TICKET]})
    assert "// This tool takes freeform text, not JSON" in text
    assert (
        "// Its input must match this regex grammar:\n// [A-Z]{3}-\\d{2,4}\ntype ticket = (_: string) => any;"
        in text
    )


def test_a_bad_grammar_is_a_400(http: httpx.Client) -> None:
    tool = {
        **APPLY_PATCH,
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: x\n%ignore WS"},
    }
    error = http.post("/v1/responses", json={"input": "x", "tools": [tool]}).json()["error"]
    assert error["param"] == "tools[0].format.definition" and "%ignore" in error["message"]


def test_hosted_tools_are_echoed_not_shown(http: httpx.Client) -> None:
    body = {
        "tools": [
            {"type": "web_search"},
            {"type": "code_interpreter", "container": {"type": "auto"}},
            WEATHER,
        ]
    }
    text = _prompt(http, body)
    assert "## browser" not in text and "## python" not in text and "get_weather" in text
    response = http.post("/v1/responses", json={**body, "input": "hello"}).json()
    assert [t["type"] for t in response["tools"]] == ["web_search", "code_interpreter", "function"]
    unknown = http.post("/v1/responses", json={"input": "x", "tools": [{"type": "teleport"}]})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "tools[0].type"


# -- tool schemas ------------------------------------------------------------------------------


class Address(BaseModel):
    street: str
    zip_code: int | None = None


class Person(BaseModel):
    """Someone to contact."""

    name: str
    role: Literal["admin", "user"] = "user"
    home: Address
    past: list[Address]


def test_nested_pydantic_argument_is_rendered_with_its_fields(http: httpx.Client) -> None:
    schema = {
        "type": "object",
        "properties": {"person": {"$ref": "#/$defs/Person"}},
        "required": ["person"],
        "$defs": {},
    }
    person = Person.model_json_schema()
    schema["$defs"] = {**person.pop("$defs"), "Person": person}
    text = _prompt(http, {"tools": [{"type": "function", "name": "contact", "parameters": schema}]})
    assert "// Someone to contact.\n{" in text
    assert 'role?: "admin" | "user", // default: user' in text
    assert "zip_code?: number | null, // default: null" in text
    assert "street: string," in text and "past: {" in text and "}[]," in text
    assert ": any" not in text and "// Street" not in text  # nothing lost; no restated titles


# -- logprobs ------------------------------------------------------------------------------------


def test_logprobs_on_a_stream(http: httpx.Client) -> None:
    events = stream_events(
        http, {"input": "Hello world", "top_logprobs": 2, "include": ["message.output_text.logprobs"]}
    )
    final = check_stream(events)
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert deltas and all(len(e["logprobs"]) == 1 for e in deltas)
    first = deltas[0]["logprobs"][0]
    assert first["token"] == deltas[0]["delta"] and first["logprob"] == -0.5
    assert [t["logprob"] for t in first["top_logprobs"]] == [-0.5, -1.5]
    assert bytes(first["bytes"]).decode() == first["token"]
    done = next(e for e in events if e["type"] == "response.output_text.done")
    part = final["output"][-1]["content"][0]
    assert "".join(lp["token"] for lp in done["logprobs"]) == done["text"] == "Hello world"
    assert part["logprobs"] == [{**lp} for lp in part["logprobs"]] and len(part["logprobs"]) == len(deltas)
    assert final["top_logprobs"] == 2
    assert http.post("/v1/responses", json={"input": "x", "top_logprobs": 21}).status_code == 400


def test_no_logprobs_unless_asked(http: httpx.Client) -> None:
    events = stream_events(http, {"input": "Hello world"})
    assert all(e["logprobs"] == [] for e in events if e["type"] == "response.output_text.delta")


# -- images in tool outputs ------------------------------------------------------------------------


def test_image_in_a_tool_output_is_replaced(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="gpt-oss",
        tools=[WEATHER],  # type: ignore[list-item]
        input=[
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [
                    {"type": "input_text", "text": "see "},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
                ],
            },
        ],  # type: ignore[list-item]
    )
    assert response.output_text == "get_weather returned: see [image omitted: this model reads text only]"
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model="gpt-oss",
            input=[{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}],  # type: ignore[list-item]
        )


# -- what a user debugging a client needs --------------------------------------------------------


def test_request_id_header(http: httpx.Client) -> None:
    mine = http.post("/v1/responses", json={"input": "x"}, headers={"x-request-id": "my-trace-1"})
    assert mine.headers["x-request-id"] == "my-trace-1"
    fresh = http.post("/v1/responses", json={"input": "x"})
    assert fresh.headers["x-request-id"].startswith("req_")
    error = http.post("/v1/responses", content=b"{", headers={"x-request-id": "bad-json"})
    assert error.status_code == 400 and error.headers["x-request-id"] == "bad-json"
    assert http.get("/v1/models").headers["x-request-id"].startswith("req_")
    with http.stream(
        "POST", "/v1/responses", json={"input": "x", "stream": True}, headers={"x-request-id": "s-1"}
    ) as r:
        assert r.headers["x-request-id"] == "s-1"
        r.read()
    junk = http.post("/v1/responses", json={"input": "x"}, headers={"x-request-id": "a b"})
    assert junk.headers["x-request-id"].startswith("req_")


def test_one_access_log_line_per_request(http: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="trtllm_responses.access"):
        created = http.post(
            "/v1/responses", json={"input": "Hello"}, headers={"x-request-id": "log-1"}
        ).json()
        with http.stream(
            "POST", "/v1/responses", json={"input": "Hi", "stream": True}, headers={"x-request-id": "log-2"}
        ) as r:
            r.read()
        http.get("/v1/nothing", headers={"x-request-id": "log-3", "authorization": "Bearer sk-secret"})
    lines = {
        r.getMessage().split("request_id=")[1].split()[0]: r.getMessage()
        for r in caplog.records
        if r.name == "trtllm_responses.access"
    }
    assert set(lines) >= {"log-1", "log-2", "log-3"}
    assert sum("log-1" in r.getMessage() for r in caplog.records) == 1
    first = lines["log-1"]
    assert first.startswith("POST /v1/responses 200 ") and f"response_id={created['id']}" in first
    usage = created["usage"]
    assert (
        f"input_tokens={usage['input_tokens']} output_tokens={usage['output_tokens']} cached_tokens=0"
        in first
    )
    assert "duration_ms=" in first and "first_token_ms=" in first
    assert lines["log-2"].startswith("POST /v1/responses 200 ") and "first_token_ms=" in lines["log-2"]
    assert lines["log-3"].startswith("GET /v1/nothing 404 ")
    assert not any("sk-secret" in r.getMessage() for r in caplog.records)


def test_models_by_id(http: httpx.Client) -> None:
    model = http.get("/v1/models/gpt-oss-test")
    assert (
        model.status_code == 200
        and model.json()["id"] == "gpt-oss-test"
        and model.json()["object"] == "model"
    )
    missing = http.get("/v1/models/gpt-5").json()["error"]
    assert missing["code"] == "model_not_found" and "gpt-5" in missing["message"]
