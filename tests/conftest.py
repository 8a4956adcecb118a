"""Shared fixtures: the offline Harmony encoding (loaded once) and an adapter with a fixed date."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.harmony import HarmonyEncoding, load_encoding

FIXED_DATE = "2026-11-21"


@pytest.fixture(scope="session")
def encoding() -> HarmonyEncoding:
    return load_encoding()


@pytest.fixture(scope="session")
def adapter(encoding: HarmonyEncoding) -> HarmonyAdapter:
    return HarmonyAdapter(encoding, today=lambda: FIXED_DATE)


@pytest.fixture(scope="session")
def echo_server(encoding: HarmonyEncoding, adapter: HarmonyAdapter):  # type: ignore[no-untyped-def]
    """One echo server for the session (tests must not depend on each other's stored responses)."""
    from server_harness import start_server

    from trtllm_responses.executors.echo import EchoExecutor

    running = start_server(EchoExecutor(encoding), adapter)
    yield running
    running.stop()


@pytest.fixture
def http(echo_server):  # type: ignore[no-untyped-def]
    import httpx

    with httpx.Client(base_url=echo_server.base_url, timeout=30) as client:
        yield client


FAKE_TRTLLM = str(__import__("pathlib").Path(__file__).parent / "fake_trtllm")


def _trtllm_modules() -> list[str]:
    return [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]


@contextlib.contextmanager
def fake_trtllm_importable() -> Iterator[ModuleType]:
    """The fake TensorRT-LLM importable as ``tensorrt_llm`` while the block runs; other tests never find it."""
    patch = pytest.MonkeyPatch()
    patch.syspath_prepend(FAKE_TRTLLM)
    for name in _trtllm_modules():
        patch.delitem(sys.modules, name)
    try:
        yield importlib.import_module("tensorrt_llm")
    finally:
        for name in _trtllm_modules():
            sys.modules.pop(name, None)
        patch.undo()


@pytest.fixture
def fake_trtllm() -> Iterator[ModuleType]:
    """Make the fake TensorRT-LLM importable as ``tensorrt_llm`` for one test."""
    with fake_trtllm_importable() as module:
        yield module


@pytest.fixture(scope="module")
def mcp():  # type: ignore[no-untyped-def]
    """A real MCP server (``mcp_server.py``) on loopback for the module's tests; it records the headers it got."""
    from mcp_server import start_mcp_server

    running = start_mcp_server()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def redis_server():  # type: ignore[no-untyped-def]
    """A real redis-server on a free loopback port for the session (``make test`` installs the binary)."""
    from redis_harness import RedisServer, redis_binary

    if redis_binary() is None:
        pytest.fail(
            "redis-server is not installed: run `make test` (it installs it) or apt-get install redis-server"
        )
    server = RedisServer().start()
    yield server
    server.stop()
