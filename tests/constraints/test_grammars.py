"""Lark and regex grammars as xgrammar EBNF: each translation compiles in xgrammar and means what the grammar says."""

from __future__ import annotations

from typing import Any

import pytest
from support.lazy import lazy_import

from trtllm_responses.constraints.grammars import GrammarError, lark_to_ebnf, regex_to_ebnf
from trtllm_responses.harmony import HarmonyEncoding

xgr = lazy_import("xgrammar")  # support/lazy.py: not at collection (torch)


def matches(compiler: Any, encoding: HarmonyEncoding, ebnf: str, text: str) -> bool:
    """Whether the grammar accepts exactly ``text`` (every token, then the stop token)."""
    matcher = xgr.GrammarMatcher(compiler.compile_grammar(ebnf))
    return all(matcher.accept_token(t) for t in encoding.encode_plain(text)) and matcher.accept_token(
        encoding.return_
    )


LARK_CASES = [
    ('start: "a" | "b"', ["a", "b"], ["c", "ab"]),
    ('start: item+\nitem: "x" | "y"', ["x", "xyx"], ["", "xz"]),
    ('start: "[" [NUMBER] "]"\n%import common.NUMBER', ["[]", "[12]", "[1.5]"], ["[a]"]),
    ('start: WORD ("," WORD)*\n%import common (WORD)', ["a", "ab,cd"], ["a,", "1"]),
    ('start: "a".."c" ~ 2', ["ab", "cc"], ["a", "abc", "ad"]),
    ('start: "x" ~ 1..3', ["x", "xxx"], ["xxxx"]),
    ("start: /[0-9]{2}-\\d+/ -> code", ["12-3", "00-123"], ["1-2", "12-"]),
    ('?start: greeting\ngreeting: "hi" NAME\nNAME: /[A-Z][a-z]*/', ["hiBob", "hiA"], ["hibob"]),
    (
        "start: ESCAPED_STRING\n%import common.ESCAPED_STRING",
        ['"a b"', '"q\\"q"'],
        ["'a'", '"a'],
    ),
    ('// comment line\nstart: "a"\n    | "b"', ["a", "b"], ["c"]),
]


@pytest.mark.parametrize("source, good, bad", LARK_CASES, ids=[c[0].splitlines()[0] for c in LARK_CASES])
def test_lark_translation_means_the_grammar(
    compiler: Any,
    encoding: HarmonyEncoding,
    source: str,
    good: list[str],
    bad: list[str],
) -> None:
    ebnf = lark_to_ebnf(source)
    for text in good:
        assert matches(compiler, encoding, ebnf, text), (text, ebnf)
    for text in bad:
        assert not matches(compiler, encoding, ebnf, text), (text, ebnf)


@pytest.mark.parametrize(
    "pattern, good, bad",
    [
        (r"(?:yes|no)\.?", ["yes", "no."], ["maybe", "yes.."]),
        (r"\w+@\w+\.com", ["joe@x.com"], ["joe@x.org"]),
        (r"[^\s,]+(,[^\s,]+)*", ["a,b", "abc"], ["a, b", ","]),
        (r"^\d{3}$", ["123"], ["12", "1234"]),
        (r".*", ["anything at all", ""], ["two\nlines"]),
    ],
)
def test_regex_translation(
    compiler: Any,
    encoding: HarmonyEncoding,
    pattern: str,
    good: list[str],
    bad: list[str],
) -> None:
    ebnf = "root ::= " + regex_to_ebnf(pattern)
    for text in good:
        assert matches(compiler, encoding, ebnf, text), (text, ebnf)
    for text in bad:
        assert not matches(compiler, encoding, ebnf, text), (text, ebnf)


@pytest.mark.parametrize(
    "source, message",
    [
        ('start: "a"\n%ignore " "', "%ignore"),
        ('begin: "a"', "no 'start' rule"),
        ("start: missing", "never defines it"),
        ('start: "a"i', "case-insensitive"),
        ("start: /a/i", "flags"),
        ("start: /(?=a)a/", "look-arounds"),
        (r"start: /(a)\1/", "back-references"),
        ("%import common.NOPE\nstart: NOPE", "not supported"),
    ],
)
def test_untranslatable_grammars_are_refused(source: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        lark_to_ebnf(source)
