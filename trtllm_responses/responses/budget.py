"""A request's input budget: the bytes ``--max_input_bytes`` allows it, and what it has spent so far.

One :class:`InputBudget` is opened per prepared request (``prepare.py``) and carried through its stages:
the body's own bytes first (refused past the limit before anything else is read), then each expansion
it asks for, measured before it is made (a prompt template's variables, ``prompts.py``; the items its
``item_reference``\\ s name, ``references.py``), each refused past :attr:`InputBudget.left` by the
expansion itself, so that its 400 names what crossed. What was spent also decides where the input is
rendered (``rendering.py``) and bounds a conversation read before its input (``conversations.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import InvalidRequestError

__all__ = ["InputBudget", "check_size"]


@dataclass(slots=True)
class InputBudget:
    """``limit`` bytes (``--max_input_bytes``) of which ``spent`` are used; ``window``, the context window
    in tokens the limit was sized to (named in the refusal)."""

    limit: int
    window: int
    spent: int = 0

    @property
    def left(self) -> int:
        """Bytes an expansion may still add (negative once a translated body's own form is over the limit)."""
        return self.limit - self.spent

    def check(self, size: int) -> None:
        """Refuse a request body of ``size`` bytes (400 ``context_length_exceeded``) if over the limit."""
        check_size(size, self.limit, self.window)

    def spend(self, added: int) -> None:
        """Count ``added`` bytes an expansion made (it refused itself first if they were past :attr:`left`)."""
        self.spent += added


def check_size(size: int, limit: int, window: int) -> None:
    """Refuse a request body of ``size`` bytes, over ``limit`` (``--max_input_bytes``, sized to a context
    window of ``window`` tokens): a 400 ``context_length_exceeded`` naming both."""
    if size > limit:
        raise InvalidRequestError(
            f"The request is larger than {limit} bytes, more than this model's context "
            f"window of {window} tokens can hold (--max_input_bytes).",
            param="input",
            code="context_length_exceeded",
        )
