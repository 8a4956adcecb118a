"""The app's own route table (``server/router.py``), the one body reader (``server/body.py``) and the
statuses error classes carry (``core/errors.py``), each on its own; the routes through a real server
are crossed by test_http_limits.py, test_chat_completions.py and test_messages.py."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from support.server_harness import RunningServer

from trtllm_responses.core import (
    APIError,
    HeadersTooLargeError,
    InvalidRequestError,
    MethodNotAllowedError,
    OverloadedError,
    RequestTimeoutError,
    RequestTooLargeError,
    URLTooLongError,
    status_error,
)
from trtllm_responses.server.body import BodyLimit, read_body
from trtllm_responses.server.responses import ClientGone

STATUSES = [
    (MethodNotAllowedError, 405),
    (RequestTimeoutError, 408),
    (RequestTooLargeError, 413),
    (URLTooLongError, 414),
    (HeadersTooLargeError, 431),
    (OverloadedError, 503),
]


@pytest.mark.parametrize(("cls", "status"), STATUSES)
def test_each_status_is_its_class(cls: type[APIError], status: int) -> None:
    assert cls.status_code == status
    assert "status_code" not in vars(InvalidRequestError("x"))  # carried by the class, never the instance


def test_a_405_carries_allow_and_names_the_methods() -> None:
    error = MethodNotAllowedError("PUT", "/v1/responses/resp_1", ("GET", "DELETE"))
    assert error.headers == {"Allow": "GET, DELETE"}
    assert error.message == "PUT is not allowed on /v1/responses/resp_1; use GET or DELETE."
    assert error.code == "method_not_allowed"


def test_a_default_code_yields_to_one_given() -> None:
    assert RequestTooLargeError("x").code == "request_too_large"
    assert RequestTooLargeError("x", code=None).code is None
    assert RequestTimeoutError("x", code="other").code == "other"


def test_another_status_gets_one_class() -> None:
    cls = status_error(409)
    assert cls is status_error(409) and issubclass(cls, InvalidRequestError) and cls.status_code == 409
    assert status_error(413) is RequestTooLargeError and status_error(400) is InvalidRequestError


class _Service:
    """What BodyLimit reads of the service: ``max_input_bytes`` and its check."""

    def __init__(self, max_input_bytes: int) -> None:
        self.max_input_bytes = max_input_bytes

    def check_input_size(self, size: int) -> None:
        if size > self.max_input_bytes:
            raise InvalidRequestError("too much input", param="input", code="context_length_exceeded")


def _receive(chunks: list[bytes], disconnect: bool = False) -> Any:
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1 or disconnect}
        for i, chunk in enumerate(chunks)
    ]
    if disconnect:
        messages.append({"type": "http.disconnect"})
    read = iter(messages)

    async def receive() -> dict[str, Any]:
        return next(read)

    return receive


def _read(
    chunks: list[bytes], limit: BodyLimit, declared: int | None = None, disconnect: bool = False
) -> bytes:
    headers = [(b"content-length", str(declared).encode())] if declared is not None else []
    return asyncio.run(read_body(_receive(chunks, disconnect), headers, limit))


def test_a_body_within_its_limit_is_read_whole() -> None:
    assert _read([b"ab", b"cd"], BodyLimit(4)) == b"abcd"


@pytest.mark.parametrize("declared", [None, 10])
def test_past_the_byte_bound_is_413_declared_or_read(declared: int | None) -> None:
    with pytest.raises(RequestTooLargeError):
        _read([b"abc", b"def"], BodyLimit(4), declared)


def test_the_declared_length_is_refused_before_a_byte_is_read() -> None:
    async def receive() -> dict[str, Any]:
        raise AssertionError("read")

    with pytest.raises(RequestTooLargeError):
        asyncio.run(read_body(receive, [(b"content-length", b"5")], BodyLimit(4)))


@pytest.mark.parametrize(
    ("max_input", "expected"),
    [(3, "context_length_exceeded"), (100, "request_too_large")],
)
def test_past_both_bounds_the_smaller_answers(max_input: int, expected: str) -> None:
    limit = BodyLimit(4, _Service(max_input))  # type: ignore[arg-type]
    for declared in (None, 50):
        with pytest.raises(APIError) as error:
            _read([b"x" * 50], limit, declared)
        assert error.value.code == expected


def test_a_client_gone_mid_body_is_client_gone() -> None:
    with pytest.raises(ClientGone):
        _read([b"ab"], BodyLimit(4), disconnect=True)


def test_the_table_routes_each_path(echo_server: RunningServer) -> None:
    app: Any = echo_server.app
    assert app.route("/v1/responses").path == "/v1/responses"
    assert app.route("/v1/responses/") is None  # FastAPI's: only Anthropic's paths take a trailing slash
    assert app.route("/v1/chat/completions").path == "/v1/chat/completions"
    assert app.route("/v1/messages/").handler == app.route("/v1/messages").handler
    assert app.route("/v1/messages/count_tokens/").path == "/v1/messages/count_tokens"
    for other in ("/v1/messages/batches", "/v1/messages/batches/x/results", "/v1/messagesx"):
        route = app.route(other)
        assert route.below and route.methods is None
    assert app.route("/v1/models") is None and app.route("/health") is None
    assert {route.path for route in app.routes} == {
        "/v1/responses",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages/count_tokens",
    }


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_a_table_route_answers_a_wrong_method_in_its_envelope(echo_server: RunningServer, path: str) -> None:
    with httpx.Client(base_url=echo_server.base_url, timeout=10) as client:
        response = client.get(path)
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert "x-request-id" in response.headers
    body = response.json()
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["code"] == "method_not_allowed"
