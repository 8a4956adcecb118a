"""Bad field values that were 500s are 400s naming the field, on every route, and keep-alive survives them.

Before: ``tool_choice: {"type": {}}`` (or a list) raised ``TypeError: unhashable`` on create,
``/input_tokens``, ``/compact`` and WebSocket; ``max_output_tokens``/``max_tool_calls`` of 2^64 or
1e300 passed the checks and broke serializing the response (a 500, or streamed a 200 with zero
events); 300-level nesting over the conversation routes broke storing the items. FastAPI's 500 also
dropped the keep-alive connection. Each case here is sent on one connection, which must stay usable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.server_harness import RunningServer
from websockets.sync.client import connect as ws_connect

ROUTES = ["/v1/responses", "/v1/responses/input_tokens", "/v1/responses/compact"]


@pytest.fixture
def one_connection(echo_server: RunningServer) -> Iterator[httpx.Client]:
    # One pooled connection: every request below reuses it, so a dropped keep-alive shows as a new one.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(base_url=echo_server.base_url, timeout=30, limits=limits) as client:
        yield client


def _peer(client: httpx.Client, response: httpx.Response) -> Any:
    stream = response.extensions["network_stream"]
    return stream.get_extra_info("client_addr")


def _assert_400(response: httpx.Response, param: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    assert response.headers.get("connection") != "close"
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    return error


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("bad", [{"type": {}}, {"type": []}, {"type": ["function"], "name": "f"}])
def test_a_tool_choice_type_that_is_not_a_string(one_connection: httpx.Client, route: str, bad: Any) -> None:
    first = one_connection.post(route, json={"input": "hi", "tool_choice": bad})
    _assert_400(first, "tool_choice.type")
    second = one_connection.post("/v1/responses", json={"input": "again"})
    assert second.status_code == 200
    assert _peer(one_connection, first) == _peer(one_connection, second)  # the same connection


@pytest.mark.parametrize("field", ["max_output_tokens", "max_tool_calls"])
@pytest.mark.parametrize("value", [2**64, 2**63, 1e300])
@pytest.mark.parametrize("stream", [False, True])
def test_integers_past_64_bits_are_a_400_before_any_stream(
    one_connection: httpx.Client, field: str, value: Any, stream: bool
) -> None:
    body = {"input": "hi", field: value, "stream": stream}
    response = one_connection.post("/v1/responses", json=body)
    error = _assert_400(response, field)
    assert "9223372036854775807" in error["message"]
    assert response.headers["content-type"].startswith("application/json")  # not an event stream
    assert one_connection.post("/v1/responses/input_tokens", json=body).status_code == 400
    # The largest accepted value works (the window bounds generation).
    ok = one_connection.post("/v1/responses", json={"input": "fine", field: 2**63 - 1})
    assert ok.status_code == 200 and ok.json()["status"] == "completed"


def test_the_sdk_reads_a_400_naming_the_field(echo_server: RunningServer) -> None:
    with openai.OpenAI(base_url=echo_server.base_url + "/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", input="hi", max_output_tokens=2**64, stream=True)
        assert caught.value.param == "max_output_tokens"
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", input="hi", tool_choice={"type": {}})  # type: ignore[arg-type]
        assert caught.value.param == "tool_choice.type"


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"k": value}
    return value


def test_nesting_past_the_limit_on_the_conversation_routes(one_connection: httpx.Client) -> None:
    deep = _deep(300)
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "x", "extra": deep}],
    }
    created = one_connection.post("/v1/conversations", json={"items": [item]})
    error = _assert_400(created, created.json()["error"]["param"])
    assert "64 levels" in error["message"]
    conversation = one_connection.post("/v1/conversations", json={}).json()["id"]
    added = one_connection.post(f"/v1/conversations/{conversation}/items", json={"items": [item]})
    assert added.status_code == 400 and "64 levels" in added.json()["error"]["message"]
    updated = one_connection.post(f"/v1/conversations/{conversation}", json={"metadata": deep})
    assert updated.status_code == 400
    after = one_connection.get(f"/v1/conversations/{conversation}/items")
    assert after.status_code == 200 and after.json()["data"] == []
    assert _peer(one_connection, created) == _peer(one_connection, after)


def test_websocket_bad_fields_are_400_events(echo_server: RunningServer) -> None:
    url = echo_server.base_url.replace("http://", "ws://") + "/v1/responses"
    with ws_connect(url) as ws:
        for body, param in (
            ({"tool_choice": {"type": {}}}, "tool_choice.type"),
            ({"max_output_tokens": 2**64}, "max_output_tokens"),
            ({"max_tool_calls": 1e300}, "max_tool_calls"),
        ):
            ws.send(json.dumps({"type": "response.create", "input": "hi", **body}))
            event = json.loads(ws.recv(timeout=30))
            assert event["type"] == "error" and event["status"] == 400, event
            assert event["error"]["param"] == param
