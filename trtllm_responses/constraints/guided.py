"""A :class:`~trtllm_responses.constraints.base.Constraint` as TensorRT-LLM guided decoding.

One xgrammar 0.1.25 structural tag (the version TensorRT-LLM pins) for the completion after
``<|start|>assistant``: free messages, then the final JSON or one of the allowed calls in the
header gpt-oss writes for it; ``<|return|>`` is the only stop token xgrammar knows, so the grammar
ends where it may follow. What it allows, why not triggered tags, why no free text holds ``<|``,
and what compiling costs: docs/tools.md#tools-structured-outputs-and-constraints.
"""

from __future__ import annotations

import json
from typing import Any

from ..harmony import FINAL_HEADERS, FREE_CHANNELS, CallOption, call_headers
from .base import Constraint
from .grammars import lark_to_ebnf, regex_to_ebnf
from .json_grammar import json_schema_ebnf

__all__ = ["FREE_MESSAGES", "REASONING_ONLY", "free_messages", "structural_tag"]

#: Free messages (analysis, commentary preambles) before the final JSON or the required call: any
#: number, each ``<|channel|>X<|message|>…<|end|><|start|>assistant`` whose body never contains
#: ``<|`` (a Harmony control token inside a body is malformed output to the parser too).
#: Text that never contains ``<|``: TensorRT-LLM gives xgrammar gpt-oss's special tokens as their text
#: (``<|end|>``, ``<|reserved_200013|>`` …), so excluding the two characters keeps every special token out
#: of a body, while ``<`` alone (``a < b``, ``<div>``) stays free. A run of ``<`` is followed by neither
#: ``<|`` nor ``|``.
NO_CONTROL_TEXT = r"""([^<] | "<"+ [^<|])* "<"*"""


def free_messages(channels: tuple[str, ...]) -> str:
    """Any number of free messages on ``channels``, each ``<|channel|>X<|message|>…<|end|><|start|>assistant``."""
    return (
        r"""root ::= free_message*
free_message ::= "<|channel|>" ("""
        + " | ".join(json.dumps(channel) for channel in channels)
        + r""") "<|message|>" body "<|end|><|start|>assistant"
body ::= """
        + NO_CONTROL_TEXT
        + "\n"
    )


FREE_MESSAGES = free_messages(FREE_CHANNELS)
#: Under a structured output with no call to make, only reasoning precedes the JSON: a commentary
#: preamble would be a message of the response's output, and its ``output_text`` would not be JSON.
REASONING_ONLY = free_messages(("analysis",))
#: A free final answer (the last message: only ``<|return|>`` may follow; its body never contains ``<|``).
FREE_FINAL = "root ::= " + json.dumps(FINAL_HEADERS[0]) + " body\nbody ::= " + NO_CONTROL_TEXT + "\n"
#: Free text in a call (the python tool's code, a custom tool without a grammar): no ``<|`` either.
FREE_TEXT = f"root ::= {NO_CONTROL_TEXT}\n"
#: The final answer's headers and the call headers come from ``harmony/headers.py``, the definition the
#: parser reads with (``tests/harmony/test_reader.py`` walks every header this tag accepts through the parser).
_ANY_JSON_OBJECT = {"type": "object"}


def _json_body(schema: Any) -> dict[str, Any]:
    """A JSON value of ``schema`` whose strings hold no special token (``json_grammar.py``)."""
    return {"type": "grammar", "grammar": json_schema_ebnf(dict(schema) if schema else _ANY_JSON_OBJECT)}


def _call_body(call: CallOption) -> dict[str, Any]:
    if not call.custom:
        return _json_body(call.schema)
    if call.syntax == "lark":
        return {"type": "grammar", "grammar": lark_to_ebnf(call.definition or "")}
    if call.syntax == "regex":  # as EBNF, not xgrammar's regex: its "." would admit "<|call|>"
        return {"type": "grammar", "grammar": f"root ::= {regex_to_ebnf(call.definition or '')}\n"}
    return {"type": "grammar", "grammar": FREE_TEXT}


def _recipients(names: list[str]) -> str:
    """An EBNF grammar matching exactly one of ``names``."""
    return "root ::= " + " | ".join(json.dumps(name) for name in names) + "\n"


def _content_type(call: CallOption) -> str:
    """The header's content type with its leading space (``""``: none)."""
    content_type = call.header_content_type
    return f" {content_type}" if content_type else ""


def _all_call_tags(calls: tuple[CallOption, ...]) -> list[dict[str, Any]]:
    """Tags for every allowed call: one each for pinned bodies, one per header for the rest.

    A call whose body is any JSON object (a function without a strict schema, an MCP tool, the
    browser) shares its tag with the others written under the same header.
    """
    loose: dict[tuple[str, str], list[str]] = {}
    tags: list[dict[str, Any]] = []
    for call in calls:
        if call.custom or call.schema is not None:
            tags += _call_tags(call)
        else:
            loose.setdefault((call.channel, _content_type(call)), []).append(call.recipient)
    for (channel, content_type), recipients in loose.items():
        if len(recipients) == 1:
            tags += _call_tags(
                CallOption(recipients[0], custom=False, channel=channel, content_type=content_type.strip())
            )
            continue
        for begin, after in call_headers(channel, content_type):
            content = {
                "type": "sequence",
                "elements": [
                    {"type": "grammar", "grammar": _recipients(recipients)},
                    {"type": "const_string", "value": after},
                    _json_body(None),
                ],
            }
            tags.append({"type": "tag", "begin": begin, "content": content, "end": "<|call|>"})
    return tags


def _call_tags(call: CallOption) -> list[dict[str, Any]]:
    """The tags of one call: its header in either order gpt-oss writes it, its body, ``<|call|>``."""
    body = _call_body(call)
    return [
        {"type": "tag", "begin": begin + call.recipient + after, "content": body, "end": "<|call|>"}
        for begin, after in call_headers(call.channel, _content_type(call))
    ]


def structural_tag(constraint: Constraint) -> str:
    """The structural tag (xgrammar JSON) that makes the model obey ``constraint``."""
    terminal: list[dict[str, Any]] = []
    if constraint.final == "json":
        body = _json_body(constraint.schema)
        terminal += [{"type": "tag", "begin": head, "content": body, "end": ""} for head in FINAL_HEADERS]
    elif constraint.final == "text":  # a free answer: any text until the end of the output
        terminal.append({"type": "grammar", "grammar": FREE_FINAL})
    terminal += _all_call_tags(constraint.calls)
    free = REASONING_ONLY if constraint.final == "json" and not constraint.calls else FREE_MESSAGES
    fmt = {
        "type": "sequence",
        "elements": [{"type": "grammar", "grammar": free}, {"type": "or", "elements": terminal}],
    }
    return json.dumps({"type": "structural_tag", "format": fmt}, ensure_ascii=False)
