"""What a PromQL expression asks of the metrics it reads: each metric selector (name and label matchers) and
each grouping label (``by``, ``without``, ``on``, ``ignoring``, ``group_left``, ``group_right``), checked
against a server's ``/metrics`` without a Prometheus (tests/ops/test_dashboard.py).

A scanner, not a full parser: PromQL's lexical rules (strings, durations, identifiers, braces) and the
places labels appear. An aggregation's ``by``/``without`` labels must be on every selector of its argument;
``on``/``ignoring``/``group_*`` labels on every selector of the expression.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Selector", "exported_labels", "grafana_expr", "problems", "scan"]

#: Labels Prometheus adds to every scraped series (its target's), and the series it makes itself.
TARGET_LABELS = frozenset({"instance", "job"})
SYNTHETIC = {"up": TARGET_LABELS, "scrape_duration_seconds": TARGET_LABELS}

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>\d+(?:\.\d+)?(?:e[+-]?\d+)?(?:ms|[smhdwy])?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>==|!=|=~|!~|>=|<=|[-+*/%^<>=,(){}\[\]])
    )""",
    re.VERBOSE,
)
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


@dataclass
class Selector:
    """One metric selector: its name (None for a bare ``{...}``) and matchers ``(label, op, value)``."""

    name: str | None
    matchers: list[tuple[str, str, str]] = field(default_factory=list)
    at: int = 0  # its token's index


@dataclass
class Scan:
    """What :func:`scan` found: the selectors, and each grouping clause's labels with the selectors it
    applies to."""

    selectors: list[Selector]
    groupings: list[tuple[str, list[str], list[Selector]]]


def _tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    expr = expr.rstrip()
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"cannot read PromQL at {expr[pos : pos + 20]!r} in {expr!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def _close(tokens: list[tuple[str, str]], start: int, left: str = "(", right: str = ")") -> int:
    """The index of the bracket closing the one at ``start``."""
    depth = 0
    for i in range(start, len(tokens)):
        if tokens[i][1] == left:
            depth += 1
        elif tokens[i][1] == right:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced brackets")


def _open(tokens: list[tuple[str, str]], end: int) -> int:
    """The index of the ``(`` the ``)`` at ``end`` closes."""
    depth = 0
    for i in range(end, -1, -1):
        if tokens[i][1] == ")":
            depth += 1
        elif tokens[i][1] == "(":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced brackets")


def _matchers(tokens: list[tuple[str, str]], start: int, end: int) -> list[tuple[str, str, str]]:
    inner = [t for t in tokens[start + 1 : end] if t[1] != ","]
    return [(inner[i][1], inner[i + 1][1], inner[i + 2][1][1:-1]) for i in range(0, len(inner) - 2, 3)]


def scan(expr: str) -> Scan:
    """The selectors and grouping clauses of ``expr`` (Grafana variables already replaced)."""
    tokens = _tokens(expr)
    selectors: list[Selector] = []
    clauses: list[tuple[str, list[str], tuple[int, int] | None]] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "ident" and text in _GROUPING and following == "(":
            end = _close(tokens, i + 1)
            labels = [t[1] for t in tokens[i + 2 : end] if t[0] == "ident"]
            clauses.append((text, labels, _argument(tokens, i, end) if text in ("by", "without") else None))
            i = end + 1
        elif kind == "ident" and (following in ("(", "by", "without") or text.lower() in _KEYWORDS):
            i += 1  # a function or aggregation, or a keyword
        elif kind == "ident" or text == "{":
            selector = Selector(text if kind == "ident" else None, at=i)
            brace = i + 1 if kind == "ident" else i
            if brace < len(tokens) and tokens[brace][1] == "{":
                end = _close(tokens, brace, "{", "}")
                selector.matchers = _matchers(tokens, brace, end)
                i = end
            selectors.append(selector)
            i += 1
        elif text == "[":
            i = _close(tokens, i, "[", "]") + 1
        else:
            i += 1
    groupings = [
        (keyword, labels, [s for s in selectors if span is None or span[0] <= s.at <= span[1]])
        for keyword, labels, span in clauses
    ]
    return Scan(selectors, groupings)


def _argument(tokens: list[tuple[str, str]], at: int, end: int) -> tuple[int, int]:
    """The token span of the argument of the aggregation whose ``by``/``without`` clause is at ``at``..``end``:
    ``sum by (l) (ARG)`` or ``sum (ARG) by (l)``."""
    if tokens[at - 1][1] == ")":
        return _open(tokens, at - 1), at - 1
    return end + 1, _close(tokens, end + 1)


def exported_labels(text: str) -> dict[str, dict[str, set[str]]]:
    """Each sample name of a ``/metrics`` text, with each of its labels and the values seen."""
    found: dict[str, dict[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = found.setdefault(sample.name, {})
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    return found


def grafana_expr(expr: str, rate_interval: str = "5m") -> str:
    """A dashboard query with Grafana's variables replaced: ``$__rate_interval`` by ``rate_interval``, the
    template variables (``$instance``, ``${tenant}``, ...) by ``.*`` (their "All")."""
    expr = expr.replace("$__rate_interval", rate_interval).replace("${__rate_interval}", rate_interval)
    return re.sub(r"\$\{?[A-Za-z_]\w*\}?", ".*", expr)


def problems(expr: str, exported: Mapping[str, Mapping[str, Iterable[str]]]) -> list[str]:
    """What ``expr`` asks that ``exported`` (:func:`exported_labels`) lacks: a metric not exported, a label a
    selector matches or a clause groups by that its metric does not have, an ``=`` value never seen."""
    found = scan(expr)
    out: list[str] = []
    labels_of: dict[str, set[str]] = {}
    for selector in found.selectors:
        if selector.name is None:
            out.append(f"a selector without a metric name in {expr!r}")
            continue
        if selector.name in SYNTHETIC:
            labels = set(SYNTHETIC[selector.name])
        elif selector.name in exported:
            labels = set(exported[selector.name]) | TARGET_LABELS
        else:
            out.append(f"{selector.name} is not exported")
            continue
        labels_of[selector.name] = labels
        for label, op, value in selector.matchers:
            if label not in labels:
                out.append(f"{selector.name} has no label {label!r}")
            elif op == "=" and label not in TARGET_LABELS and value not in exported[selector.name][label]:
                out.append(f"{selector.name} never has {label}={value!r}")
    for keyword, labels, applies_to in found.groupings:
        for label in labels:
            for selector in applies_to:
                if selector.name in labels_of and label not in labels_of[selector.name]:
                    out.append(f"{keyword} ({label}) over {selector.name}, which has no label {label!r}")
    return out
