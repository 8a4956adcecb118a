"""The Harmony reader's tests drive two servers: the echo executor's ``#harmony`` raw mode (the session's
``server``) and the fake TensorRT-LLM, which keeps stop tokens to itself as TensorRT-LLM does
(``trtllm_server``, one per module); ``support.harmony_servers.server_for`` picks one by name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.server_harness import RunningServer


@pytest.fixture(scope="module")
def trtllm_server(encoding, serve) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    from support.trtllm_harness import executor_for, fake_trtllm_importable

    with fake_trtllm_importable():
        running = serve(executor_for(encoding, stream_interval=2))
        yield running
        running.stop()
