"""The render workers: they survive callers that go away, and one large render does not hold the others.

Before: one worker; a WebSocket client hanging up while its input rendered cancelled the render,
and the worker was killed and restarted (30 hang-ups, 24 restarts, each ~1-2 s without a renderer);
every large render queued behind the one running.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import httpx
import pytest
from openai_harmony import Author, Message, Role, TextContent
from support.server_harness import RunningServer
from websockets.sync.client import connect as ws_connect

from trtllm_responses.cli.command import build_parser
from trtllm_responses.cli.serve_options import server_config
from trtllm_responses.harmony.render_pool import RenderPool, default_render_workers


def _message(text: str) -> Message:
    return Message.from_author_and_content(Author.new(Role.USER, None), TextContent(text=text))


def test_a_caller_that_leaves_does_not_cost_a_restart() -> None:
    async def scenario() -> tuple[int, list[int | None], list[int | None]]:
        pool = RenderPool(workers=1)
        await pool.start()
        pids = pool.pids
        # A render long enough to leave during (~0.5 s on a worker that has loaded the encoding).
        big = [_message("lorem ipsum " * 400_000)]
        for _ in range(5):
            task = asyncio.ensure_future(pool.render(big))
            await asyncio.sleep(0.02)
            task.cancel()  # the client hung up mid-render
            with pytest.raises(asyncio.CancelledError):
                await task
        small = await pool.render([_message("hello")])
        assert small and small[0]
        restarts, after = pool.restarts, pool.pids
        await pool.aclose()
        return restarts, pids, after

    restarts, before, after = asyncio.run(scenario())
    assert restarts == 0 and before == after


def test_one_large_render_does_not_hold_another() -> None:
    async def scenario() -> bool:
        pool = RenderPool(workers=2)
        await pool.start()
        large = asyncio.ensure_future(
            pool.render([_message("lorem ipsum " * 1_000_000)])
        )  # ~0.5 s to tokenize
        await asyncio.sleep(0.05)
        await pool.render([_message("a small one " * 2000)])
        still_running = not large.done()
        await large
        await pool.aclose()
        return still_running

    still_running = asyncio.run(scenario())
    assert still_running, "the small render waited for the large one"


def test_render_workers_flag() -> None:
    assert server_config(build_parser().parse_args(["serve", "--render_workers", "3"])).render_workers == 3
    assert server_config(build_parser().parse_args(["serve"])).render_workers == 0
    assert RenderPool().size == default_render_workers() >= 1
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--render_workers", "-1"])


@pytest.fixture(scope="module")
def server_options() -> dict[str, Any]:
    return {"start_render_worker": True, "render_workers": 2}


def test_websocket_clients_hanging_up_during_rendering(server: RunningServer) -> None:
    pool: RenderPool = server.app.state.service.render_pool
    deadline = time.monotonic() + 30
    while None in pool.pids:  # started with the server
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = pool.pids
    url = server.base_url.replace("http://", "ws://") + "/v1/responses"
    body = json.dumps({"type": "response.create", "input": "lorem ipsum " * 100_000, "store": False})
    for _ in range(10):
        ws = ws_connect(url, compression=None)
        ws.send(body)
        time.sleep(0.02)
        # Gone while its 1.2 MB input renders: the connection dropped, no closing handshake (a client that
        # reads nothing cannot finish one once the echo's answer streams: its own receive queue is full).
        ws.socket.shutdown(socket.SHUT_RDWR)
        ws.socket.close()
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        reply = client.post("/v1/responses", json={"input": "x " * 20_000})  # rendered in a worker
        assert reply.status_code == 200 and reply.json()["status"] == "completed"
    assert pool.restarts == 0 and pool.pids == before


def test_start_returns_once_every_worker_has_loaded_the_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """start() waits for each worker's ready frame (sent after it loaded the encoding), so a server that says
    it serves is not loading vocabularies beside its first requests; a worker that dies first is an error."""
    import sys

    from trtllm_responses.core import ServerError

    async def started() -> list[list[int]]:
        pool = RenderPool(2)
        await pool.start()
        try:
            assert all(pid is not None for pid in pool.pids)
            # No worker is still loading: each answers at once, in step with the ready frame read.
            return await pool.render([_message("ready")])
        finally:
            await pool.aclose()

    assert asyncio.run(started())[0]

    async def dies_first() -> None:
        pool = RenderPool(1)
        try:
            await pool.start()
        finally:
            await pool.aclose()

    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(ServerError, match="failed to start"):
        asyncio.run(dies_first())
