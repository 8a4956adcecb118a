"""Fixtures of the store tests: a real redis-server, for the Redis backend and the processes that share one."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def redis_server():  # type: ignore[no-untyped-def]
    """A real redis-server on a free loopback port for the session (``make test`` installs the binary)."""
    from support.redis_harness import RedisServer, redis_binary

    if redis_binary() is None:
        pytest.fail(
            "redis-server is not installed: run `make test` (it installs it) or apt-get install redis-server"
        )
    server = RedisServer().start()
    yield server
    server.stop()
