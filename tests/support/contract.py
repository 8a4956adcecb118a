"""Validation of what we send against the two contracts: the openai SDK's types and the Open Responses spec."""

from __future__ import annotations

import json
from functools import cache, lru_cache
from typing import Any

import jsonschema
from openai.types.responses import Response, ResponseOutputItem, ResponseStreamEvent
from pydantic import TypeAdapter

from support.paths import DATA

SPEC_PATH = DATA / "openresponses-openapi.json"

_event_adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
_item_adapter: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)


@lru_cache(maxsize=1)
def _spec() -> dict[str, Any]:
    return json.loads(SPEC_PATH.read_text())


@cache
def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    spec = _spec()
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": spec["components"]}
    return jsonschema.Draft202012Validator(schema)


@lru_cache(maxsize=1)
def spec_event_schemas() -> dict[str, str]:
    """Event type → spec schema name, for the event types the spec lists."""
    post = _spec()["paths"]["/responses"]["post"]
    schema = post["responses"]["200"]["content"]["text/event-stream"]["schema"]
    out = {}
    for ref in schema.get("oneOf") or schema.get("anyOf"):
        name = ref["$ref"].rsplit("/", 1)[-1]
        event_type = _spec()["components"]["schemas"][name]["properties"]["type"]["enum"][0]
        out[event_type] = name
    return out


def validate_spec(obj: dict[str, Any], schema_name: str) -> None:
    """Raise jsonschema.ValidationError unless obj matches the spec's schema."""
    errors = sorted(_validator(schema_name).iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        raise AssertionError(f"{schema_name}: {errors[0].message} at {list(errors[0].path)}")


# The spec knows function tools only, and these output item types; the SDK knows them all.
SPEC_ITEM_TYPES = {"message", "function_call", "function_call_output", "reasoning"}


def spec_view(response: dict[str, Any]) -> dict[str, Any]:
    """The part of a response the spec describes: built-in tools and their items left out."""
    text = response.get("text")
    fmt = (text or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        # The spec types the echoed schema as null; the SDK (and OpenAI) send the schema object.
        text = {**text, "format": {**fmt, "schema": None}}
    choice = response.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        functions = [t for t in choice["tools"] if t.get("type") == "function"]
        choice = {**choice, "tools": functions} if functions else choice["mode"]
    elif isinstance(choice, dict) and choice.get("type") != "function":
        # A choice naming a built-in or MCP tool (left out like the tools): what it means, a required call.
        choice = "required"
    return {
        **response,
        "tool_choice": choice,
        "text": text,
        "tools": [t for t in response["tools"] if t.get("type") == "function"],
        "output": [i for i in response["output"] if i["type"] in SPEC_ITEM_TYPES],
    }


def validate_response(obj: dict[str, Any]) -> Response:
    """A response object must be the SDK's Response and (where the spec describes it) the spec's ResponseResource."""
    validate_spec(spec_view(obj), "ResponseResource")
    return Response.model_validate(obj)


def validate_output_item(obj: dict[str, Any]) -> Any:
    """An output item must be an SDK output item (and a spec ItemField where the spec has its type)."""
    item = _item_adapter.validate_python(obj)
    if obj["type"] in ("message", "function_call", "reasoning"):
        validate_spec(obj, "ItemField")
    return item


def validate_event(obj: dict[str, Any]) -> Any:
    """A stream event must be an SDK ResponseStreamEvent, and match the spec where the spec lists its type."""
    event = _event_adapter.validate_python(obj)
    schema_name = spec_event_schemas().get(obj["type"])
    if "response" in obj:
        obj = {**obj, "response": spec_view(obj["response"])}
    if "item" in obj and obj["item"]["type"] not in SPEC_ITEM_TYPES:
        schema_name = None
    if schema_name is not None:
        validate_spec(obj, schema_name)
    return event
