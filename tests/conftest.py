"""Fixtures every layer's tests share: the offline Harmony encoding (loaded once), an adapter with a fixed
date, the servers (``serve``, ``server``, ``echo_server``) and clients of them, the fake TensorRT-LLM, an MCP
server, a loopback web site.

A fixture only one layer needs lives in that layer's ``conftest.py`` (``tests/<layer>/``).

``make test`` runs the suite on workers (pytest-xdist, ``-n 3 --dist loadscope``): each worker is a process
with a session of its own (its own echo server, Redis, encoding), a module runs whole and in order on one
worker, and what a test starts (servers, processes, ports, temp folders) is its own. A test that measures
its process (RSS, loop lag, GC) measures its worker, where tests run one at a time. Below: the order the
modules are handed out in, and the few modules whose tests are spread over the workers."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import openai
import pytest
from support.harmony_helpers import FIXED_DATE
from support.server_harness import RunningServer, ServerFactory
from support.trtllm_harness import fake_trtllm_importable

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.harmony import HarmonyEncoding, load_encoding


@pytest.fixture(scope="module", autouse=True)
def _collect_what_the_module_left() -> Iterator[None]:
    """What a module left unclosed (a client's socket in a reference cycle) is reported as that module's: the
    collector runs at its end, so the ResourceWarning (an error here) falls on its last test's teardown, not on
    whichever later test happens to collect (CI: a leaked client socket failed an in-process server's start in
    another module, at its ``gc.collect()``). ~50 ms a module."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def encoding() -> HarmonyEncoding:
    return load_encoding()


@pytest.fixture(scope="session")
def adapter(encoding: HarmonyEncoding) -> HarmonyAdapter:
    return HarmonyAdapter(encoding, today=lambda: FIXED_DATE)


@pytest.fixture(scope="session")
def serve(encoding: HarmonyEncoding, adapter: HarmonyAdapter) -> Iterator[ServerFactory]:
    """The one way a test starts a server (a real uvicorn on loopback): ``serve(executor=None, *,
    adapter=None, store=None, **config)`` (``support.server_harness.ServerFactory``). Session-scoped so
    that fixtures of any scope can use it; each server is stopped by whoever started it."""
    factory = ServerFactory(encoding, adapter)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def server_options() -> dict[str, Any]:
    """The arguments of ``serve`` the module's ``server`` is started with: a module (or a folder's
    conftest) overrides this fixture to configure its server, and parametrizes it to get several."""
    return {}


@pytest.fixture(scope="module")
def server(serve: ServerFactory, server_options: dict[str, Any]) -> Iterator[RunningServer]:
    """The module's own server, ``serve(**server_options)``: started by the module's first test that
    asks for it, stopped after its last."""
    with serve(**server_options) as running:
        yield running


@pytest.fixture(scope="session")
def echo_server(serve: ServerFactory) -> Iterator[RunningServer]:
    """One echo server for the session (tests must not depend on each other's stored responses)."""
    with serve() as running:
        yield running


@pytest.fixture
def client(echo_server) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    """The openai SDK (no retries) on the session's echo server."""
    with openai.OpenAI(base_url=echo_server.base_url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture
async def aclient(echo_server) -> openai.AsyncOpenAI:  # type: ignore[no-untyped-def]
    """The async openai SDK (no retries) on the session's echo server."""
    async with openai.AsyncOpenAI(
        base_url=echo_server.base_url + "/v1", api_key="unused", max_retries=0
    ) as c:
        yield c


@pytest.fixture
def http(echo_server):  # type: ignore[no-untyped-def]
    """An httpx client of the session's echo server."""
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


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """A loopback web (``support/search_site.py``): a SearXNG-style search and its pages, for the browser."""
    from support.search_site import serve_search_site

    with serve_search_site() as url:
        yield url


# -- pytest -n: the order modules are handed out in, and the modules spread over the workers ---------------

#: The modules that take longest (``--durations``, summed by module: 30 s to 2 min on the 2-core machine,
#: 2026-11-30), longest first:
#: under ``-n`` they are handed out first, so that none of them starts last and holds the run's end.
LONGEST_FIRST = (
    "store/test_redis_outages.py",
    "cli/test_frontends.py",
    "cli/test_frontend_tenants.py",
    "constraints/test_guided_property.py",
    "server/test_large_answers.py",
    "store/test_store_processes.py",
    "ops/test_operations.py",
    "cli/test_json_logs.py",
    "server/test_nginx_affinity.py",
    "cli/test_trtllm_cli.py",
    "cli/test_build.py",
    "cli/test_trtllm_world.py",
    "clients/test_claude_code.py",
    "executors/test_trtllm_grpc_fleet.py",
    "executors/test_trtllm_grpc_fake_engine.py",
)

#: A module whose tests run per kind of constraint: under ``-n`` a unit per kind, not one for the module
#: (its fake TensorRT-LLM is started once per worker that runs a kind).
SPREAD_BY_FIRST_PARAMETER = ("constraints/test_guided_property.py",)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].removeprefix("tests/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker of ``pytest -n``: the modules of :data:`LONGEST_FIRST` first (every worker collects the
    same order; the scheduler hands out units in it). A run without ``-n`` keeps pytest's order."""
    if not hasattr(config, "workerinput"):
        return
    rank = {module: n for n, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_module(item.nodeid), len(rank)))  # stable: the rest as collected


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with the units of :data:`SPREAD_BY_FIRST_PARAMETER`, handed out in the collected
    order (:func:`pytest_collection_modifyitems`) rather than by size."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = _module(nodeid)
            if module in SPREAD_BY_FIRST_PARAMETER and "[" in nodeid:
                return nodeid.rsplit("-", 1)[0]  # ...[kind-seed] -> ...[kind
            return str(super()._split_scope(nodeid))

    config.option.loadscopereorder = False
    return Scheduling(config, log)
