"""A real MCP server for the tests, built with the ``mcp`` package's MCPServer, served by uvicorn on loopback.

Tools: ``add`` (a + b), ``sleep`` (waits, then says so), ``boom`` (raises),
``big`` (returns N bytes), ``relay`` (returns its text: ``call LABEL.TOOL {json}``
makes the echo model call again), ``secret_tool`` (a second tool for
allowed_tools / per-tool approval). Every HTTP request's headers are recorded
(``MCPTestServer.headers``), and every JSON-RPC message POSTed with the headers of its request
(``MCPTestServer.messages``), so tests can see what reached the server.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

#: What each ``sleep`` call went through, by its ``seconds``: "started", then "finished" or "cancelled".
SLEEP_LOG: dict[float, list[str]] = {}


def build_server() -> MCPServer:
    server = MCPServer("trtllm-responses-test")

    @server.tool(description="Add two numbers.", annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(description="Sleep for some seconds.")
    async def sleep(seconds: float) -> str:
        log = SLEEP_LOG.setdefault(seconds, [])
        log.append("started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            log.append("cancelled")
            raise
        log.append("finished")
        return f"slept {seconds}"

    @server.tool(description="Always fails.")
    def boom() -> str:
        raise RuntimeError("boom went the tool")

    @server.tool(description="Return n bytes of text.")
    def big(n: int) -> str:
        return "x" * n

    @server.tool(description="Return the text given.")
    def relay(text: str) -> str:
        return text

    @server.tool(description="Another tool.")
    def secret_tool() -> str:
        return "secret"

    return server


class _HeaderRecorder:
    def __init__(
        self, app: Any, sink: list[dict[str, str]], messages: list[tuple[dict[str, str], Any]]
    ) -> None:
        self.app = app
        self.sink = sink
        self.messages = messages

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.sink.append(headers)
        chunks: list[bytes] = []

        async def recording() -> Any:
            message = await receive()
            if message["type"] == "http.request" and scope["method"] == "POST":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    self.messages.append((headers, json.loads(b"".join(chunks) or b"null")))
            return message

        await self.app(scope, recording, send)


@dataclass
class MCPTestServer:
    url: str  # streamable HTTP endpoint
    sse_url: str
    headers: list[dict[str, str]] = field(default_factory=list)
    #: Every JSON-RPC message POSTed (an SSE server's too), with its HTTP request's headers.
    messages: list[tuple[dict[str, str], Any]] = field(default_factory=list)
    servers: list[uvicorn.Server] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def stop(self) -> None:
        for server in self.servers:
            server.should_exit = True
        for thread in self.threads:
            thread.join(timeout=10)


def _serve(app: Any, running: MCPTestServer) -> str:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the MCP test server did not start")
        time.sleep(0.01)
    running.servers.append(server)
    running.threads.append(thread)
    return f"http://127.0.0.1:{port}"


def start_mcp_server() -> MCPTestServer:
    """Serve the test tools over streamable HTTP (``/mcp``) and SSE (``/sse``), each on its own port."""
    running = MCPTestServer(url="", sse_url="")
    mcp = build_server()
    messages = running.messages
    running.url = (
        _serve(_HeaderRecorder(mcp.streamable_http_app(), running.headers, messages), running) + "/mcp"
    )
    running.sse_url = (
        _serve(_HeaderRecorder(build_server().sse_app(), running.headers, messages), running) + "/sse"
    )
    return running


class SilentServer:
    """Accepts TCP connections and never answers (an MCP server that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def stop(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/mcp"
