"""Tool schemas as gpt-oss reads them: one golden rendering per JSON Schema construct.

Each schema goes through the adapter (``schema.for_rendering`` then openai-harmony's own
TypeScript renderer); the expected text was reviewed by hand against the syntax of
openai-harmony's ``json_schema_to_typescript`` and the gpt-oss guide.
"""

from __future__ import annotations

from typing import Any

import pytest

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request

GOLDEN: dict[str, tuple[dict[str, Any], str]] = {
    "ref_defs": (
        {
            "type": "object",
            "properties": {"home": {"$ref": "#/$defs/Addr"}},
            "required": ["home"],
            "$defs": {
                "Addr": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
            },
        },
        "type f = (_: {\nhome: {\n    city: string,\n    },\n}) => any;",
    ),
    "recursive_ref": (
        {
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                }
            },
        },
        "type f = (_: {\n// type Node\nroot?:     // type Node\n{\n    children?: Node[],\n    name?: string,\n    },\n}) => any;",
    ),
    "any_of": (
        {
            "type": "object",
            "properties": {"id": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
            "required": ["id"],
        },
        "type f = (_: {\nid:\n | string\n | number\n,\n}) => any;",
    ),
    "one_of": (
        {
            "type": "object",
            "properties": {
                "shape": {
                    "oneOf": [
                        {"type": "object", "properties": {"r": {"type": "number"}}},
                        {"type": "object", "properties": {"w": {"type": "number"}}},
                    ]
                }
            },
        },
        "type f = (_: {\nshape?:\n | {\n   r?: number,\n   }\n | {\n   w?: number,\n   }\n,\n}) => any;",
    ),
    "nullable": (
        {
            "type": "object",
            "properties": {
                "a": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "b": {"type": ["integer", "null"]},
                "c": {"type": "string", "nullable": True},
            },
        },
        "type f = (_: {\na?: string | null,\nb?: number | null,\nc?: string | null,\n}) => any;",
    ),
    "enum_const": (
        {
            "type": "object",
            "properties": {
                "unit": {"type": "string", "enum": ["c", "f"]},
                "level": {"enum": [1, 2, 3]},
                "kind": {"const": "fixed"},
            },
        },
        'type f = (_: {\nkind?: "fixed",\nlevel?: 1 | 2 | 3,\nunit?: "c" | "f",\n}) => any;',
    ),
    "defaults_descriptions": (
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer", "description": "How many.", "default": 3},
                "q": {"type": "string", "description": "Query.", "default": "x"},
            },
        },
        'type f = (_: {\n// How many.\nn?: number, // default: 3\n// Query.\nq?: string, // default: "x"\n}) => any;',
    ),
    "nested_arrays": (
        {
            "type": "object",
            "properties": {
                "rows": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"cells": {"type": "array", "items": {"type": "string"}}},
                        "required": ["cells"],
                    },
                }
            },
            "required": ["rows"],
        },
        "type f = (_: {\nrows: {\n    cells: string[],\n    }[],\n}) => any;",
    ),
    "additional_properties": (
        {
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "counts": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "number"}},
                },
            },
        },
        "type f = (_: {\ncounts?: Record<string, number[]>,\nlabels?: Record<string, string>,\n}) => any;",
    ),
}


def rendered(adapter: HarmonyAdapter, encoding: HarmonyEncoding, schema: dict[str, Any]) -> str:
    body = {"input": "x", "tools": [{"type": "function", "name": "f", "parameters": schema}]}
    prompt = adapter.build_prompt(parse_request(body))
    assert prompt.developer is not None
    text = encoding.decode(prompt.developer.tokens)
    return text.split("namespace functions {\n\n")[1].split("\n\n} // namespace functions")[0]


@pytest.mark.parametrize("construct", list(GOLDEN))
def test_schema_construct_renders_as_golden(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding, construct: str
) -> None:
    schema, expected = GOLDEN[construct]
    assert rendered(adapter, encoding, schema) == expected


def test_schemas_harmony_already_knows_render_unchanged(
    adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """For what openai-harmony renders itself, the rewrite changes nothing (no drift from its syntax)."""
    from trtllm_responses.harmony.schema import for_rendering

    plain = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": "array", "items": {"type": "integer"}},
            "opts": {"type": "object", "properties": {"fast": {"type": "boolean"}}, "required": ["fast"]},
        },
        "required": ["city"],
    }
    assert for_rendering(plain) == plain
