"""OpenAI's strict-mode rules at request time, and the minimal instances the echo executor answers with."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from trtllm_responses.core.errors import InvalidRequestError
from trtllm_responses.harmony.schema import MINIMAL_INSTANCE_ROOM, check_strict, minimal_instance


def obj(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


STRICT_VIOLATIONS = [
    ({"type": "array", "items": {"type": "string"}}, "root must be an object"),
    ({"anyOf": [obj({})], "type": "object"}, "root must be an object"),
    ({**obj({"a": {"type": "string"}}), "required": []}, "missing 'a'"),
    (
        {**obj({"a": {"type": "string"}}), "additionalProperties": True},
        "'additionalProperties' must be false",
    ),
    (obj({"a": {"type": "object", "properties": {}}}), "at 'p.properties.a'"),
    (obj({"a": {"allOf": [{"type": "string"}]}}), "'allOf' is not supported"),
    (obj({"a": {"not": {"type": "string"}}}), "'not' is not supported"),
    (obj({"a": {"$ref": "#/$defs/Missing"}}), "does not point into"),
    (obj({"a": {"enum": list(range(1001))}}), "at most 1000 enum values"),
    (
        obj({"a": {"anyOf": [{"type": "string"}, obj({"b": {"patternProperties": {}}})]}}),
        "p.properties.a.anyOf[1].properties.b",
    ),
]


@pytest.mark.parametrize("schema, message", STRICT_VIOLATIONS, ids=[m for _, m in STRICT_VIOLATIONS])
def test_strict_mode_violations_name_their_path(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        check_strict(schema, "p")
    assert message in info.value.message and info.value.param == "p"


def test_deep_nesting_is_refused() -> None:
    schema: dict[str, Any] = obj({"leaf": {"type": "string"}})
    for _ in range(11):
        schema = obj({"child": schema})
    with pytest.raises(InvalidRequestError, match="levels of nesting"):
        check_strict(schema, "p")


def test_a_strict_schema_with_defs_anyof_and_nullables_passes() -> None:
    node = obj({"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}})
    check_strict(
        obj(
            {"root": {"$ref": "#/$defs/Node"}, "n": {"type": ["integer", "null"]}},
            **{"$defs": {"Node": node}},
        ),
        "p",
    )


@pytest.mark.parametrize(
    "schema, expected",
    [
        ({"type": "string", "maxLength": 3}, "Hel"),
        ({"type": "string", "minLength": 8}, "Helloxxx"),
        ({"type": "integer", "minimum": 4}, 4),
        ({"type": "number", "exclusiveMinimum": 1}, 2),
        ({"type": "boolean"}, True),
        ({"enum": ["b", "a"]}, "b"),
        ({"const": 7}, 7),
        ({"type": ["null", "string"]}, "Hello"),
        ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, 0),
        ({"type": "array", "minItems": 2, "items": {"type": "integer"}}, [0, 0]),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["b"],
            },
            {"b": "Hello"},
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/X"}},
                "required": ["x"],
                "$defs": {"X": {"type": "integer"}},
            },
            {"x": 0},
        ),
    ],
)
def test_minimal_instance(schema: dict[str, Any], expected: Any) -> None:
    assert minimal_instance(schema, "Hello") == expected


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "minItems": 1e8, "items": {"type": "integer"}},
        {"type": "array", "minItems": 10**8, "items": {"type": "string", "minLength": 10**8}},
        {"type": "array", "minItems": 1000, "items": {"type": "array", "minItems": 1000, "items": {}}},
        {"type": "string", "minLength": 10**12},
    ],
)
def test_minimal_instance_is_built_within_its_room(schema: dict[str, Any]) -> None:
    # Before: minItems 1e8 built 10^8 values (the echo server hung two minutes on one request).
    started = time.perf_counter()
    instance = minimal_instance(schema, "Hello")
    assert time.perf_counter() - started < 1.0
    assert len(json.dumps(instance)) <= 4 * MINIMAL_INSTANCE_ROOM
    assert instance  # cut, not emptied


def test_minimal_instance_within_its_room_is_what_the_schema_asks() -> None:
    schema = {"type": "array", "minItems": 3, "items": {"type": "string", "minLength": 8}}
    assert minimal_instance(schema, "Hello") == ["Helloxxx"] * 3
