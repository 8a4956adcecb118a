"""Shared fixtures: the offline Harmony encoding (loaded once) and an adapter with a fixed date."""

from __future__ import annotations

import pytest

from trtllm_responses.harmony import HarmonyAdapter, HarmonyEncoding, load_encoding

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
