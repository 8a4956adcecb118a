"""Shared fixtures: the offline Harmony encoding (loaded once) and an adapter with a fixed date."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from support.harmony_helpers import FIXED_DATE
from support.trtllm_harness import fake_trtllm_importable

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.harmony import HarmonyEncoding, load_encoding


@pytest.fixture(scope="session")
def encoding() -> HarmonyEncoding:
    return load_encoding()


@pytest.fixture(scope="session")
def adapter(encoding: HarmonyEncoding) -> HarmonyAdapter:
    return HarmonyAdapter(encoding, today=lambda: FIXED_DATE)


@pytest.fixture(scope="session")
def echo_server(encoding: HarmonyEncoding, adapter: HarmonyAdapter):  # type: ignore[no-untyped-def]
    """One echo server for the session (tests must not depend on each other's stored responses)."""
    from support.server_harness import start_server

    from trtllm_responses.executors.echo import EchoExecutor

    running = start_server(EchoExecutor(encoding), adapter)
    yield running
    running.stop()


@pytest.fixture
def http(echo_server):  # type: ignore[no-untyped-def]
    import httpx

    with httpx.Client(base_url=echo_server.base_url, timeout=30) as client:
        yield client


@pytest.fixture
def fake_trtllm() -> Iterator[ModuleType]:
    """Make the fake TensorRT-LLM importable as ``tensorrt_llm`` for one test."""
    with fake_trtllm_importable() as module:
        yield module


@pytest.fixture(scope="module")
def mcp():  # type: ignore[no-untyped-def]
    """A real MCP server (``mcp_server.py``) on loopback for the module's tests; it records the headers it got."""
    from support.mcp_server import start_mcp_server

    running = start_mcp_server()
    yield running
    running.stop()


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
