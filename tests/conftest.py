"""Shared fixtures: the offline Harmony encoding (loaded once) and an adapter with a fixed date."""

from __future__ import annotations

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


@pytest.fixture
def fake_trtllm(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Make the fake TensorRT-LLM importable as ``tensorrt_llm`` for one test."""
    import importlib
    import sys

    monkeypatch.syspath_prepend(FAKE_TRTLLM)
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("tensorrt_llm")
    yield module
    for name in [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]:
        sys.modules.pop(name, None)


@pytest.fixture(scope="session")
def redis_server():  # type: ignore[no-untyped-def]
    """A real redis-server on a free loopback port for the session (``make test`` installs the binary)."""
    from redis_harness import RedisServer, redis_binary

    if redis_binary() is None:
        pytest.fail("redis-server is not installed: run `make test` (it installs it) or apt-get install redis-server")
    server = RedisServer().start()
    yield server
    server.stop()
