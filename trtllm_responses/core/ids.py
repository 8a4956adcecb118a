"""Identifier minting and checking: the one place ids are made.

Ids follow OpenAI's shapes: a short prefix, an underscore and 48 hex digits
(``resp_…``, ``msg_…``, ``rs_…``, ``fc_…``, ``ctc_…``, ``call_…``, ``ws_…``, ``ci_…``, ``mcp_…``, ``req_…``).
An id a client sends for a response or conversation that cannot be one (``GET /v1/responses/abc``) is a
400 with OpenAI's message (:func:`check_id`), before any store is asked.
"""

from __future__ import annotations

import os
import re

from .errors import InvalidRequestError

__all__ = ["check_id", "new_id"]

_ID_CHARACTERS = re.compile(r"[A-Za-z0-9_-]+")


def new_id(prefix: str) -> str:
    """Return a fresh, globally unique id such as ``msg_3f9c…`` (24 random bytes)."""
    return f"{prefix}_{os.urandom(24).hex()}"


def check_id(value: str, param: str, prefix: str | None = None) -> str:
    """``value`` if it can be an id (beginning with ``prefix``, when given); else InvalidRequestError as OpenAI words it."""
    if not _ID_CHARACTERS.fullmatch(value):
        raise InvalidRequestError(
            f"Invalid '{param}': '{value}'. Expected an ID that contains letters, numbers, underscores, or dashes, "
            "but this value contained additional characters.",
            param=param,
            code="invalid_value",
        )
    if prefix is not None and not value.startswith(prefix):
        raise InvalidRequestError(
            f"Invalid '{param}': '{value}'. Expected an ID that begins with '{prefix}'.",
            param=param,
            code="invalid_value",
        )
    return value
