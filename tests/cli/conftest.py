"""Fixtures of the ``cli`` tests: a real redis-server on a free loopback port, for the groups and replicas
that share it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.redis_harness import RedisServer, redis_binary


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    if redis_binary() is None:
        pytest.fail("redis-server is not installed: run `make test` (it installs it)")
    running = RedisServer().start()
    yield running
    running.stop()
