"""JSON Schemas as gpt-oss reads them, checks of OpenAI's strict mode, and minimal instances.

:func:`for_rendering` rewrites what clients send (pydantic, zod: ``$ref``, ``anyOf``, nullable
types, non-string enums, maps) into the few words openai-harmony's renderer knows, so harmony's own
renderer writes the rendering (docs/tools.md#tools-structured-outputs-and-constraints);
:func:`check_strict` applies OpenAI's rules for ``strict: true`` schemas, naming the offending
path; :func:`minimal_instance` is the smallest value a schema accepts, the echo executor's answer
to a structured-output request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core import InvalidRequestError

__all__ = [
    "MAX_REF_DEPTH",
    "MINIMAL_INSTANCE_ROOM",
    "check_strict",
    "for_rendering",
    "minimal_instance",
    "resolve_refs",
]

#: How many ``$ref`` levels are inlined along one path before a reference renders as ``any``.
MAX_REF_DEPTH = 8
_STRICT_MAX_DEPTH = 10
_STRICT_MAX_PROPERTIES = 5000
_STRICT_MAX_ENUM = 1000
_STRICT_FORBIDDEN = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
)


def _definitions(root: Mapping[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        value = root.get(key)
        if isinstance(value, Mapping):
            defs.update(value)
    return defs


def _ref_name(ref: Any) -> str | None:
    if not isinstance(ref, str):
        return None
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return None


# -- rendering ----------------------------------------------------------------------------


def for_rendering(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten into the words openai-harmony's TypeScript renderer knows."""
    return _render_node(schema, _definitions(schema), ())


def _render_node(
    node: Any, defs: Mapping[str, Any], stack: tuple[str, ...], name: str | None = None
) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        return {}
    ref = node.get("$ref")
    if ref is not None:
        target_name = _ref_name(ref)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if target_name is None or target_name not in defs:
            return {**siblings, "description": _join(siblings.get("description"), f"{ref} (not found)")}
        if target_name in stack or len(stack) >= MAX_REF_DEPTH:
            # Inlining again would never end: gpt-oss sees the type's name, which the comment on
            # the object that defines it (below) introduces.
            return {**siblings, "type": [target_name]}
        target = defs[target_name]
        merged = {**target, **siblings} if isinstance(target, Mapping) else siblings
        if name is not None and merged.get("title") == target_name:
            del merged["title"]  # the definition's own name, not the property's
        if _is_recursive(target, target_name):
            merged["description"] = _join(f"type {target_name}", merged.get("description"))
        return _render_node(merged, defs, stack + (target_name,), name)
    out: dict[str, Any] = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
    if name is not None and out.get("title") == name.replace("_", " ").title():
        del out["title"]  # pydantic's automatic title restates the name: noise in the prompt
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
        del out["allOf"]
        return _render_node({**all_of[0], **out}, defs, stack, name)
    variants = out.pop("anyOf", None)
    if variants is None:
        variants = out.pop("oneOf", None)
    if isinstance(variants, list) and variants:
        non_null = [v for v in variants if not (isinstance(v, Mapping) and v.get("type") == "null")]
        if len(non_null) == 1 and len(variants) == 2:
            inner = _render_node(non_null[0], defs, stack)
            kept = {k: v for k, v in out.items() if k in ("description", "default", "title", "examples")}
            return {**inner, **kept, "nullable": True}
        out["oneOf"] = [_render_node(v, defs, stack) for v in variants]
        return out
    kind = out.get("type")
    if isinstance(kind, list):
        non_null = [t for t in kind if t != "null"]
        if len(non_null) == 1:
            out["type"] = non_null[0]
            if "null" in kind:
                out["nullable"] = True
            kind = non_null[0]
    if "const" in out:
        value = out.pop("const")
        out["enum"] = [value]
    enum = out.get("enum")
    if isinstance(enum, list) and enum:
        if all(isinstance(v, str) for v in enum):
            out["type"] = "string"
        else:
            out["type"] = [" | ".join(json.dumps(v, ensure_ascii=False) for v in enum)]
            out.pop("enum")
        return out
    if kind == "object" or (kind is None and "properties" in out):
        out["type"] = "object"
        properties = out.get("properties")
        if isinstance(properties, Mapping) and properties:
            out["properties"] = {k: _render_node(v, defs, stack, k) for k, v in properties.items()}
        else:
            extra: Any = out.get("additionalProperties")
            if isinstance(extra, Mapping):
                value = _inline_type(_render_node(extra, defs, stack))
                out["type"] = [f"Record<string, {value}>"]
            elif extra is True or "properties" not in out:
                out["type"] = ["Record<string, any>"] if extra is True else "object"
    elif kind == "array":
        items = out.get("items")
        if isinstance(items, Mapping):
            out["items"] = _render_node(items, defs, stack)
    return out


def _is_recursive(target: Any, name: str) -> bool:
    """Whether a definition refers to itself (directly, which is how pydantic writes trees)."""
    text = json.dumps(target)
    return f'"#/$defs/{name}"' in text or f'"#/definitions/{name}"' in text


def _inline_type(node: Mapping[str, Any]) -> str:
    """A one-line TypeScript type for a map's values (objects with fields are written as ``object``)."""
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "string" and isinstance(node.get("enum"), list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"])
    if kind in ("string", "boolean"):
        text = str(kind)
    elif kind in ("number", "integer"):
        text = "number"
    elif kind == "array":
        items = node.get("items")
        text = f"{_inline_type(items)}[]" if isinstance(items, Mapping) else "Array<any>"
    elif kind == "object":
        text = "object"
    else:
        text = "any"
    return f"{text} | null" if node.get("nullable") else text


def _join(first: Any, second: Any) -> str:
    if isinstance(first, str) and first and isinstance(second, str) and second:
        return f"{first}: {second}"
    return first if isinstance(first, str) and first else str(second or "")


# -- strict mode --------------------------------------------------------------------------


def check_strict(schema: Any, param: str) -> None:
    """Raise InvalidRequestError naming the path of the first thing OpenAI's strict mode forbids."""
    if not isinstance(schema, Mapping):
        raise InvalidRequestError(f"'{param}' must be a JSON Schema object.", param=param)
    if schema.get("type") != "object" or "anyOf" in schema:
        raise InvalidRequestError(
            f"Invalid schema for '{param}': in strict mode the root must be an object schema "
            "(type: 'object', not anyOf).",
            param=param,
        )
    defs = _definitions(schema)
    counter = [0]
    _check_node(schema, param, param, defs, 0, counter)
    for name, definition in defs.items():
        _check_node(definition, param, f"{param}.$defs.{name}", defs, 0, counter)


def _strict_error(param: str, path: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid schema for '{param}' at '{path}': {message}", param=param)


def _check_node(
    node: Any, param: str, path: str, defs: Mapping[str, Any], depth: int, counter: list[int]
) -> None:
    if not isinstance(node, Mapping):
        if isinstance(node, bool):
            return
        raise _strict_error(param, path, "a schema must be an object.")
    if depth > _STRICT_MAX_DEPTH:
        raise _strict_error(param, path, f"strict mode allows at most {_STRICT_MAX_DEPTH} levels of nesting.")
    for keyword in _STRICT_FORBIDDEN:
        if keyword in node:
            raise _strict_error(param, path, f"'{keyword}' is not supported in strict mode.")
    ref = node.get("$ref")
    if ref is not None:
        name = _ref_name(ref)
        if ref != "#" and (name is None or name not in defs):
            raise _strict_error(param, path, f"$ref {ref!r} does not point into this schema's $defs.")
        return
    enum = node.get("enum")
    if isinstance(enum, list) and len(enum) > _STRICT_MAX_ENUM:
        raise _strict_error(param, path, f"strict mode allows at most {_STRICT_MAX_ENUM} enum values.")
    for key in ("anyOf", "oneOf"):
        variants = node.get(key)
        if isinstance(variants, list):
            for i, variant in enumerate(variants):
                _check_node(variant, param, f"{path}.{key}[{i}]", defs, depth + 1, counter)
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds:
        properties = node.get("properties") or {}
        if node.get("additionalProperties") is not False:
            raise _strict_error(
                param, path, "'additionalProperties' must be false for every object in strict mode."
            )
        required = node.get("required") or []
        missing = [k for k in properties if k not in required]
        if missing:
            raise _strict_error(
                param, path, f"every property must be in 'required' in strict mode; missing {missing[0]!r}."
            )
        counter[0] += len(properties)
        if counter[0] > _STRICT_MAX_PROPERTIES:
            raise _strict_error(
                param, path, f"strict mode allows at most {_STRICT_MAX_PROPERTIES} properties."
            )
        for key, value in properties.items():
            _check_node(value, param, f"{path}.properties.{key}", defs, depth + 1, counter)
    if "array" in kinds and isinstance(node.get("items"), Mapping):
        _check_node(node["items"], param, f"{path}.items", defs, depth + 1, counter)


# -- minimal instances ----------------------------------------------------------------------


def resolve_refs(node: Any, root: Mapping[str, Any]) -> Any:
    """``node`` with a top-level ``$ref`` into ``root``'s definitions followed (one level)."""
    if isinstance(node, Mapping) and "$ref" in node:
        if node["$ref"] == "#":
            return root
        name = _ref_name(node["$ref"])
        target = _definitions(root).get(name or "")
        if isinstance(target, Mapping):
            return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


#: What :func:`minimal_instance` may build: values (one each) plus string characters. A schema asking for
#: more (``minItems: 1e8``, ``minLength`` of a gigabyte, nested arrays multiplying) gets its arrays and
#: strings cut where the room runs out, so the echo executor answers at once; its answer is then cut by
#: ``max_output_tokens`` as a real model's would be.
MINIMAL_INSTANCE_ROOM = 65_536


class _Room:
    """What is left of :data:`MINIMAL_INSTANCE_ROOM` while one instance is built."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, wanted: int) -> int:
        """Take up to ``wanted`` units; return how many were granted."""
        granted = max(0, min(wanted, self.left))
        self.left -= granted
        return granted


def _count(value: Any) -> int:
    """A schema's integer keyword (``minItems``, ``minLength``), 0 when absent or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if value < MINIMAL_INSTANCE_ROOM else MINIMAL_INSTANCE_ROOM


def minimal_instance(
    schema: Any,
    text: str,
    root: Mapping[str, Any] | None = None,
    depth: int = 0,
    room: _Room | int | None = None,
) -> Any:
    """The smallest value ``schema`` accepts: required properties only, strings from ``text``.

    string = ``text`` cut to ``maxLength`` (padded to ``minLength``), number = its
    minimum or 0, boolean = true, enum/const = its first value, array = ``minItems``
    copies of its item, nullable = its non-null type. Built within ``room`` (at most
    :data:`MINIMAL_INSTANCE_ROOM`) values and characters: past it, arrays and strings are shorter than
    the schema asks.
    """
    root = root if root is not None else (schema if isinstance(schema, Mapping) else {})
    if not isinstance(room, _Room):
        room = _Room(MINIMAL_INSTANCE_ROOM if room is None else min(room, MINIMAL_INSTANCE_ROOM))
    room.take(1)
    node = resolve_refs(schema, root)
    if not isinstance(node, Mapping) or depth > 32:
        return None
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    for key in ("anyOf", "oneOf"):
        variants = node.get(key)
        if isinstance(variants, list) and variants:
            non_null = [v for v in variants if not (isinstance(v, Mapping) and v.get("type") == "null")]
            return minimal_instance((non_null or variants)[0], text, root, depth + 1, room)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and all_of:
        merged: dict[str, Any] = {}
        for part in all_of:
            merged.update(resolve_refs(part, root) if isinstance(part, Mapping) else {})
        return minimal_instance(
            {**merged, **{k: v for k, v in node.items() if k != "allOf"}}, text, root, depth + 1, room
        )
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in node else "string"
    if kind == "object":
        properties = node.get("properties") or {}
        return {
            name: minimal_instance(properties.get(name, {}), text, root, depth + 1, room)
            for name in node.get("required") or []
        }
    if kind == "array":
        items = node.get("items", {})
        values = []
        for _ in range(_count(node.get("minItems"))):
            if room.left <= 0:
                break
            values.append(minimal_instance(items, text, root, depth + 1, room))
        return values
    if kind == "string":
        value = text
        max_length = node.get("maxLength")
        if isinstance(max_length, int):
            value = value[:max_length]
        value = value[: max(0, room.left)]
        room.take(len(value))
        missing = _count(node.get("minLength")) - len(value)
        if missing > 0:
            value = value + "x" * room.take(missing)
        return value
    if kind in ("number", "integer"):
        minimum = node.get("minimum")
        if isinstance(minimum, (int, float)) and not isinstance(minimum, bool):
            return minimum
        exclusive = node.get("exclusiveMinimum")
        if isinstance(exclusive, (int, float)) and not isinstance(exclusive, bool):
            return exclusive + 1
        return 0
    if kind == "boolean":
        return True
    return None
