"""The files of the package a Responses body passes through, from the HTTP edge to ``Executor.generate``.

Run: ``.venv/bin/python scripts/request_walk.py [--stream] [--json]``.

One ``POST /v1/responses`` (a function tool, a user message, an instruction) is sent to the app built by
``create_app`` with the echo executor, in process, and a profile hook records each call into a module of
``trtllm_responses`` until the executor's ``generate`` is entered. It prints the files in the order they are
first entered, and the calls from a module of a lower layer into a module of a higher one (the layers of
docs/architecture.md#layout, bottom to top): climbs, by a name the caller's module imports (none should
exist), and callbacks, through a function the caller was handed (a transport's ``deliver``). What is counted is what ran for this request, not what the
code could reach: work done at start-up (the lifespan) or after the first token is not counted.
tests/package/test_request_walk.py holds the count to its bound.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trtllm_responses"
BODY = {
    "model": "gpt-oss-test",
    "instructions": "Answer briefly.",
    "input": [{"role": "user", "content": "What is the weather in Paris?"}],
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ],
}


def _layers() -> list[str]:
    """The layers, bottom to top, as the layering contract pins them (tests/package/test_layering.py)."""
    sys.path.insert(0, str(ROOT / "tests"))  # the contract's module imports the tests' support package
    spec = importlib.util.spec_from_file_location(
        "test_layering", ROOT / "tests" / "package" / "test_layering.py"
    )
    assert spec is not None and spec.loader is not None
    contract = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(contract)
    return list(contract.LAYERS)


LAYERS = _layers()


def layer_of(relative: str) -> int:
    """The index in :data:`LAYERS` of a package file's layer (``-1`` for the package's root modules)."""
    head = relative.split("/", 1)[0]
    return LAYERS.index(head) if head in LAYERS else -1


class Walk:
    """Records the package files entered, in order, and the calls into a higher layer: by import, or back."""

    def __init__(self) -> None:
        self.files: list[str] = []
        #: Calls into a higher layer by a name the caller's module imports (the layering forbids them).
        self.climbs: list[tuple[str, str]] = []
        #: Calls into a higher layer through a function the caller was handed (a transport's deliver).
        self.callbacks: list[tuple[str, str]] = []
        self.recording = False
        self.done = False
        self._prefix = str(PACKAGE) + "/"

    def _relative(self, frame: FrameType | None) -> str | None:
        if frame is None:
            return None
        name = frame.f_code.co_filename
        return name[len(self._prefix) :] if name.startswith(self._prefix) else None

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        """A ``sys.setprofile`` hook: each Python call into the package while recording."""
        if event != "call" or not self.recording or self.done:
            return
        callee = self._relative(frame)
        if callee is None:
            return
        if callee.startswith("executors/") and frame.f_code.co_name == "generate":
            self.done = True
        if callee not in self.files:
            self.files.append(callee)
        found = self._caller(frame.f_back)
        if found is None:
            return
        caller, caller_frame = found
        if caller != callee and layer_of(caller) < layer_of(callee):
            named = caller_frame.f_globals.get(frame.f_code.co_name)
            if getattr(named, "__code__", None) is frame.f_code:  # the caller's module names it: an import
                self.climbs.append((caller, callee))
            else:  # a function the caller was handed (a transport's deliver)
                self.callbacks.append((caller, callee))

    def _caller(self, frame: FrameType | None) -> tuple[str, FrameType] | None:
        """The nearest package file below ``frame`` on the stack (a call through a library still counts)."""
        while frame is not None:
            relative = self._relative(frame)
            if relative is not None:
                return relative, frame
            frame = frame.f_back
        return None


async def _lifespan(app: Callable[..., Any]) -> tuple[asyncio.Task[None], asyncio.Queue[dict[str, Any]]]:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()
        elif message["type"] == "lifespan.startup.failed":
            raise RuntimeError(message.get("message"))

    await inbox.put({"type": "lifespan.startup"})
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send))
    await asyncio.wait_for(started.wait(), 30)
    return task, inbox


async def walk(stream: bool) -> Walk:
    """One request through a fresh app, its walk recorded."""
    from trtllm_responses import (
        EchoExecutor,
        HarmonyAdapter,
        ServerConfig,
        create_app,
        load_encoding,
        open_store,
    )

    config = ServerConfig(served_model_name="gpt-oss-test", start_render_worker=False)
    store = open_store("memory", max_responses=100, max_bytes=1 << 20)
    encoding = load_encoding()
    app = create_app(config, EchoExecutor(encoding), store, HarmonyAdapter(encoding))
    lifespan, inbox = await _lifespan(app)
    recorder = Walk()
    body = json.dumps({**BODY, "stream": stream}).encode()
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()  # the client stays until the response ends
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    recorder.recording = True
    sys.setprofile(recorder.hook)
    threading.setprofile(recorder.hook)
    try:
        await app(scope, receive, send)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    if status != 200 or not recorder.done:
        raise SystemExit(f"the request did not reach the executor (status {status})")
    await inbox.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(lifespan, 30)
    return recorder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", action="store_true", help="send the request with stream: true")
    parser.add_argument("--json", action="store_true", help="print the walk as one JSON object")
    args = parser.parse_args(argv)
    result = asyncio.run(walk(args.stream))
    if args.json:
        print(json.dumps({"files": result.files, "climbs": result.climbs, "callbacks": result.callbacks}))
        return 0
    for index, name in enumerate(result.files, 1):
        print(f"{index:3} {name}")
    print(
        f"{len(result.files)} files; calls into a higher layer: {len(result.climbs)} by import, {len(result.callbacks)} back"
    )
    for caller, callee in result.climbs:
        print(f"    climb: {caller} -> {callee}")
    for caller, callee in result.callbacks:
        print(f"    callback: {caller} -> {callee}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
