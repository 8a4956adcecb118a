"""``/openapi.json`` states every route, the request body, the real statuses and the error envelope."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
from fastapi.routing import APIRoute


@pytest.fixture(scope="module")
def document(echo_server) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=echo_server.base_url, timeout=30) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.json()


def _validator(document: dict[str, Any], ref: str) -> jsonschema.Draft202012Validator:
    """A validator of ``ref`` resolving ``#/components/...`` inside the document."""
    return jsonschema.Draft202012Validator({**document, "$ref": ref})


def _api_routes(routes: list[Any]) -> list[APIRoute]:
    """The routes FastAPI serves, through included routers (newer FastAPI keeps them nested)."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found += _api_routes(route.original_router.routes)
    return found


def test_no_422_anywhere(document: dict[str, Any]) -> None:
    text = json.dumps(document)
    assert '"422"' not in text
    assert "HTTPValidationError" not in text


def test_every_route_is_documented(echo_server, document: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    served = {
        (route.path, method.lower())
        for route in _api_routes(echo_server.app.api.routes)
        for method in route.methods
    }
    served.add(("/v1/responses", "post"))  # served by router.ResponsesApp's table, outside FastAPI
    served.add(("/v1/chat/completions", "post"))  # likewise
    served.add(("/v1/messages", "post"))  # likewise (server/dialects/messages.py)
    served.add(("/v1/messages/count_tokens", "post"))
    documented = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert documented == served


def test_create_response_is_documented(document: dict[str, Any]) -> None:
    create = document["paths"]["/v1/responses"]["post"]
    body = create["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ResponsesRequest"}
    request = document["components"]["schemas"]["ResponsesRequest"]
    assert {"input", "instructions", "tools", "stream", "previous_response_id"} <= set(request["properties"])
    assert set(create["responses"]) == {"200", "400", "404", "413", "429"}
    assert set(create["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}


def test_error_statuses_use_the_envelope(document: dict[str, Any]) -> None:
    statuses = {
        status
        for ops in document["paths"].values()
        for op in ops.values()
        for status, answer in op["responses"].items()
        if status != "200"
        and answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
    }
    assert statuses == {"400", "404", "413", "429", "500"}
    retrieve = document["paths"]["/v1/responses/{response_id}"]["get"]["responses"]
    assert set(retrieve) == {"200", "400", "404"}  # 400: stream=true of a foreground response


def test_chat_completions_is_documented(http: httpx.Client, document: dict[str, Any]) -> None:
    chat = document["paths"]["/v1/chat/completions"]["post"]
    assert chat["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ChatRequest"
    }
    request = document["components"]["schemas"]["ChatRequest"]
    assert {"messages", "tools", "tool_choice", "response_format", "n", "stop", "stream_options"} <= set(
        request["properties"]
    )
    assert set(chat["responses"]) == {"200", "400", "413", "500"}
    completion = http.post(
        "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )
    _validator(document, "#/components/schemas/ChatCompletion").validate(completion.json())
    error = http.post("/v1/chat/completions", json={"model": "m", "messages": []})
    _validator(document, "#/components/schemas/ErrorResponse").validate(error.json())
    chunk = _validator(document, "#/components/schemas/ChatCompletionChunk")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with http.stream("POST", "/v1/chat/completions", json=body) as stream:
        lines = [line[6:] for line in stream.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    for line in lines[:-1]:
        chunk.validate(json.loads(line))


def test_real_answers_match_the_document(http: httpx.Client, document: dict[str, Any]) -> None:
    error = _validator(document, "#/components/schemas/ErrorResponse")
    for response in (
        http.post("/v1/responses", json={"input": 5}),
        http.get("/v1/responses/resp_missing"),
        http.get("/v1/responses/resp_missing/input_items", params={"order": "up"}),
        http.post("/v1/responses", content=b"x" * 100, headers={"content-type": "application/json"}),
    ):
        assert response.status_code in (400, 404), response.text
        error.validate(response.json())

    created = http.post("/v1/responses", json={"input": "hello"})
    assert created.status_code == 200
    _validator(document, "#/components/schemas/Response").validate(created.json())
    items = http.get(f"/v1/responses/{created.json()['id']}/input_items")
    _validator(document, "#/components/schemas/ResponseItemList").validate(items.json())
    models = document["paths"]["/v1/models"]["get"]["responses"]["200"]["content"]["application/json"]
    jsonschema.Draft202012Validator({**document, **models["schema"]}).validate(http.get("/v1/models").json())
    input_items = document["paths"]["/v1/responses/{response_id}/input_items"]["get"]
    assert {p["name"] for p in input_items["parameters"]} == {"response_id", "order", "limit", "after"}
