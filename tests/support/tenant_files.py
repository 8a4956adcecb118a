"""Tenants files for tests: two tenants and an admin, keys ``key-<name>`` (docs/tenants.md#the-tenants-file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtllm_responses.tenants import hash_key


def write_tenants(path: Path, **extra: dict[str, Any]) -> Path:
    """Write ``path``: tenants ``a`` and ``b`` (keys ``key-a``, ``key-b``), an admin ``ops`` (``key-ops``), and
    each of ``extra`` (its entry's fields, key ``key-<name>``); ``path``."""
    tenants: dict[str, Any] = {
        "a": {"keys": [hash_key("key-a")]},
        "b": {"keys": [hash_key("key-b")]},
        "ops": {"keys": [hash_key("key-ops")], "admin": True},
    }
    for name, entry in extra.items():
        tenants[name] = {"keys": [hash_key(f"key-{name}")], **entry}
    path.write_text(json.dumps({"tenants": tenants}))
    return path
