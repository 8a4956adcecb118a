"""The holes a sampler walked through, closed (issue 29): no free text of a constraint gives ``<|``.

To xgrammar, as TensorRT-LLM sets it up for gpt-oss, a control token is its text: a class that admits
``<|call|>`` lets TensorRT-LLM stop in the middle of a call's input. Each case compiles the structural
tag TensorRT-LLM gets (the fake's ``XGrammarMatcherFactory``, ``conftest.py``) and feeds it text: the
hole is shut, ``<`` alone stays writable where the grammar lets it.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.custom_tools import APPLY_PATCH, PATCH_LARK
from support.lazy import lazy_import

from trtllm_responses.constraints.base import Constraint
from trtllm_responses.constraints.grammars import GrammarError, class_without, lark_to_ebnf, regex_to_ebnf
from trtllm_responses.constraints.guided import structural_tag
from trtllm_responses.constraints.json_grammar import json_schema_ebnf
from trtllm_responses.harmony import CallOption, HarmonyEncoding

xgr = lazy_import("xgrammar")  # support/lazy.py: not at collection (torch)

THINK = "<|channel|>analysis<|message|>x<|end|><|start|>assistant"


def _accepts(compiler: Any, encoding: HarmonyEncoding, ebnf: str, text: str) -> bool:
    """Whether the grammar takes ``text`` whole, written as ordinary tokens (spelled, as a model may)."""
    matcher = xgr.GrammarMatcher(compiler.compile_grammar(ebnf))
    return all(matcher.accept_token(t) for t in encoding.encode_plain(text)) and matcher.accept_token(
        encoding.return_
    )


def _tag_accepts(compiler: Any, encoding: HarmonyEncoding, constraint: Constraint, text: str) -> bool:
    """Whether the structural tag takes ``text`` (control tokens as the special tokens) to its end."""
    matcher = xgr.GrammarMatcher(compiler.compile_structural_tag(structural_tag(constraint)))
    tokens = encoding.encode(text)
    if not all(matcher.accept_token(t) for t in tokens):
        return False
    return tokens[-1] == encoding.call or matcher.accept_token(encoding.return_)


def test_lark_any_character_gives_no_control_token(compiler: Any, encoding: HarmonyEncoding) -> None:
    ebnf = lark_to_ebnf(PATCH_LARK)
    good = "*** Begin Patch\n*** Add File: a<b>.html\n+<div> a << b <\n*** End Patch\n"
    assert _accepts(compiler, encoding, ebnf, good)
    for hole in ("a<|call|>", "<|end|>x", "a<<|channel|>"):
        patch = f"*** Begin Patch\n*** Add File: {hole}\n+x\n*** End Patch\n"
        assert not _accepts(compiler, encoding, ebnf, patch), hole
        line = f"*** Begin Patch\n*** Add File: f\n+{hole}\n*** End Patch\n"
        assert not _accepts(compiler, encoding, ebnf, line), hole


@pytest.mark.parametrize(
    "pattern, good, bad",
    [
        (r".+", ["a<b", "<<a", "a<"], ["a<|call|>", "<|"]),
        (r"[^\n]*x", ["<a x"], ["<|end|>x"]),
        (r"[ -~]{1,12}", ["abc def"], ["<|end|>", "a<b"]),  # bounded: no "<" at all
        (r"[<>a]+", ["<a>", "<<"], []),  # no "|" in the class: its "<"s stay
    ],
)
def test_regex_classes_give_no_control_token(
    compiler: Any, encoding: HarmonyEncoding, pattern: str, good: list[str], bad: list[str]
) -> None:
    ebnf = f"root ::= {regex_to_ebnf(pattern)}\n"
    for text in good:
        assert _accepts(compiler, encoding, ebnf, text), (pattern, text, ebnf)
    for text in bad:
        assert not _accepts(compiler, encoding, ebnf, text), (pattern, text, ebnf)


def test_a_grammar_string_holding_a_control_token_start_is_refused() -> None:
    with pytest.raises(GrammarError, match="<\\|"):
        lark_to_ebnf('start: "<|call|>"')


def test_class_without() -> None:
    assert class_without("^\\n", "<") == "^\\n<"
    assert class_without(" -~", "<") == " -;=-~"
    assert class_without("a-z", "<") == "a-z"  # nothing to take out: as it was
    assert class_without("<", "<") is None


def test_json_pattern_and_bounded_strings_take_no_lt(compiler: Any, encoding: HarmonyEncoding) -> None:
    schema = {
        "type": "object",
        "properties": {
            "p": {"type": "string", "pattern": "^a.+$"},
            "q": {"type": "string", "pattern": "^[ -~]+$"},
            "n": {"type": "string", "maxLength": 9},
            "s": {"type": "string"},
        },
        "required": ["p", "q", "n", "s"],
        "additionalProperties": False,
    }
    ebnf = json_schema_ebnf(schema)

    def doc(p: str = "ab", q: str = "c", n: str = "d", s: str = "e") -> str:
        return f'{{"p":"{p}","q":"{q}","n":"{n}","s":"{s}"}}'

    assert _accepts(compiler, encoding, ebnf, doc())
    assert _accepts(compiler, encoding, ebnf, doc(s="a<b<<c<"))  # a free string keeps "<"
    for field in ("p", "q", "n", "s"):
        assert not _accepts(compiler, encoding, ebnf, doc(**{field: "a<|call|>"})), field


def test_regex_custom_tool_is_ebnf_without_the_hole(compiler: Any, encoding: HarmonyEncoding) -> None:
    tool = CallOption("functions.note", custom=True, syntax="regex", definition=r"note: .+")
    constraint = Constraint(final="forbidden", calls=(tool,))
    call = "<|channel|>commentary to=functions.note<|message|>note: {}<|call|>"
    assert _tag_accepts(compiler, encoding, constraint, THINK + call.format("a <b>"))
    matcher = xgr.GrammarMatcher(compiler.compile_structural_tag(structural_tag(constraint)))
    prefix = encoding.encode(THINK + "<|channel|>commentary to=functions.note<|message|>note: a")
    assert all(matcher.accept_token(t) for t in prefix)
    # Inside the input, the call's end can come only as the tag's end: "<|" then more text is refused.
    assert not all(matcher.accept_token(t) for t in encoding.encode_plain("<|call|>x"))


def test_json_format_alone_lets_only_reasoning_precede_the_answer(
    compiler: Any, encoding: HarmonyEncoding
) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    alone = Constraint(final="json", schema=schema)
    answer = '<|channel|>final<|message|>{"a":1}'
    assert _tag_accepts(compiler, encoding, alone, THINK + answer)
    preamble = "<|channel|>commentary<|message|>Sure.<|end|><|start|>assistant"
    assert not _tag_accepts(compiler, encoding, alone, preamble + answer)
    # With tools to call, a commentary preamble before a call stays allowed.
    weather = CallOption("functions.get_weather", custom=False)
    with_tools = Constraint(final="json", calls=(weather,), schema=schema)
    assert _tag_accepts(compiler, encoding, with_tools, preamble + answer)


def test_apply_patch_tag_ends_only_at_its_grammars_end(compiler: Any, encoding: HarmonyEncoding) -> None:
    tool = CallOption(
        "functions.apply_patch", custom=True, syntax="lark", definition=APPLY_PATCH["format"]["definition"]
    )
    constraint = Constraint(final="forbidden", calls=(tool,))
    head = THINK + "<|channel|>commentary to=functions.apply_patch<|message|>"
    matcher = xgr.GrammarMatcher(compiler.compile_structural_tag(structural_tag(constraint)))
    assert all(
        matcher.accept_token(t) for t in encoding.encode(head + "*** Begin Patch\n*** Add File: notes")
    )
    assert not matcher.accept_token(encoding.call)  # the hole of issue 29: TensorRT-LLM stopped here
