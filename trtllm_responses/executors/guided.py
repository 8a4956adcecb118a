"""A :class:`~trtllm_responses.constraints.Constraint` as TensorRT-LLM guided decoding.

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

- Final JSON or a required call: a bounded number of free messages (analysis, or a
  commentary preamble), each ``<|channel|>X<|message|>…<|end|>`` followed by
  ``<|start|>assistant``, then the terminal message: the final JSON (after which only
  ``<|return|>`` may come) or one of the allowed calls ending ``<|call|>``. xgrammar 0.1.25
  has no repetition format outside ``tags_with_separator`` (which may not be followed by
  anything), so the free messages are unrolled :data:`MAX_FREE_MESSAGES` deep: past that
  many, the model must answer or call.
- Only custom-tool grammars (auto choice, no structured output): free text with triggered
  tags: wherever a call header ``<|channel|>commentary to=`` starts, it must be one of the
  declared tools' calls, its body constrained.
"""

from __future__ import annotations

import json
from typing import Any

from ..constraints import CallOption, Constraint
from ..grammars import lark_to_ebnf

__all__ = ["MAX_FREE_MESSAGES", "structural_tag"]

#: Free messages (analysis, preambles) allowed before the final JSON or the required call.
MAX_FREE_MESSAGES = 4
SEPARATOR = "<|start|>assistant"
FINAL_BEGINS = ("<|channel|>final<|message|>", "<|channel|>final <|constrain|>json<|message|>")
CALL_TRIGGER = "<|channel|>commentary to="
_ANY_JSON_OBJECT = {"type": "object"}


def _call_body(call: CallOption) -> dict[str, Any]:
    if not call.custom:
        return {"type": "json_schema", "json_schema": dict(call.schema) if call.schema else _ANY_JSON_OBJECT}
    if call.syntax == "lark":
        return {"type": "grammar", "grammar": lark_to_ebnf(call.definition or "")}
    if call.syntax == "regex":
        return {"type": "regex", "pattern": call.definition or ""}
    return {"type": "any_text"}


def _call_tags(call: CallOption) -> list[dict[str, Any]]:
    """Tags of one call: its header (as Harmony renders it, and without the space), body, ``<|call|>``."""
    body = _call_body(call)
    if call.custom:
        heads = [f"{CALL_TRIGGER}{call.recipient}<|message|>"]
    else:
        heads = [
            f"{CALL_TRIGGER}{call.recipient} <|constrain|>json<|message|>",
            f"{CALL_TRIGGER}{call.recipient}<|constrain|>json<|message|>",
        ]
    return [{"type": "tag", "begin": head, "content": body, "end": "<|call|>"} for head in heads]


def _free_message(channel: str) -> dict[str, Any]:
    return {
        "type": "tag",
        "begin": f"<|channel|>{channel}<|message|>",
        "content": {"type": "any_text"},
        "end": "<|end|>",
    }


def structural_tag(constraint: Constraint) -> str:
    """The structural tag (xgrammar JSON) that makes the model obey ``constraint``."""
    if constraint.final == "text":
        tags = [tag for call in constraint.calls for tag in _call_tags(call)]
        fmt: dict[str, Any] = {
            "type": "triggered_tags",
            "triggers": [CALL_TRIGGER],
            "tags": tags,
            "at_least_one": False,
            "stop_after_first": False,
        }
        return json.dumps({"type": "structural_tag", "format": fmt}, ensure_ascii=False)
    terminal: list[dict[str, Any]] = []
    if constraint.final == "json":
        body = {"type": "json_schema", "json_schema": dict(constraint.schema) if constraint.schema else _ANY_JSON_OBJECT}
        terminal += [{"type": "tag", "begin": head, "content": body, "end": ""} for head in FINAL_BEGINS]
    for call in constraint.calls:
        terminal += _call_tags(call)
    free = {"type": "or", "elements": [_free_message("analysis"), _free_message("commentary")]}
    fmt = {"type": "or", "elements": terminal}
    for _ in range(MAX_FREE_MESSAGES):
        then = {"type": "sequence", "elements": [free, {"type": "const_string", "value": SEPARATOR}, fmt]}
        fmt = {"type": "or", "elements": [*terminal, then]}
    return json.dumps({"type": "structural_tag", "format": fmt}, ensure_ascii=False)
