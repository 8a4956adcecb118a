"""MCP servers that misbehave: huge results, redirects out of the allowed prefix, clients sending ``Host``.

Before: a 900 KB result made the mcp SDK's transport fail inside a task group whose cancel
scope the response's own task had entered, so the response's task was cancelled during its
next generation: a plain-text 500, a stream cut without a terminal event, a background response
lost (404), a WebSocket that hung. Now the session lives in its own task; the call is a failed
``mcp_call`` (or output cut to --tool_output_max_bytes with a note) and the response ends normally
on every transport.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.mcp_server import MCPTestServer, build_server
from support.mcp_server import _serve as serve_app
from support.server_harness import RunningServer, stream_events
from support.stream_grammar import check_stream
from websockets.sync.client import connect as ws_connect

from trtllm_responses.tools.settings import ToolSettings

OUTPUT_MAX = 2000


class _Redirecting:
    """The MCP app under ``/open``, and ``/mcp/redirect`` redirecting there (same origin, outside ``/mcp``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append(scope["path"])
            if scope["path"].startswith("/mcp/redirect"):
                await send(
                    {"type": "http.response.start", "status": 307, "headers": [(b"location", b"/open/mcp")]}
                )
                await send({"type": "http.response.body", "body": b""})
                return
            if scope["path"].startswith("/open/"):
                scope = {**scope, "path": scope["path"][len("/open") :], "raw_path": None}
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def redirecting() -> Iterator[tuple[str, _Redirecting]]:
    holder = MCPTestServer(url="", sse_url="")
    app = _Redirecting(build_server().streamable_http_app())
    origin = serve_app(app, holder)
    yield origin, app
    holder.stop()


@pytest.fixture(scope="module")
def server_options(mcp: MCPTestServer, redirecting: tuple[str, _Redirecting]) -> dict[str, Any]:
    settings = ToolSettings(
        mcp_allowed_urls=(mcp.url, redirecting[0] + "/mcp"),
        tool_timeout=30.0,
        tool_output_max_bytes=OUTPUT_MAX,
    )
    return {"tools": settings}


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


def body(mcp: MCPTestServer, n: int, **extra: Any) -> dict[str, Any]:
    tool = {"type": "mcp", "server_label": "demo", "server_url": mcp.url, "require_approval": "never"}
    return {"input": f'call demo.big {{"n": {n}}}', "tools": [tool], **extra}


def _call_item(response: dict[str, Any]) -> dict[str, Any]:
    return next(item for item in response["output"] if item["type"] == "mcp_call")


def _check_call(response: dict[str, Any], n: int) -> None:
    """The response ended normally; the call holds cut output or failed, and the model read it."""
    assert response["status"] == "completed", response.get("error")
    item = _call_item(response)
    if item["status"] == "completed":
        assert f"[output truncated: {n} bytes" in item["output"]
        assert len(item["output"].encode()) < OUTPUT_MAX + 200
    else:
        assert item["status"] == "failed" and item["error"]["message"]
    assert response["output"][-1]["type"] == "message"


SIZES = [900_000, 3_000_000]


@pytest.mark.parametrize("n", SIZES)
def test_non_streamed(http: httpx.Client, mcp: MCPTestServer, n: int) -> None:
    reply = http.post("/v1/responses", json=body(mcp, n))
    assert reply.status_code == 200, reply.text[:300]
    _check_call(reply.json(), n)


@pytest.mark.parametrize("n", SIZES)
def test_streamed(http: httpx.Client, mcp: MCPTestServer, n: int) -> None:
    _check_call(check_stream(stream_events(http, body(mcp, n))), n)


def test_background(http: httpx.Client, mcp: MCPTestServer) -> None:
    created = http.post("/v1/responses", json=body(mcp, SIZES[0], background=True)).json()
    deadline = time.monotonic() + 60
    while True:
        got = http.get(f"/v1/responses/{created['id']}")
        assert got.status_code == 200, got.text
        if got.json()["status"] not in ("queued", "in_progress"):
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    _check_call(got.json(), SIZES[0])


def test_websocket(server: RunningServer, mcp: MCPTestServer) -> None:
    url = server.base_url.replace("http://", "ws://") + "/v1/responses"
    with ws_connect(url, max_size=None) as ws:
        ws.send(json.dumps({"type": "response.create", **body(mcp, SIZES[0])}))
        while True:
            event = json.loads(ws.recv(timeout=60))
            assert event["type"] != "error", event
            if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                break
        _check_call(event["response"], SIZES[0])
        ws.send(json.dumps({"type": "response.create", "input": "still usable", "store": False}))
        while (event := json.loads(ws.recv(timeout=60)))["type"] != "response.completed":
            pass


def test_the_sdk_reads_a_normal_response(server: RunningServer, mcp: MCPTestServer) -> None:
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0) as client:
        response = client.responses.create(model="m", **body(mcp, SIZES[0]))
    assert response.status == "completed" and response.output_text


# -- where requests go ------------------------------------------------------------------------------


def test_a_redirect_out_of_the_allowed_prefix_is_not_followed(
    http: httpx.Client, redirecting: tuple[str, _Redirecting]
) -> None:
    origin, app = redirecting
    app.seen.clear()
    tool = {
        "type": "mcp",
        "server_label": "demo",
        "server_url": origin + "/mcp/redirect",
        "require_approval": "never",
    }
    response = http.post("/v1/responses", json={"input": "hello", "tools": [tool]}).json()
    listing = response["output"][0]
    assert listing["type"] == "mcp_list_tools" and listing["error"], listing
    assert "outside the allowed URLs" in listing["error"]
    assert app.seen and not any(path.startswith("/open") for path in app.seen), app.seen
    assert response["status"] == "completed"


@pytest.mark.parametrize(
    "name", ["Host", "host", "Connection", "Transfer-Encoding", "Upgrade", "X-Forwarded-Host", "Forwarded"]
)
def test_headers_that_could_redirect_the_request_are_refused(
    http: httpx.Client, mcp: MCPTestServer, name: str
) -> None:
    mcp.headers.clear()
    tool = {
        "type": "mcp",
        "server_label": "demo",
        "server_url": mcp.url,
        "require_approval": "never",
        "headers": {name: "evil.example"},
    }
    reply = http.post("/v1/responses", json={"input": "hello", "tools": [tool]})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == f"tools[0].headers.{name}"
    assert not any(h.get("host") == "evil.example" for h in mcp.headers)
