"""A JSON schema as an EBNF grammar whose strings cannot hold a gpt-oss special token.

TensorRT-LLM gives xgrammar gpt-oss's vocabulary with the special tokens as their text
(``_xgrammar_tokenizer_info``, ``llmapi/tokenizer.py``), so to xgrammar ``<|end|>`` is seven ordinary
characters, and a JSON string (``[^"\\\\]`` and friends) admits it and every ``<|reserved_…|>`` token.
The model may then write a control token inside a call's arguments or a JSON answer, which the
Harmony reader refuses. Sampled against xgrammar 0.1.25 (tests/constraints/test_guided_property.py), this happens.

So a schema is not sent as a structural tag's ``json_schema`` element but as a ``grammar``: the EBNF
xgrammar itself makes of it (``xgrammar.Grammar.from_json_schema``, the converter its ``json_schema``
element uses), with its strings cut so that ``<|`` never appears unescaped:

- ordinary strings (``basic_string_sub``) take ``<`` freely but never ``|`` right after a ``<``
  (``a < b``, ``<div>`` and a trailing ``<`` stay writable; ``<|`` is written ``\\u003c|``);
- every other negated character class (strings with ``maxLength``/``minLength``, ``pattern`` classes
  such as ``.``) loses ``<``: such strings cannot hold ``<`` unescaped (a pattern's own positive
  classes are left as the client wrote them).

xgrammar is imported when a schema is first converted: it is TensorRT-LLM's dependency, present
wherever the TensorRT-LLM executor runs (and in the test extra). Conversions are cached by schema.
"""

from __future__ import annotations

import functools
import json
from typing import Any

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
            lines.append(_exclude_lt(line))
    # The schema it was made from, as a comment (what the grammar means, for whoever reads the request).
    return f"{SCHEMA_COMMENT}{schema_json}\n" + "\n".join(lines) + "\n"


def _exclude_lt(line: str) -> str:
    """``line`` with ``<`` added to every negated character class outside string literals."""
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
            if body.startswith("^") and "<" not in body:
                body += "<"
            out.append("[" + body + "]")
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)
