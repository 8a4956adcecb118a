"""Lark grammars (the ``custom`` tool format OpenAI documents) as EBNF for xgrammar.

TensorRT-LLM's PyTorch backend constrains decoding with xgrammar, whose grammars are
EBNF (GBNF-style ``rule ::= ...``). Lark is a different notation for the same thing; this
module translates the part of Lark that a generation constraint can honour:

- rules (``name: ...``, ``?name:``, ``!name:``) and terminals (``NAME: ...``, ``NAME.2: ...``),
  alternatives over several lines (``| ...``), aliases (``-> name``, dropped);
- strings (``"..."``, escapes as in Python), ranges (``"a".."z"``), regular expressions
  (``/.../``: literals, ``.``, classes, ``\\d \\w \\s`` and their negations, groups,
  alternation, ``* + ? {m} {m,} {m,n}``; anchors dropped), groups, ``[optional]``,
  ``? * +`` and ``~ n`` / ``~ n..m`` repetition;
- ``%import common.NAME`` for Lark's common terminals (LF, CR, WS, DIGIT, INT, ...).

What cannot be a constraint is refused with :class:`GrammarError`: ``%ignore`` (text
skipped anywhere is a parser rule, not a language), ``%declare``, templates, regex flags
and look-arounds, back-references, and a string that holds ``<|`` (gpt-oss's control tokens begin
so: a grammar that writes one would end the call's body early).

No character class gives ``<|`` (docs/tools.md#tools-structured-outputs-and-constraints): to xgrammar
gpt-oss's control tokens are text, so ``.`` or ``[^\n]*`` would admit ``<|call|>``. An unbounded run of
a class (``*``, ``+``) keeps ``<`` where no ``|`` follows it in the run (the language of the run minus the
texts holding ``<|``); a class taken once or a bounded number of times loses ``<``.
"""

from __future__ import annotations

import ast
import re

__all__ = ["GrammarError", "class_without", "lark_to_ebnf", "regex_to_ebnf"]


class GrammarError(ValueError):
    """A grammar this server cannot turn into a constraint (the message says why)."""


# Lark's common.lark terminals, in Lark notation (translated like the user's own).
_COMMON = {
    "LF": r'"\n"',
    "CR": r'"\r"',
    "NEWLINE": r"(CR? LF)+",
    "WS_INLINE": r'(" "|/\t/)+',
    "WS": r"/[ \t\f\r\n]/+",
    "DIGIT": r'"0".."9"',
    "HEXDIGIT": r'"a".."f"|"A".."F"|DIGIT',
    "INT": r"DIGIT+",
    "SIGNED_INT": r'["+"|"-"] INT',
    "DECIMAL": r'INT "." INT? | "." INT',
    "_EXP": r'("e"|"E") SIGNED_INT',
    "FLOAT": r"INT _EXP | DECIMAL _EXP?",
    "SIGNED_FLOAT": r'["+"|"-"] FLOAT',
    "NUMBER": r"FLOAT | INT",
    "SIGNED_NUMBER": r'["+"|"-"] NUMBER',
    "LCASE_LETTER": r'"a".."z"',
    "UCASE_LETTER": r'"A".."Z"',
    "LETTER": r"UCASE_LETTER | LCASE_LETTER",
    "WORD": r"LETTER+",
    "CNAME": r'("_"|LETTER) ("_"|LETTER|DIGIT)*',
    "ESCAPED_STRING": r'"\"" /([^"\\]|\\.)*/ "\""',
}

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t]+|//[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"i?)
  | (?P<regex>/(?:[^/\\\n]|\\.)+/[imslux]*)
  | (?P<arrow>->)
  | (?P<range>\.\.)
  | (?P<name>[!?]?[A-Za-z_][A-Za-z0-9_]*(?:\.[0-9-]+)?)
  | (?P<number>[0-9]+)
  | (?P<punct>[|()\[\]?*+~:])
    """,
    re.VERBOSE,
)


def _rule_name(name: str) -> str:
    return ("t_" if name.lstrip("_")[:1].isupper() else "r_") + name


def _ebnf_string(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _class_char(ch: str) -> str:
    if ch in "\\]-^":
        return "\\" + ch
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if ord(ch) < 0x20:
        return f"\\x{ord(ch):02x}"
    return ch


_CLASS_ESCAPE_CHARS = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "0": "\0"}


def _class_ranges(body: str) -> list[tuple[int, int]]:
    """The code point ranges of an EBNF class body (without ``[``, ``^`` and ``]``)."""
    chars: list[int] = []
    i = 0
    while i < len(body):
        ch = body[i]
        i += 1
        if ch == "\\":
            esc = body[i]
            i += 1
            if esc in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[esc]
                chars.append(int(body[i : i + width], 16))
                i += width
            else:
                chars.append(ord(_CLASS_ESCAPE_CHARS.get(esc, esc)))
        elif ch == "-" and chars and i < len(body) and chars[-1] >= 0:
            chars.append(-1)  # a range marker
            continue
        else:
            chars.append(ord(ch))
    ranges: list[tuple[int, int]] = []
    j = 0
    while j < len(chars):
        if j + 2 < len(chars) and chars[j + 1] == -1:
            ranges.append((chars[j], chars[j + 2]))
            j += 3
        else:
            ranges.append((chars[j], chars[j]) if chars[j] >= 0 else (ord("-"), ord("-")))
            j += 1
    return ranges


def _class_point(code: int) -> str:
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    if code < 0x20 or code in (0x7F, ord("\\"), ord("]"), ord("-"), ord("^")):
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return chr(code)


def class_without(body: str, chars: str) -> str | None:
    """The EBNF class ``[body]`` (``body`` may begin ``^``) minus ``chars``: its new body, or None when empty."""
    if body.startswith("^"):
        return body + "".join(_class_char(c) for c in chars if c not in body[1:])
    ranges = _class_ranges(body)
    if not any(low <= ord(c) <= high for c in chars for low, high in ranges):
        return body
    for code in sorted(map(ord, chars)):
        cut: list[tuple[int, int]] = []
        for low, high in ranges:
            if low <= code <= high:
                if low < code:
                    cut.append((low, code - 1))
                if code < high:
                    cut.append((code + 1, high))
            else:
                cut.append((low, high))
        ranges = cut
    if not ranges:
        return None
    return "".join(
        _class_point(low) if low == high else f"{_class_point(low)}-{_class_point(high)}"
        for low, high in ranges
    )


def _admits(body: str, char: str) -> bool:
    """Whether the EBNF class ``[body]`` admits ``char``."""
    if body.startswith("^"):
        return not any(low <= ord(char) <= high for low, high in _class_ranges(body[1:]))
    return any(low <= ord(char) <= high for low, high in _class_ranges(body))


def safe_class(atom: str, quantifier: str) -> str:
    """``atom quantifier`` for a class atom ``[...]``, giving no ``<|`` (the module docstring)."""
    body = atom[1:-1]
    if not _admits(body, "<"):
        return atom + quantifier
    plain = class_without(body, "<")
    if quantifier not in ("*", "+"):
        return atom + quantifier if plain is None else f"[{plain}]{quantifier}"  # "[<]": "<" was asked for
    if not _admits(body, "|"):  # "<" runs inside the run are harmless
        return atom + quantifier
    # A run: "<"s only before a character that is neither "<" nor "|", or at the run's end.
    after = class_without(body, "<|")
    unit = " | ".join(
        part for part in (f"[{plain}]" if plain else "", f'"<"+ [{after}]' if after else "") if part
    )
    if not unit:
        return '"<"' + quantifier
    if quantifier == "*":
        return f'(({unit})* "<"*)'
    return f'(({unit})+ "<"* | "<"+)'


_CLASS_ESCAPES = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " \\t\\n\\r\\f\\v"}
_CHAR_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "0": "\0"}


class _Regex:
    """A recursive-descent translation of a regular expression into an EBNF expression."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def parse(self) -> str:
        expr = self._alternation()
        if self.i != len(self.p):
            raise GrammarError(f"unbalanced ')' in regex /{self.p}/")
        return expr

    def _peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def _alternation(self) -> str:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.i += 1
            branches.append(self._sequence())
        return branches[0] if len(branches) == 1 else "(" + " | ".join(branches) + ")"

    def _sequence(self) -> str:
        items: list[str] = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            atom = self._atom()
            if atom is None:
                continue
            quantifier = self._quantifier()
            items.append(safe_class(atom, quantifier) if atom.startswith("[") else atom + quantifier)
        return " ".join(items) if items else '""'

    def _quantifier(self) -> str:
        ch = self._peek()
        quant = ""
        if ch and ch in "*+?":
            self.i += 1
            quant = ch
        elif ch == "{":
            match = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.p, self.i)
            if match is None:
                raise GrammarError(f"bad repetition in regex /{self.p}/")
            self.i = match.end()
            low, comma, high = match.group(1), match.group(2), match.group(3)
            quant = "{" + low + ("," + (high or "") if comma else "") + "}"
        else:
            return ""
        if self._peek() and self._peek() in "?+":  # lazy / possessive: the language is the same
            self.i += 1
        return quant

    def _atom(self) -> str | None:
        ch = self.p[self.i]
        self.i += 1
        if ch in "^$":
            return None
        if ch == ".":
            return "[^\\n]"
        if ch == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?P<", self.i):
                self.i = self.p.index(">", self.i) + 1
            elif self._peek() == "?":
                raise GrammarError(f"look-arounds and inline flags are not supported in regex /{self.p}/")
            inner = self._alternation()
            if self._peek() != ")":
                raise GrammarError(f"unbalanced '(' in regex /{self.p}/")
            self.i += 1
            return "(" + inner + ")"
        if ch == "[":
            return self._class()
        if ch == "\\":
            return self._escape(in_class=False)
        if ch in "*+?{":
            raise GrammarError(f"nothing to repeat in regex /{self.p}/")
        return _ebnf_string(ch)

    def _escape(self, in_class: bool) -> str:
        if self.i >= len(self.p):
            raise GrammarError(f"regex /{self.p}/ ends with a backslash")
        ch = self.p[self.i]
        self.i += 1
        lower = ch.lower()
        if lower in _CLASS_ESCAPES:
            body = _CLASS_ESCAPES[lower]
            if in_class:
                if ch.isupper():
                    raise GrammarError(f"negated class escapes inside [...] are not supported in /{self.p}/")
                return body
            return f"[{'^' if ch.isupper() else ''}{body}]"
        if ch.isdigit() and ch != "0":
            raise GrammarError(f"back-references are not supported in regex /{self.p}/")
        if ch in "bBAZ":
            if in_class:
                raise GrammarError(f"\\{ch} inside [...] is not supported in /{self.p}/")
            return '""'
        if ch == "x":
            literal = chr(int(self.p[self.i : self.i + 2], 16))
            self.i += 2
        elif ch == "u":
            literal = chr(int(self.p[self.i : self.i + 4], 16))
            self.i += 4
        else:
            literal = _CHAR_ESCAPES.get(ch, ch)
        return _class_char(literal) if in_class else _ebnf_string(literal)

    def _class(self) -> str:
        out = "["
        if self._peek() == "^":
            out += "^"
            self.i += 1
        first = True
        while True:
            if self.i >= len(self.p):
                raise GrammarError(f"unterminated [...] in regex /{self.p}/")
            ch = self.p[self.i]
            if ch == "]" and not first:
                self.i += 1
                return out + "]"
            first = False
            self.i += 1
            if ch == "\\":
                out += self._escape(in_class=True)
            elif ch == "-" and self._peek() != "]" and out[-1:] not in ("[", "^"):
                out += "-"
            else:
                out += _class_char(ch)


def regex_to_ebnf(pattern: str) -> str:
    """An EBNF expression matching what the regular expression ``pattern`` matches (whole string)."""
    return _Regex(pattern).parse()


class _LarkTranslator:
    def __init__(self, source: str) -> None:
        self.source = source
        self.rules: dict[str, str] = {}
        self.imports: set[str] = set()

    def translate(self) -> str:
        for name, body in self._definitions(self.source):
            self.rules[name] = self._expansions(self._tokens(body), name)
        pending = set(self.imports)
        while pending:
            name = pending.pop()
            if _rule_name(name) in self.rules:
                continue
            before = set(self.imports)
            self.rules[_rule_name(name)] = self._expansions(self._tokens(_COMMON[name]), name)
            pending |= self.imports - before
        if "r_start" not in self.rules:
            raise GrammarError("the grammar has no 'start' rule")
        defined = set(self.rules)
        for body in self.rules.values():
            for ref in re.findall(r"\b([rt]_[A-Za-z0-9_]+)\b", body):
                if ref not in defined:
                    raise GrammarError(f"the grammar uses {ref[2:]!r} but never defines it")
        lines = ["root ::= r_start"] + [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"

    def _definitions(self, source: str) -> list[tuple[str, str]]:
        definitions: list[tuple[str, list[str]]] = []
        for raw in source.splitlines():
            stripped = raw.strip()
            if not stripped or stripped.startswith("//"):
                continue
            if stripped.startswith("%"):
                self._directive(stripped)
                continue
            if stripped.startswith("|"):
                if not definitions:
                    raise GrammarError(f"an alternative before any rule: {stripped!r}")
                definitions[-1][1].append(stripped)
                continue
            match = re.match(r"([!?]?)([A-Za-z_][A-Za-z0-9_]*)(\.-?\d+)?\s*:\s*(.*)$", stripped)
            if match is None:
                if definitions and raw[:1] in " \t":
                    definitions[-1][1].append(stripped)
                    continue
                raise GrammarError(f"cannot read grammar line {stripped!r}")
            if "{" in match.group(2):
                raise GrammarError("rule templates are not supported")
            definitions.append((_rule_name(match.group(2)), [match.group(4)]))
        return [(name, " ".join(parts)) for name, parts in definitions]

    def _directive(self, line: str) -> None:
        match = re.match(r"%import\s+common\.([A-Z_]+)\s*$", line) or None
        if match:
            self._import(match.group(1))
            return
        group = re.match(r"%import\s+common\s*\(([^)]*)\)\s*$", line)
        if group:
            for name in group.group(1).split(","):
                self._import(name.strip())
            return
        if line.startswith("%ignore"):
            raise GrammarError("%ignore is not supported: a constraint cannot skip text anywhere")
        raise GrammarError(f"directive not supported: {line!r}")

    def _import(self, name: str) -> None:
        if name not in _COMMON:
            raise GrammarError(f"%import common.{name} is not supported")
        self.imports.add(name)

    def _tokens(self, text: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:
                raise GrammarError(f"cannot read {text[pos : pos + 20]!r}")
            pos = match.end()
            kind = match.lastgroup or ""
            if kind != "ws":
                tokens.append((kind, match.group()))
        return tokens

    def _expansions(self, tokens: list[tuple[str, str]], rule: str) -> str:
        self._toks = tokens
        self._pos = 0
        expr = self._alternatives()
        if self._pos != len(tokens):
            raise GrammarError(f"cannot read rule {rule!r} near {tokens[self._pos][1]!r}")
        return expr

    def _peek(self) -> tuple[str, str]:
        return self._toks[self._pos] if self._pos < len(self._toks) else ("", "")

    def _alternatives(self) -> str:
        branches = [self._sequence()]
        while self._peek() == ("punct", "|"):
            self._pos += 1
            branches.append(self._sequence())
        return branches[0] if len(branches) == 1 else "(" + " | ".join(branches) + ")"

    def _sequence(self) -> str:
        items: list[str] = []
        while True:
            kind, value = self._peek()
            if kind == "" or (kind == "punct" and value in "|)]"):
                break
            if kind == "arrow":
                self._pos += 2  # "-> alias": the language is unchanged
                continue
            items.append(self._item())
        return " ".join(items) if items else '""'

    def _item(self) -> str:
        atom = self._atom()
        kind, value = self._peek()
        if kind == "punct" and value in "?*+":
            self._pos += 1
            return f"({atom}){value}"
        if kind == "punct" and value == "~":
            self._pos += 1
            low = self._expect("number")
            high = low
            if self._peek()[0] == "range":
                self._pos += 1
                high = self._expect("number")
            return f"({atom}){{{low},{high}}}"
        return atom

    def _expect(self, kind: str) -> str:
        got, value = self._peek()
        if got != kind:
            raise GrammarError(f"expected a {kind}, got {value!r}")
        self._pos += 1
        return value

    def _atom(self) -> str:
        kind, value = self._peek()
        self._pos += 1
        if kind == "string":
            if value.endswith("i"):
                raise GrammarError("case-insensitive strings are not supported")
            text = ast.literal_eval(value)
            if self._peek()[0] == "range":
                self._pos += 1
                high = ast.literal_eval(self._expect("string"))
                return safe_class(f"[{_class_char(text)}-{_class_char(high)}]", "")
            if "<|" in text:
                raise GrammarError(f"the string {value} holds '<|', how gpt-oss's control tokens begin")
            return _ebnf_string(text)
        if kind == "regex":
            body, _, flags = value[1:].rpartition("/")
            if flags:
                raise GrammarError(f"regex flags are not supported: {value}")
            return "(" + regex_to_ebnf(body.replace("\\/", "/")) + ")"
        if kind == "name":
            name = value.lstrip("!?").split(".")[0]
            if name in _COMMON and _rule_name(name) not in self.rules:
                self.imports.add(name)
            return _rule_name(name)
        if kind == "punct" and value == "(":
            inner = self._alternatives()
            self._expect_punct(")")
            return "(" + inner + ")"
        if kind == "punct" and value == "[":
            inner = self._alternatives()
            self._expect_punct("]")
            return "(" + inner + ")?"
        raise GrammarError(f"unexpected {value!r}")

    def _expect_punct(self, value: str) -> None:
        if self._peek() != ("punct", value):
            raise GrammarError(f"expected {value!r}")
        self._pos += 1


def lark_to_ebnf(source: str) -> str:
    """xgrammar EBNF (root rule ``root``) for a Lark grammar whose start rule is ``start``."""
    return _LarkTranslator(source).translate()
