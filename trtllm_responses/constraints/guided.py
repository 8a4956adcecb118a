"""A :class:`~trtllm_responses.constraints.base.Constraint` as TensorRT-LLM guided decoding.

TensorRT-LLM's PyTorch backend hands ``GuidedDecodingParams(structural_tag=...)`` to
xgrammar's ``GrammarCompiler.compile_structural_tag`` (``_torch/pyexecutor/grammar_matcher.py``);
structural tags are the only guide that constrains part of the output, which Harmony needs:
the analysis channel stays free while the final message or a call is pinned. The format is
xgrammar 0.1.25's (the version TensorRT-LLM pins): ``tag``, ``sequence``, ``or``,
``const_string``, ``json_schema``, ``grammar`` (EBNF), ``regex``, ``any_text``,
``triggered_tags``.

The completion starts after the prompt's ``<|start|>assistant``. xgrammar's tokenizer info in
TensorRT-LLM has one stop token, the tokenizer's EOS, which for gpt-oss is ``<|return|>``:
the grammar cannot write it as text, only end where it may follow. ``<|call|>`` and
``<|end|>`` are ordinary vocabulary to xgrammar and are matched as text.

- Final JSON or a required call: any number of free messages (analysis, or a commentary
  preamble), each ``<|channel|>X<|message|>…<|end|>`` followed by ``<|start|>assistant``
  (an EBNF ``grammar``: xgrammar 0.1.25's structural tags have no repetition that may be
  followed by something), then the terminal message: the final JSON (after which only
  ``<|return|>`` may come) or one of the allowed calls ending ``<|call|>``.
- Only custom-tool grammars (auto choice, no structured output): the same shape with a free
  final answer (``<|channel|>final<|message|>`` then any text) beside the calls, each call one
  the model was shown (the request's tools, listed MCP tools, ``python``, ``browser.*``), its
  body constrained. Not xgrammar's ``triggered_tags`` over free text: its triggers would fire
  inside an analysis message too, and gpt-oss's recipient-first header begins `` to=``, which
  ordinary text holds (``send(msg, to=addr)``), so the model could not write it.

Every call is matched in the header gpt-oss writes for it (``CallOption.channel`` and
``content_type``): ``<|channel|>commentary to=functions.f <|constrain|>json<|message|>`` for
functions and MCP tools, ``<|channel|>analysis to=python code<|message|>`` for the built-in tools.

Compiling costs CPU time per distinct constraint (TensorRT-LLM's xgrammar compiler caches
compiled grammars by their text, so a client's repeated tool set compiles once), and it grows
with the number of tags: functions whose arguments are not pinned by a strict schema share
one tag (any of their recipients, then any JSON object), so only strict functions and
custom tools cost a tag each (``benchmarks/constraints.py`` measures it).
"""

from __future__ import annotations

import json
from typing import Any

from ..harmony.headers import FINAL_HEADERS, FREE_CHANNELS, call_headers
from ..harmony.tools import CallOption
from .base import Constraint
from .grammars import lark_to_ebnf
from .json_grammar import json_schema_ebnf

__all__ = ["FREE_MESSAGES", "structural_tag"]

#: Free messages (analysis, commentary preambles) before the final JSON or the required call: any
#: number, each ``<|channel|>X<|message|>…<|end|><|start|>assistant`` whose body never contains
#: ``<|`` (a Harmony control token inside a body is malformed output to the parser too).
#: Text that never contains ``<|``: TensorRT-LLM gives xgrammar gpt-oss's special tokens as their text
#: (``<|end|>``, ``<|reserved_200013|>`` …), so excluding the two characters keeps every special token out
#: of a body, while ``<`` alone (``a < b``, ``<div>``) stays free. A run of ``<`` is followed by neither
#: ``<|`` nor ``|``.
NO_CONTROL_TEXT = r"""([^<] | "<"+ [^<|])* "<"*"""
FREE_MESSAGES = (
    r"""root ::= free_message*
free_message ::= "<|channel|>" ("""
    + " | ".join(json.dumps(channel) for channel in FREE_CHANNELS)
    + r""") "<|message|>" body "<|end|><|start|>assistant"
body ::= """
    + NO_CONTROL_TEXT
    + "\n"
)
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
    if call.syntax == "regex":
        return {"type": "regex", "pattern": call.definition or ""}
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
    fmt = {
        "type": "sequence",
        "elements": [{"type": "grammar", "grammar": FREE_MESSAGES}, {"type": "or", "elements": terminal}],
    }
    return json.dumps({"type": "structural_tag", "format": fmt}, ensure_ascii=False)
