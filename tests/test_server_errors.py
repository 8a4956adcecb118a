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
    (b'{"input": "x", "tools": "all"}', "tools", "Invalid value"),
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
    (b'{"input": "x", "tools": [{"type": "computer_use_preview"}]}', "tools[0].type", "not supported"),
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
    assert_error(http.put("/v1/responses"), 405)


def test_context_window_is_enforced(echo_server, http: httpx.Client) -> None:  # type: ignore[no-untyped-def]
    long_input = "word " * (echo_server.executor.max_seq_len + 10)
    error = assert_error(
        http.post("/v1/responses", json={"input": long_input}), 400, "input", "context window"
    )
    assert error["code"] == "context_length_exceeded"
