"""Identifier minting: the one place ids are made.

Ids follow OpenAI's shapes: a short prefix, an underscore and 48 hex digits
(``resp_…``, ``msg_…``, ``rs_…``, ``fc_…``, ``ctc_…``, ``call_…``, ``ws_…``, ``ci_…``, ``mcp_…``, ``req_…``).
"""

from __future__ import annotations

import os

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """Return a fresh, globally unique id such as ``msg_3f9c…`` (24 random bytes)."""
    return f"{prefix}_{os.urandom(24).hex()}"
