"""Client mistakes get the OpenAI error envelope and the right status: 400 or 404, never 422 or 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest


def assert_error(
    response: httpx.Response, status: int, param: str | None = None, message: str = ""
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"] and message in body["error"]["message"]
    # One sentence a person can act on, never a validation dump.
    assert len(body["error"]["message"]) < 300 and "\n" not in body["error"]["message"]
    assert body["error"]["param"] == param
    assert body["error"]["type"] == "invalid_request_error"
    return body["error"]


BAD_BODIES = [
    (b"{oops", None, "not valid JSON"),
    (b"", None, "not valid JSON"),
    (b'"just a string"', None, "JSON object"),
    (b'{"input": 42}', "input", "Invalid value"),
    (b'{"input": "x", "stream": "yes"}', "stream", "Invalid value"),
    (b'{"input": "x", "temperature": "hot"}', "temperature", "Invalid value"),
    (b'{"input": "x", "max_output_tokens": -5}', "max_output_tokens", "Invalid value"),
    (b'{"input": "x", "tools": "all"}', "tools", "must be an array"),
    (b'{"input": [{"type": "mystery"}]}', "input[0].type", "Unknown or unsupported input item type"),
    (
        b'{"input": [{"type": "function_call_output", "call_id": "nope", "output": "1"}]}',
        "input[0].call_id",
        "No tool call found",
    ),
    (
        b'{"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]}',
        "input[0].content[0]",
        "only reads text",
    ),
    (
        b'{"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}]}',
        "input[0].content[0]",
        "only reads text",
    ),
    (b'{"input": "x", "tools": [{"type": "teleporter"}]}', "tools[0].type", "Unknown tool type"),
    # Wrong types anywhere are 400s naming the field, never 500s.
    (b'{"input": "x", "tools": [{"type": {}}]}', "tools[0].type", "must be a string"),
    (b'{"input": [{"type": {}, "role": "user", "content": "x"}]}', "input[0].type", "must be a string"),
    (b'{"input": [{"type": [], "role": "user", "content": "x"}]}', "input[0].type", "must be a string"),
    (
        b'{"input": "x", "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": 5}}',
        "tool_choice.tools",
        "Invalid value",
    ),
    (
        b'{"input": "x", "tool_choice": {"type": "allowed_tools", "tools": [{"type": "function", "name": {}}]}}',
        "tool_choice.tools[0].name",
        "must be a string",
    ),
    (b'{"input": "x", "tools": [{"type": "function", "name": {}}]}', "tools[0].name", "Invalid value"),
    (b'{"input": "x", "tools": [{"type": "function", "name": "has space"}]}', "tools[0].name", "tool name"),
    (b'{"input": "x", "tools": [{"type": "code_interpreter"}]}', "tools[0].container", "required"),
    (b'{"input": "x", "text": {"format": {"type": "yaml"}}}', "text.format.type", "Unknown text format"),
    (b'{"input": "x", "max_output_tokens": 16.5}', "max_output_tokens", "Invalid value"),
    (b'{"input": "x", "metadata": {"k": 5}}', "metadata.k", "Invalid value"),
    (b'{"input": "x", "metadata": {"' + b"k" * 65 + b'": "v"}}', "metadata", "the most is 64"),
    (b'{"input": "x", "metadata": {"k": "' + b"v" * 513 + b'"}}', "metadata.k", "the most is 512"),
    (b'{"input": []}', "input", "nothing to respond to"),
    (b'{"model": "gpt-oss"}', "input", "nothing to respond to"),
    (b'{"input": [' + b"[" * 300 + b"]" * 300 + b"]}", "input[0]" + "[0]" * 62, "levels deep"),
    (
        b'{"input": "x", "tools": [{"type": "function", "name": "f", "parameters": '
        + b'{"a": ' * 300
        + b"1"
        + b"}" * 301
        + b"]}",
        "tools[0].parameters" + ".a" * 61,
        "levels deep",
    ),
    (b'{"input": "x", "background": true, "store": false}', "background", "require store=true"),
]


@pytest.mark.parametrize("body, param, message", BAD_BODIES)
@pytest.mark.parametrize("stream", [False, True])
def test_bad_requests_are_400(
    http: httpx.Client, body: bytes, param: str | None, message: str, stream: bool
) -> None:
    if stream and body.startswith(b"{") and body.endswith(b"}") and b'"stream"' not in body:
        body = body[:-1] + b', "stream": true}'
    response = http.post("/v1/responses", content=body, headers={"content-type": "application/json"})
    assert_error(response, 400, param, message)


def test_unknown_previous_response_id_is_404(http: httpx.Client) -> None:
    response = http.post("/v1/responses", json={"input": "x", "previous_response_id": "resp_nope"})
    error = assert_error(response, 404, "previous_response_id", "resp_nope")
    assert error["code"] == "not_found"


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/v1/responses/resp_nope"),
        ("DELETE", "/v1/responses/resp_nope"),
        ("GET", "/v1/responses/resp_nope/input_items"),
    ],
)
def test_unknown_response_ids_are_404(http: httpx.Client, method: str, path: str) -> None:
    assert_error(http.request(method, path), 404, None, "resp_nope")


def test_bad_input_items_query_is_400(http: httpx.Client) -> None:
    created = http.post("/v1/responses", json={"input": "x"}).json()
    path = f"/v1/responses/{created['id']}/input_items"
    assert_error(http.get(path, params={"limit": 0}), 400, "limit")
    assert_error(http.get(path, params={"limit": "many"}), 400, "limit")
    assert_error(http.get(path, params={"order": "sideways"}), 400, "order")
    assert_error(http.get(path, params={"after": "msg_unknown"}), 400, "after")


def test_unknown_route_and_method_use_the_envelope(http: httpx.Client) -> None:
    assert_error(http.get("/v1/nothing"), 404, None, "/v1/nothing")
    # A path that only fits /v1/responses/{response_id} with what cannot be a response id names an
    # endpoint this server does not have: 404, never a 405 (a wrong method on a real path stays a 405).
    for method, path in (("POST", "/v1/responses/frobnicate"), ("PUT", "/v1/responses/unknown_endpoint")):
        error = assert_error(http.request(method, path), 404, None, path)
        assert error["code"] == "unknown_url" and method in error["message"]
    assert http.request("PUT", "/v1/responses/resp_1").status_code == 405


def test_context_window_is_enforced(echo_server, http: httpx.Client) -> None:  # type: ignore[no-untyped-def]
    long_input = "word " * (echo_server.executor.max_seq_len + 10)
    error = assert_error(
        http.post("/v1/responses", json={"input": long_input}), 400, "input", "context window"
    )
    assert error["code"] == "context_length_exceeded"
