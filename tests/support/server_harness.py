"""A real uvicorn server on loopback, in a background thread, for tests that drive it as a client would."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import Executor, GenerationRequest, TokenDelta
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.server import create_app
from trtllm_responses.server.config import ServerConfig
from trtllm_responses.server.http_protocol import uvicorn_config
from trtllm_responses.store import ResponseStore, open_store


class RecordingEcho(EchoExecutor):
    """The echo executor, keeping every generation's request and every abort, for tests to read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[GenerationRequest] = []
        self.aborted: list[str] = []
        #: Each generation's output token ids, by its request id (what the model wrote).
        self.outputs: dict[str, list[int]] = {}

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        self.requests.append(request)
        written = self.outputs[request.request_id] = []
        async for delta in super().generate(request):
            written += delta.token_ids
            yield delta

    def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)
        super().abort(request_id)

    @property
    def prompts(self) -> dict[str, list[int]]:
        """Each generation's prompt token ids, by its request id."""
        return {r.request_id: list(r.prompt_token_ids) for r in self.requests}


TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@dataclass
class RunningServer:
    base_url: str
    app: FastAPI
    executor: Executor
    store: ResponseStore
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(
    executor: Executor,
    adapter: HarmonyAdapter,
    store: Any = None,
    port: int = 0,
    drain_timeout: float = 35.0,
    **config: Any,
) -> RunningServer:
    """Serve ``executor`` with uvicorn on 127.0.0.1 and a free port (or ``port``); return when it accepts connections."""
    cfg = ServerConfig(**{"served_model_name": "gpt-oss-test", "start_render_worker": False, **config})
    if store is None:
        store = open_store(
            cfg.store,
            max_responses=cfg.max_stored_responses,
            max_bytes=cfg.max_store_bytes,
            ttl=cfg.store_ttl,
        )
    app = create_app(cfg, executor, store, adapter)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn_config(
            app, cfg.http, drain_timeout=drain_timeout, log_level="warning", access_log=False, lifespan="on"
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    return RunningServer(f"http://127.0.0.1:{port}", app, executor, store, server, thread)


def resident_bytes() -> int:
    """This process's resident set size (``VmRSS``): an in-process server's memory, with the test's."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    raise RuntimeError("no VmRSS in /proc/self/status")


class ServerFactory:
    """Starts test servers: the ``serve`` fixture (conftest.py), the one way a test gets a server.

    ``serve(executor=None, *, adapter=None, store=None, port=0, drain_timeout=35.0, **config)`` is
    :func:`start_server` with the session's encoding and adapter filled in: the executor defaults to a
    plain :class:`EchoExecutor`, ``config`` is any :class:`ServerConfig` field. Whoever starts a server
    stops it (``with serve(...) as running:``, or ``running.stop()``), when its scope ends; what is
    still running when the session ends is stopped then.
    """

    def __init__(self, encoding: HarmonyEncoding, adapter: HarmonyAdapter) -> None:
        self.encoding = encoding
        self.adapter = adapter
        self.started: list[RunningServer] = []

    def __call__(
        self,
        executor: Executor | None = None,
        *,
        adapter: HarmonyAdapter | None = None,
        store: Any = None,
        **config: Any,
    ) -> RunningServer:
        running = start_server(
            executor if executor is not None else EchoExecutor(self.encoding),
            adapter if adapter is not None else self.adapter,
            store=store,
            **config,
        )
        self.started.append(running)
        return running

    def stop_all(self) -> None:
        """Stop every server started here that is still running."""
        for running in reversed(self.started):
            if running.thread.is_alive():
                running.stop()
        self.started.clear()


def parse_sse(lines: Iterator[str]) -> list[dict[str, Any]]:
    """Events from SSE lines; checks each frame's ``event:`` name equals its data's type."""
    events = []
    name = None
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data = json.loads(line[len("data: ") :])
            assert data["type"] == name, f"event: {name} framed data of type {data['type']}"
            events.append(data)
            name = None
        else:
            assert line == "", f"unexpected SSE line {line!r}"
    return events


def stream_events(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a streaming request and return its parsed events."""
    with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return parse_sse(response.iter_lines())


def steps(*lines: str) -> str:
    """An echo executor ``#steps`` script: one model turn per line, in order."""
    return "#steps\n" + "\n---\n".join(lines)


def plain_event(event: Any) -> dict[str, Any]:
    """A stream event (an SDK model or a dict) as a plain dict without the WebSocket's ``stream_id``."""
    data = (
        event
        if isinstance(event, dict)
        else event.model_dump(mode="json", exclude_unset=True, warnings=False)
    )
    data = dict(data)
    data.pop("stream_id", None)
    return data


def until_terminal(events: Any) -> list[dict[str, Any]]:
    """Events of one response, up to and including its terminal event (error events raise)."""
    out: list[dict[str, Any]] = []
    for event in events:
        data = plain_event(event)
        if data["type"] == "error":
            raise AssertionError(f"unexpected error event: {data}")
        out.append(data)
        if data["type"] in TERMINAL:
            return out
    raise AssertionError("the socket closed before a terminal event")
