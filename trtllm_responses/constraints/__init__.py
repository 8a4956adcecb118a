"""What the model must obey: one ``Constraint`` per response, and how executors enforce it.

``base.py`` (the Constraint, structured-output formats, the grammar check of custom tools),
``grammars.py`` (Lark and regex grammars → the EBNF xgrammar reads), ``json_grammar.py`` (JSON
Schema → EBNF for what xgrammar's schema compiler cannot take), ``guided.py`` (a Constraint as
TensorRT-LLM's guided-decoding parameters: the translation executors share). Below the adapter
that builds a constraint and the executors that enforce it; above ``harmony/``, whose header
grammar and tool declarations it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face
from .base import Constraint, ResponseFormat, build_constraint, check_grammar, parse_text_format

if TYPE_CHECKING:
    from .guided import structural_tag

#: Resolved on first use: the structural tag is only for the TensorRT-LLM executor.
__all__ = lazy_face(globals())
