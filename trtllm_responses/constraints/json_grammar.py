"""A JSON schema as an EBNF grammar whose strings cannot hold a gpt-oss special token.

To xgrammar, TensorRT-LLM's special tokens are ordinary text, so a JSON string admits ``<|end|>``.
A schema therefore goes to the structural tag as the EBNF xgrammar itself makes of it
(``Grammar.from_json_schema``) with its strings cut so ``<|`` never appears unescaped: ordinary strings take
``<`` only before a character other than ``|``; the classes of strings with a length bound or a ``pattern``
(``[^"\\\r\n]``, ``[ -~]``, a pattern's ``.``) take no ``<`` at all
(docs/tools.md#tools-structured-outputs-and-constraints). xgrammar is imported at the first conversion (it is
TensorRT-LLM's dependency); conversions are cached by schema.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from .grammars import class_without, regex_to_ebnf

__all__ = ["SCHEMA_COMMENT", "json_schema_ebnf"]

#: The first line of every grammar made here: ``# JSON schema: {...}`` (xgrammar EBNF comments start with #).
SCHEMA_COMMENT = "# JSON schema: "

#: xgrammar 0.1.25's ordinary string rule, replaced: "<" then anything but "|" or another "<" run.
_STRING_RULES = (
    'basic_string_sub ::= ("\\"" | [^\\0-\\x1f\\"\\\\\\r\\n<] basic_string_sub '
    '| "\\\\" basic_escape basic_string_sub | "<" basic_string_lt)\n'
    'basic_string_lt ::= ("\\"" | [^\\0-\\x1f\\"\\\\\\r\\n<|] basic_string_sub '
    '| "\\\\" basic_escape basic_string_sub | "<" basic_string_lt)'
)


def json_schema_ebnf(schema: dict[str, Any]) -> str:
    """The EBNF of ``schema`` (xgrammar's, root rule ``root``) with no special token inside a string."""
    return _convert(json.dumps(schema, ensure_ascii=False))  # key order is property order: not sorted


@functools.lru_cache(maxsize=1024)
def _convert(schema_json: str) -> str:
    try:
        import xgrammar
    except ImportError as exc:  # pragma: no cover - TensorRT-LLM always brings it
        raise RuntimeError(
            "guided decoding needs xgrammar (TensorRT-LLM's dependency) to turn JSON schemas into grammars"
        ) from exc
    ebnf = str(xgrammar.Grammar.from_json_schema(schema_json))
    lines = []
    for line in ebnf.splitlines():
        if line.startswith("basic_string_sub ::="):
            lines.append(_STRING_RULES)
        else:
            lines.append(_exclude_lt(_REGEX_CALL.sub(_regex_rule, line)))
    # The schema it was made from, as a comment (what the grammar means, for whoever reads the request).
    return f"{SCHEMA_COMMENT}{schema_json}\n" + "\n".join(lines) + "\n"


#: xgrammar from 0.1.32 leaves a string's ``pattern`` as a call its compiler expands, out of this module's reach.
_REGEX_CALL = re.compile(r'Regex\("((?:[^"\\]|\\.)*)"(?:, json_string=(true|false))?\)')
#: What a JSON string holds only escaped: the quote, the backslash, control characters.
_JSON_UNSAFE = '"\\' + "".join(map(chr, range(0x20)))


def _regex_rule(match: re.Match[str]) -> str:
    """A ``Regex("...", json_string=...)`` call as the EBNF of the regular expression, its classes cut the
    same way (a JSON string's: no quote, backslash or control character, escapes being out of a pattern's reach)."""
    pattern = json.loads(f'"{match.group(1)}"')
    ebnf = regex_to_ebnf(pattern)
    if match.group(2) == "true":
        ebnf = _cut_classes(ebnf, _JSON_UNSAFE)
    return f"({ebnf})"


def _exclude_lt(line: str) -> str:
    """``line`` with ``<`` taken out of every character class outside string literals (a pattern's ``.`` too)."""
    return _cut_classes(line, "<")


def _cut_classes(line: str, chars: str) -> str:
    """``line`` with ``chars`` taken out of every character class outside string literals."""
    out: list[str] = []
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == '"':  # a string literal: copied as is
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            out.append(line[i : j + 1])
            i = j + 1
            continue
        if ch == "[":
            j = i + 1
            while j < n and line[j] != "]":
                j += 2 if line[j] == "\\" else 1
            body = line[i + 1 : j]
            out.append("[" + (class_without(body, chars) or body) + "]")
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)
