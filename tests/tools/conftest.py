"""Fixtures of the server-run tool tests: an HTTP client of the module's server (tool calls take longer)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.server_harness import RunningServer


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client
