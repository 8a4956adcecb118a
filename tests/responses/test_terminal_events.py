"""Every started stream ends with a terminal event, whichever stage fails.

A failure is injected at each stage of a response: prompt build (before the
stream starts: an error envelope), executor start, mid-stream, store write and
final serialization (after the stream started: ``response.failed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.server_harness import RunningServer, ServerFactory, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.executors.base import ExecutorError, GenerationRequest, TokenDelta
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.store import ConversationHistoryStore, StoredResponse
from trtllm_responses.tenants import hash_key


class FailingAtStart(EchoExecutor):
    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        raise ExecutorError("no engine")
        yield  # pragma: no cover


class FailingMidStream(EchoExecutor):
    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        count = 0
        async for delta in super().generate(request):
            yield delta
            count += 1
            if count == 8:
                raise RuntimeError("the engine fell over")


class FailingStore(ConversationHistoryStore):
    async def put(self, entry: StoredResponse) -> bool:
        raise OSError("disk full")


@pytest.fixture
def server(request: pytest.FixtureRequest, encoding, serve: ServerFactory) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    kind = request.param
    executor = {"start": FailingAtStart, "mid": FailingMidStream}.get(kind, EchoExecutor)(encoding)
    running = serve(executor, store=FailingStore() if kind == "store" else None)
    yield running
    running.stop()


def _both_ways(base_url: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        streamed = check_stream(stream_events(client, body))
        plain = client.post("/v1/responses", json=body)
    assert plain.status_code == 200, plain.text
    return streamed, plain.json()


@pytest.mark.parametrize("server", ["start", "mid", "store"], indirect=True)
def test_a_failure_after_the_stream_started_ends_it_with_response_failed(server: RunningServer) -> None:
    streamed, plain = _both_ways(server.base_url, {"input": "#lorem 40"})
    for response in (streamed, plain):
        assert response["status"] == "failed" and response["error"]["code"] == "server_error"


def test_a_response_whose_store_write_failed_reads_back_failed_not_404(
    encoding, serve: ServerFactory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """docs/stores-and-frontends.md#stores, "When Redis fails": its process answers the failed response to GET
    for the grace period, to its tenant alone. Before: background responses did; streamed and non-streamed
    ones were a 404."""
    tenants = tmp_path / "tenants.json"
    keys = {"a": "key-of-a", "b": "key-of-b"}
    tenants.write_text(json.dumps({"tenants": {n: {"keys": [hash_key(k)]} for n, k in keys.items()}}))
    with serve(EchoExecutor(encoding), store=FailingStore(), tenants_file=str(tenants)) as running:
        a = {"Authorization": f"Bearer {keys['a']}"}
        b = {"Authorization": f"Bearer {keys['b']}"}
        with httpx.Client(base_url=running.base_url, timeout=30, headers=a) as client:
            streamed = check_stream(stream_events(client, {"input": "#lorem 40"}))
            plain = client.post("/v1/responses", json={"input": "#lorem 40"}).json()
            for response in (streamed, plain):
                path = f"/v1/responses/{response['id']}"
                got = client.get(path)
                assert got.status_code == 200, got.text
                assert got.json() == response and "store" in got.json()["error"]["message"]
                replay = client.get(path, params={"stream": "true"})
                assert (
                    replay.status_code == 400 and replay.json()["error"]["param"] == "stream"
                )  # not background
                assert client.post(f"{path}/cancel").status_code == 400  # not a background response
                assert client.get(path, headers=b).status_code == 404  # another tenant's: unknown
                assert client.delete(path, headers=b).status_code == 404
            deleted = client.delete(f"/v1/responses/{plain['id']}")
            assert deleted.status_code == 200 and deleted.json()["deleted"] is True
            assert client.get(f"/v1/responses/{plain['id']}").status_code == 404
            assert client.get(f"/v1/responses/{streamed['id']}").json()["status"] == "failed"


class SlowFailingStore(ConversationHistoryStore):
    """A store write that waits until ``release`` is set, then fails (a Redis write timing out)."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()
        self.release = threading.Event()

    async def put(self, entry: StoredResponse) -> bool:
        self.writing.set()
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        raise OSError("timed out")


def test_get_shows_a_response_in_progress_until_its_store_write_settles_it(
    encoding, serve: ServerFactory
) -> None:  # type: ignore[no-untyped-def]
    """Before: while the final store write was under way, GET read the stream's terminal ``completed``,
    then ``failed`` once the write failed (seen in CI: tests/store/test_redis_outages.py)."""
    store = SlowFailingStore()
    with serve(EchoExecutor(encoding), store=store) as running, contextlib.ExitStack() as ends:
        ends.callback(store.release.set)  # the write ends, the test passed or not
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            created = client.post("/v1/responses", json={"input": "#lorem 40", "background": True}).json()
            assert store.writing.wait(30)
            during = client.get(f"/v1/responses/{created['id']}").json()
            assert during["status"] == "in_progress", during["status"]
            store.release.set()
            deadline = time.monotonic() + 30
            while (after := client.get(f"/v1/responses/{created['id']}").json())["status"] == "in_progress":
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert after["status"] == "failed" and "store" in after["error"]["message"]


@pytest.mark.parametrize("server", ["store"], indirect=True)
def test_failed_responses_kept_for_get_are_bounded(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BackgroundLimits.max_unstored_bytes`` (docs/limits.md): the oldest go first past it."""
    from trtllm_responses.responses import BackgroundLimits

    runs = server.app.state.service.runs
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        first = client.post("/v1/responses", json={"input": "#lorem 40"}).json()
        size = len(runs.unstored.get(first["id"]) or b"")
        assert size > 0
        monkeypatch.setattr(
            runs.unstored, "limits", BackgroundLimits(max_unstored_bytes=size * 2 + size // 2)
        )
        later = [client.post("/v1/responses", json={"input": "#lorem 40"}).json() for _ in range(2)]
        assert (
            client.get(f"/v1/responses/{first['id']}").status_code == 404
        )  # past the budget: the oldest went
        for response in later:
            assert client.get(f"/v1/responses/{response['id']}").json()["status"] == "failed"
        assert runs.unstored.nbytes <= size * 2 + size // 2 and len(runs.unstored) == 2


@pytest.mark.parametrize("server", ["serialize"], indirect=True)
def test_a_final_serialization_failure_ends_the_stream_with_response_failed(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trtllm_responses.responses import keeping  # where a run's result is serialized and stored

    real = keeping.to_json

    def to_json(model: Any) -> bytes:
        if getattr(model, "status", None) == "completed":
            raise ValueError("cannot serialize")
        return real(model)

    monkeypatch.setattr(keeping, "to_json", to_json)
    streamed, plain = _both_ways(server.base_url, {"input": "hello"})
    assert streamed["status"] == plain["status"] == "failed"
    assert streamed["output"][-1]["content"][0]["text"] == "hello"  # what was streamed is kept


@pytest.mark.parametrize("server", ["prompt"], indirect=True)
@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_build_failure_is_an_error_response_before_any_stream(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(server.app.state.service.adapter, "drafting", broken)
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        response = client.post("/v1/responses", json={"input": "x", "stream": stream})
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"
