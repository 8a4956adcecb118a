"""The store URL of each backend the conformance tests run on (a parametrized fixture's ``request.param``)."""

from __future__ import annotations

from pathlib import Path

import pytest

BACKENDS = ["memory", "sqlite", "redis"]


def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``memory``, a SQLite file in the test's own ``tmp_path``, or the tests' redis-server, emptied first."""
    backend = request.param
    if backend == "memory":
        return "memory"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    redis = request.getfixturevalue("redis_server")
    redis.flush()
    return str(redis.url)
