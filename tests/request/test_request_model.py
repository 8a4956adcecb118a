"""The request model is faithful to the spec: nulls are absent, optional fields optional, echoes checked."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from support.server_harness import stream_events
from support.stream_grammar import check_stream

NULLS = {
    "input": "hi",
    "tools": None,
    "tool_choice": None,
    "parallel_tool_calls": None,
    "instructions": None,
    "metadata": None,
    "text": None,
    "reasoning": None,
    "max_output_tokens": None,
    "temperature": None,
    "top_p": None,
    "previous_response_id": None,
    "truncation": None,
    "store": True,
}


def test_null_means_absent(http: httpx.Client) -> None:
    response = http.post("/v1/responses", json=NULLS)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["tool_choice"] == "auto" and body["tools"] == [] and body["parallel_tool_calls"] is True
    assert body["output"][-1]["content"][0]["text"] == "hi"


def test_null_input_with_previous_response_continues(http: httpx.Client) -> None:
    first = http.post("/v1/responses", json={"input": "first"}).json()
    response = http.post("/v1/responses", json={"input": None, "previous_response_id": first["id"]})
    assert response.status_code == 200, response.text


def test_allowed_tools_without_mode_defaults_to_auto(http: httpx.Client) -> None:
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]
    choice = {"type": "allowed_tools", "tools": [{"type": "function", "name": "lookup"}]}
    response = http.post("/v1/responses", json={"input": "x", "tools": tools, "tool_choice": choice})
    assert response.status_code == 200, response.text
    assert response.json()["tool_choice"] == {**choice, "mode": "auto"}


def test_integral_floats_are_integers(http: httpx.Client) -> None:
    response = http.post("/v1/responses", json={"input": "#lorem 40", "max_output_tokens": 16.0})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["max_output_tokens"] == 16 and body["usage"]["output_tokens"] == 16


@pytest.mark.parametrize(
    "field, value, echoed",
    [
        (
            "tool_choice",
            {"type": "function", "name": "lookup", "junk": {"x": 1}},
            {"type": "function", "name": "lookup"},
        ),
        (
            "tools",
            [{"type": "web_search", "junk": 1, "search_context_size": "low"}],
            [{"type": "web_search", "search_context_size": "low"}],
        ),
        ("text", {"format": {"type": "text", "junk": True}, "junk": 2}, {"format": {"type": "text"}}),
    ],
)
def test_echo_holds_only_checked_fields(http: httpx.Client, field: str, value: Any, echoed: Any) -> None:
    body: dict[str, Any] = {"input": "x", field: value}
    if field == "tool_choice":
        body["tools"] = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    final = check_stream(stream_events(http, body))  # check_stream validates it against the spec
    assert final[field] == echoed
    assert http.get(f"/v1/responses/{final['id']}").json()[field] == echoed
