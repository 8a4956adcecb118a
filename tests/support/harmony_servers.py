"""The server a Harmony reader test runs an engine's case on (tests/harmony/conftest.py has the fixtures)."""

from __future__ import annotations

import pytest

from support.server_harness import RunningServer

__all__ = ["server_for"]


def server_for(request: pytest.FixtureRequest, engine: str) -> RunningServer:
    """The echo server (fixture ``server``) for ``engine`` ``"echo"``, else the module's fake TensorRT-LLM
    server (fixture ``trtllm_server``)."""
    return request.getfixturevalue("server" if engine == "echo" else "trtllm_server")  # type: ignore[no-any-return]
