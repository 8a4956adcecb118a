"""What the model must obey in one response: one :class:`Constraint`, built by the adapter.

A structured output (the final message is JSON of the schema), a required call (the first
generation ends in one of the allowed calls; later ones obey :meth:`Constraint.after_call`) and
custom tools' grammars, over every ``CallOption`` the model was shown (``harmony/tools.py``), so
a constraint never blocks a call the model may make. It is data: each executor translates it;
``None`` constrains nothing. docs/tools.md#tools-structured-outputs-and-constraints ("One constraint
per request").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..core import InvalidRequestError
from ..harmony import CallOption, check_strict
from ..request import JsonObjectFormat, PlainText, TextConfig

__all__ = [
    "Constraint",
    "ResponseFormat",
    "build_constraint",
    "check_grammar",
    "parse_text_format",
]

_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """A structured-output format: ``json_schema`` (with its schema) or ``json_object``."""

    name: str
    schema: Mapping[str, Any] | None  # None: any JSON object
    description: str | None = None
    strict: bool = False


@dataclass(frozen=True, slots=True)
class Constraint:
    """The output's shape.

    ``final``: ``"json"`` (the final message is JSON of ``schema``), ``"text"`` (free),
    or ``"forbidden"`` (a call is required: the response ends in one of ``calls``).
    ``calls``: every call the model may make, each with its body's constraint.
    """

    final: Literal["json", "text", "forbidden"]
    calls: tuple[CallOption, ...] = ()
    schema: Mapping[str, Any] | None = None
    #: A required call's constraint: what generations obey once the call is made (None: nothing).
    then: Constraint | None = None

    @property
    def call_required(self) -> bool:
        """The response must end in a call."""
        return self.final == "forbidden"

    def after_call(self) -> Constraint | None:
        """What the response's later generations obey once the model made a call (None: nothing).

        A required call is required once per response: the tool loop's next turn (after a
        server-run call) may answer, in the structured-output format if there is one.
        """
        return self.then if self.call_required else self


def parse_text_format(text: TextConfig | None) -> ResponseFormat | None:
    """The structured-output format of ``text.format`` (None: free text); InvalidRequestError naming what is wrong."""
    fmt = text.format if text is not None else None
    if fmt is None or isinstance(fmt, PlainText):
        return None
    if isinstance(fmt, JsonObjectFormat):
        return ResponseFormat(name="json_object", schema=None, description="Respond with a JSON object.")
    if not _FORMAT_NAME.fullmatch(fmt.name):
        raise InvalidRequestError(
            "'text.format.name' must be 1-64 letters, digits, underscores or dashes.",
            param="text.format.name",
        )
    if fmt.strict:
        check_strict(fmt.schema, "text.format.schema")
    return ResponseFormat(
        name=fmt.name, schema=fmt.schema, description=fmt.description, strict=bool(fmt.strict)
    )


def check_grammar(syntax: str, definition: str, param: str) -> None:
    """Refuse, at request time, a grammar that cannot become a constraint."""
    from .grammars import GrammarError, lark_to_ebnf, regex_to_ebnf

    try:
        if syntax == "lark":
            lark_to_ebnf(definition)
        else:
            re.compile(definition)
            regex_to_ebnf(definition)
    except (GrammarError, re.error, ValueError, SyntaxError) as exc:
        raise InvalidRequestError(f"Invalid {syntax} grammar at '{param}': {exc}", param=param) from exc


def build_constraint(
    calls: tuple[CallOption, ...],
    required: tuple[CallOption, ...] | None,
    response_format: ResponseFormat | None,
) -> Constraint | None:
    """The one constraint of a request (None when the output is free).

    ``calls``: every call the model may make; ``required``: the calls one of which the
    response must make (None: no call is required).
    """
    answer: Constraint | None = None
    if response_format is not None:
        answer = Constraint(final="json", calls=calls, schema=response_format.schema)
    elif any(c.syntax is not None for c in calls):
        answer = Constraint(final="text", calls=calls)
    if required is not None:
        return Constraint(final="forbidden", calls=required, then=answer)
    return answer
