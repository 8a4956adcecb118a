"""``/openapi.json`` that tells the truth about the server.

FastAPI documents only what it sees (a 422 no route sends, no error schema, no ``POST
/v1/responses``, which is served outside it). :func:`build_openapi` starts from its document and
states every route with its request body and query parameters, each 200 body as the ``openai``
package's types (``text/event-stream`` for streams), each error status with the error envelope, and,
in ``info``, what any route may answer (401, 503, the connection-level 400/408/414/431/503).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from openai.types import Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseItemList, ResponseStreamEvent
from pydantic import BaseModel, RootModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ..request import ChatRequest, MessagesRequest, ResponsesRequest

__all__ = ["ANTHROPIC_ERROR_SCHEMA", "ERROR_SCHEMA", "build_openapi", "install_openapi"]

_REF = "#/components/schemas/{model}"


class _StreamEvent(RootModel[ResponseStreamEvent]):
    """One stream event (a union): a model, so its schema shares the definitions of the others."""


#: The OpenAI error envelope.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "ErrorResponse",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "additionalProperties": False,
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}

#: Anthropic's error envelope, what every answer under ``/v1/messages`` that is not a 200 carries.
ANTHROPIC_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "AnthropicErrorResponse",
    "required": ["type", "error"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "additionalProperties": False,
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}

_ERRORS = {
    "400": "The request is invalid (a malformed id included): the message names the field (`param`).",
    "404": "No stored response has this id (or the route does not exist).",
    "413": "The request body is larger than the server accepts.",
    "429": "A server-wide budget is used up (running background responses): retry later.",
    "500": "The generation failed (a chat completion without streaming; streamed, it is an error chunk).",
}

_CONNECTION_ERRORS = (
    "With --api_key, any /v1 request without `Authorization: Bearer KEY` is answered 401 "
    "(`invalid_api_key`); any request that needs the response store while it is unreachable is answered "
    "503 (`service_unavailable`). "
    "Any request may also be answered, with the same error envelope and `connection: close`, by the "
    "server's HTTP limits: 400 (not valid HTTP), 408 (head or body not received in time), 414 (URL too "
    "long), 431 (headers too large or too many), 503 with `Retry-After` (connection limit reached, "
    "overall or for one client address)."
)


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(status: str) -> dict[str, Any]:
    return _json({"$ref": "#/components/schemas/ErrorResponse"}, _ERRORS[status])


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _create_operation() -> dict[str, Any]:
    return {
        "summary": "Create a model response",
        "operationId": "create_response",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref("ResponsesRequest")}},
        },
        "responses": {
            "200": {
                "description": "The response (`stream: false`), or its Server-Sent Events (`stream: true`).",
                "content": {
                    "application/json": {"schema": _ref("Response")},
                    "text/event-stream": {
                        # One SSE event, as OpenAPI 3.2 describes them: `data` holds the event's JSON.
                        "schema": {
                            "type": "object",
                            "required": ["event", "data"],
                            "properties": {
                                "event": {"type": "string", "description": "The event's `type`."},
                                "data": {
                                    "type": "string",
                                    "contentMediaType": "application/json",
                                    "contentSchema": _ref("ResponseStreamEvent"),
                                },
                            },
                            "description": "The last event is response.completed, response.incomplete "
                            "or response.failed.",
                        }
                    },
                },
            },
            "400": _error("400"),
            "404": _error("404"),
            "413": _error("413"),
            "429": _error("429"),
        },
    }


#: The ``anthropic`` SDK's ``Message``, as far as stated here (the server does not depend on that package).
_MESSAGE = {
    "type": "object",
    "required": ["id", "type", "role", "content", "model", "stop_reason", "stop_sequence", "usage"],
    "properties": {
        "id": {"type": "string"},
        "type": {"const": "message"},
        "role": {"const": "assistant"},
        "content": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"enum": ["text", "thinking", "redacted_thinking", "tool_use"]}},
            },
        },
        "model": {"type": "string"},
        "stop_reason": {"enum": ["end_turn", "tool_use", "max_tokens", "stop_sequence"]},
        "stop_sequence": {"type": ["string", "null"]},
        "usage": {"type": "object", "required": ["input_tokens", "output_tokens"]},
    },
}
_MESSAGES_ERRORS = {
    "400": "The request is invalid: the message names the Anthropic field.",
    "404": "No model alias matches `model` (or the route does not exist; message batches are not served).",
    "413": "The request body is larger than the server accepts.",
    "500": "The generation failed (without streaming; streamed, it is an `error` event).",
}


def _messages_operation(counting: bool) -> dict[str, Any]:
    """``POST /v1/messages`` or ``/v1/messages/count_tokens`` (docs/anthropic-messages.md#anthropic-messages)."""
    errors = {
        status: _json(_ref("AnthropicErrorResponse"), text)
        for status, text in _MESSAGES_ERRORS.items()
        if status != "500" or not counting
    }
    if counting:
        ok = _json(
            {
                "type": "object",
                "required": ["input_tokens"],
                "properties": {"input_tokens": {"type": "integer"}},
            },
            "The length of the prompt the same body renders.",
        )
    else:
        ok = _json(_MESSAGE, "The message (`stream: false`), or its Messages events (`stream: true`).")
        ok["content"]["text/event-stream"] = {
            "schema": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
                "description": "message_start, ping, content blocks, message_delta, message_stop; or an error event.",
            }
        }
    return {
        "summary": "Count a message's input tokens" if counting else "Create an Anthropic message",
        "operationId": "count_message_tokens" if counting else "create_message",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref("MessagesRequest")}},
        },
        "responses": {"200": ok} | errors,
    }


def _chat_operation() -> dict[str, Any]:
    return {
        "summary": "Create a chat completion (the same model, prompt and constraints as /v1/responses)",
        "operationId": "create_chat_completion",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref("ChatRequest")}},
        },
        "responses": {
            "200": {
                "description": "The completion (`stream: false`), or its chunks (`stream: true`): `data: <chunk>` "
                'lines, an `{"error": ...}` chunk if the generation fails, then `data: [DONE]`.',
                "content": {
                    "application/json": {"schema": _ref("ChatCompletion")},
                    "text/event-stream": {
                        "schema": {
                            "type": "object",
                            "required": ["data"],
                            "properties": {
                                "data": {
                                    "type": "string",
                                    "contentMediaType": "application/json",
                                    "contentSchema": _ref("ChatCompletionChunk"),
                                }
                            },
                        }
                    },
                },
            },
            "400": _error("400"),
            "413": _error("413"),
            "500": _error("500"),
        },
    }


_STATS = {"type": "object", "additionalProperties": True, "description": "Server metrics and store usage."}
_HEALTH = {
    "type": "object",
    "required": ["status", "executor", "frontend"],
    "description": "200 with status `ok` while the engine passes its health check; 503 with status `unavailable` "
    "and an `error` (`engine_unavailable`) once it is dead (TensorRT-LLM's `BaseLLM._check_health`).",
    "properties": {
        "status": {"enum": ["ok", "unavailable"]},
        "error": {"type": "object"},
        "executor": {"type": "string"},
        # Which of a group's frontends answered (--num_serve_frontends; 0: the launcher, or a server alone).
        "frontend": {"type": "integer", "minimum": 0},
    },
}
_DELETED = {
    "type": "object",
    "required": ["id", "object", "deleted"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "response.deleted"},
        "deleted": {"const": True},
    },
}
_CONVERSATION = {
    "type": "object",
    "required": ["id", "object", "created_at", "metadata"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "conversation"},
        "created_at": {"type": "integer"},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
_CONVERSATION_DELETED = {
    "type": "object",
    "required": ["id", "object", "deleted"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "conversation.deleted"},
        "deleted": {"const": True},
    },
}
_ITEM = {
    "type": "object",
    "required": ["id", "type"],
    "properties": {"id": {"type": "string"}, "type": {"type": "string"}},
}
_ITEM_LIST = {
    "type": "object",
    "required": ["object", "data", "first_id", "last_id", "has_more"],
    "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": _ITEM},
        "first_id": {"type": ["string", "null"]},
        "last_id": {"type": ["string", "null"]},
        "has_more": {"type": "boolean"},
    },
}
_PAGE = [
    _query("order", {"enum": ["asc", "desc"], "default": "desc"}, "Order of the items."),
    _query("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "Page size."),
    _query("after", {"type": "string"}, "List items after this item id."),
]
_METRICS = {"type": "string", "description": "Prometheus text exposition format."}
#: Routes whose 200 is not JSON (or not only JSON): (path, method) -> extra media types.
_MEDIA: dict[tuple[str, str], dict[str, Any]] = {
    ("/metrics", "get"): {"text/plain": {"schema": _METRICS}},
    ("/v1/responses/{response_id}", "get"): {
        "text/event-stream": {
            "schema": {"type": "string", "description": "A background response's events (stream=true)."}
        }
    },
}
_MODELS = {
    "type": "object",
    "required": ["object", "data"],
    "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": _ref("Model")}},
}

_INPUT_TOKENS = {
    "type": "object",
    "required": ["object", "input_tokens"],
    "properties": {
        "object": {"const": "response.input_tokens"},
        "input_tokens": {"type": "integer", "minimum": 1},
    },
}
# The SDK's CompactedResponse types its output as output items, but the user messages it holds are
# input messages (role user, input_text parts), as OpenAI sends them; so the schema is stated here.
_COMPACTED = {
    "type": "object",
    "required": ["id", "object", "created_at", "output", "usage"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "response.compaction"},
        "created_at": {"type": "integer"},
        "output": {
            "type": "array",
            "description": "The user messages verbatim, then one `compaction` item (encrypted summary).",
            "items": {
                "type": "object",
                "required": ["id", "type"],
                "properties": {"type": {"enum": ["message", "compaction"]}},
            },
        },
        "usage": {"type": "object", "required": ["input_tokens", "output_tokens", "total_tokens"]},
    },
}
#: Routes that take the create body (``ResponsesRequest``), read by hand.
_CREATE_BODY_ROUTES = {("/v1/responses/input_tokens", "post"), ("/v1/responses/compact", "post")}

#: (path, method) -> what to state about it: its 200 schema, error statuses, extra query parameters.
_ROUTES: dict[tuple[str, str], tuple[dict[str, Any], tuple[str, ...], list[dict[str, Any]]]] = {
    ("/v1/responses/{response_id}", "get"): (
        _ref("Response"),
        ("400", "404"),
        [
            _query("stream", {"type": "boolean"}, "Stream a background response's events (SSE)."),
            _query(
                "starting_after", {"type": "integer", "minimum": 0}, "Only events after this sequence number."
            ),
        ],
    ),
    ("/v1/responses/{response_id}/cancel", "post"): (_ref("Response"), ("400", "404"), []),
    ("/v1/conversations", "post"): (_CONVERSATION, ("400",), []),
    ("/v1/conversations/{conversation_id}", "get"): (_CONVERSATION, ("400", "404"), []),
    ("/v1/conversations/{conversation_id}", "post"): (_CONVERSATION, ("400", "404"), []),
    ("/v1/conversations/{conversation_id}", "delete"): (_CONVERSATION_DELETED, ("400", "404"), []),
    ("/v1/conversations/{conversation_id}/items", "get"): (_ITEM_LIST, ("400", "404"), _PAGE),
    ("/v1/conversations/{conversation_id}/items", "post"): (_ITEM_LIST, ("400", "404"), []),
    ("/v1/conversations/{conversation_id}/items/{item_id}", "get"): (_ITEM, ("400", "404"), []),
    ("/v1/conversations/{conversation_id}/items/{item_id}", "delete"): (_CONVERSATION, ("400", "404"), []),
    ("/metrics", "get"): (_METRICS, (), []),
    ("/v1/responses/{response_id}", "delete"): (_DELETED, ("400", "404"), []),
    ("/v1/responses/{response_id}/input_items", "get"): (
        _ref("ResponseItemList"),
        ("400", "404"),
        [
            _query("order", {"enum": ["asc", "desc"], "default": "desc"}, "Order of the items."),
            _query("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "Page size."),
            _query("after", {"type": "string"}, "List items after this item id."),
        ],
    ),
    ("/v1/responses/input_tokens", "post"): (_INPUT_TOKENS, ("400", "404", "413"), []),
    ("/v1/responses/compact", "post"): (_COMPACTED, ("400", "404", "413"), []),
    ("/v1/models", "get"): (_MODELS, (), []),
    ("/v1/models/{model_id}", "get"): (_ref("Model"), ("404",), []),
    ("/stats", "get"): (
        _STATS,
        (),
        [
            _query(
                "reset", {"type": "string"}, "`1` resets the counters after reading them (needs the API key)."
            )
        ],
    ),
    ("/health", "get"): (_HEALTH, (), []),
}


def build_openapi(api: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of the whole server (FastAPI's routes and ``POST /v1/responses``)."""
    document = get_openapi(title=api.title, version=api.version, routes=api.routes)
    document["info"]["description"] = (
        "OpenAI Responses API for gpt-oss on TensorRT-LLM. " + _CONNECTION_ERRORS
    )
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (ResponsesRequest, "validation"),
        (ChatRequest, "validation"),
        (MessagesRequest, "validation"),
        (ChatCompletion, "serialization"),
        (ChatCompletionChunk, "serialization"),
        (Response, "serialization"),
        (ResponseItemList, "serialization"),
        (Model, "serialization"),
        (_StreamEvent, "serialization"),
    ]
    _, schemas = models_json_schema(models, ref_template=_REF)
    components = document.setdefault("components", {})
    defs = schemas["$defs"]
    defs["ResponseStreamEvent"] = defs.pop(_StreamEvent.__name__)  # referenced only by our _create_operation
    components["schemas"] = {
        **defs,
        "ErrorResponse": ERROR_SCHEMA,
        "AnthropicErrorResponse": ANTHROPIC_ERROR_SCHEMA,
    }
    paths: dict[str, dict[str, Any]] = document.setdefault("paths", {})
    for path, operations in paths.items():
        for method, operation in operations.items():
            stated = _ROUTES.get((path, method))
            if stated is None:
                raise RuntimeError(f"{method.upper()} {path} is not described in server/openapi.py")
            ok, errors, query = stated
            if (path, method) == ("/metrics", "get"):
                success: dict[str, Any] = {
                    "description": "Successful Response",
                    "content": dict(_MEDIA[(path, method)]),
                }
            else:
                success = _json(ok, "Successful Response")
                success["content"].update(_MEDIA.get((path, method), {}))
            operation["responses"] = {"200": success} | {status: _error(status) for status in errors}
            operation["parameters"] = operation.get("parameters", []) + query
            if (path, method) in _CREATE_BODY_ROUTES:
                operation["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("ResponsesRequest")}},
                }
    paths.setdefault("/v1/responses", {})["post"] = _create_operation()
    paths.setdefault("/v1/chat/completions", {})["post"] = _chat_operation()
    paths.setdefault("/v1/messages", {})["post"] = _messages_operation(counting=False)
    paths.setdefault("/v1/messages/count_tokens", {})["post"] = _messages_operation(counting=True)
    return document


def install_openapi(api: FastAPI) -> None:
    """Serve :func:`build_openapi`'s document (built once, on first request) at ``/openapi.json``."""
    document: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not document:
            document.update(build_openapi(api))
        return document

    api.openapi = openapi  # type: ignore[method-assign]
