"""WebSocket mode at shutdown and beyond one turn: draining (in-flight responses end, then 1012, and the
SDK's ``responses.connect()`` reconnects to the next server by itself), ``generate: false``, lanes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.lib.responses_websocket import AsyncResponsesWebSocketSession, ResponsesWebSocketLimits
from support.server_harness import RecordingEcho, RunningServer, ServerFactory
from support.stream_grammar import check_stream
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from trtllm_responses.store import open_store

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def _events(connection: Any) -> list[dict[str, Any]]:
    """One response's events from an SDK connection, up to its terminal event."""
    out: list[dict[str, Any]] = []
    for event in connection:
        data = event.model_dump(mode="json", exclude_unset=True, warnings=False)
        assert data["type"] != "error", data
        data.pop("stream_id", None)
        out.append(data)
        if data["type"] in TERMINAL:
            return out
    raise AssertionError("the connection ended before a terminal event")


def _ws_url(server: RunningServer) -> str:
    return server.base_url.replace("http://", "ws://") + "/v1/responses"


def test_drain_lets_the_running_response_end_then_the_sdk_reconnects_to_the_next_server(
    encoding,
    serve: ServerFactory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """A rolling restart behind one address: server A drains (its stream completes, then 1012), server B
    takes the port, and the SDK's connection reconnects to it by itself and continues the stored chain."""
    store_url = f"sqlite:///{tmp_path / 'responses.db'}"

    def shared_store() -> Any:  # each server opens the same SQLite file, as two replicas would
        return open_store(store_url, max_responses=100, max_bytes=1 << 26, ttl=0)

    first = serve(RecordingEcho(encoding, tokens_per_second=100), store=shared_store())
    port = int(first.base_url.rsplit(":", 1)[1])
    reconnects: list[int] = []
    second: RunningServer | None = None
    client = openai.OpenAI(
        base_url=first.base_url + "/v1", api_key="unused", max_retries=0, _strict_response_validation=True
    )
    try:
        with client.responses.connect(
            on_reconnecting=lambda event: reconnects.append(event.close_code) or None  # type: ignore[func-returns-value]
        ) as connection:
            connection.response.create(model="gpt-oss", input="#lorem 60", store=True)
            events: list[dict[str, Any]] = []
            for event in connection:
                events.append(event.model_dump(mode="json", exclude_unset=True, warnings=False))
                if event.type == "response.output_text.delta" and second is None:
                    # Mid-stream, A starts shutting down (as on SIGTERM); B takes the address.
                    first.server.should_exit = True
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline:
                        try:
                            second = serve(RecordingEcho(encoding), store=shared_store(), port=port)
                            break
                        except OSError:  # A still holds its listening socket
                            time.sleep(0.05)
                if event.type in TERMINAL:
                    break
            final = check_stream(events)
            assert final["status"] == "completed", final  # the drain let it finish
            assert final["output"][-1]["content"][0]["text"].count(" ") == 60
            assert second is not None
            first.thread.join(timeout=20)
            assert not first.thread.is_alive(), "server A did not finish draining"

            # The SDK notices the close in its receive loop and reconnects; a request sent meanwhile waits
            # in its send queue. The next turn goes to B over the new socket, continuing A's stored response.
            def next_turn() -> None:
                deadline = time.monotonic() + 20
                while not reconnects and time.monotonic() < deadline:
                    time.sleep(0.01)
                connection.response.create(
                    model="gpt-oss", input="#prompt", previous_response_id=final["id"], store=True
                )

            sender = threading.Thread(target=next_turn)
            sender.start()
            follow = _events(connection)
            sender.join()
        assert reconnects and reconnects[0] == 1012, reconnects
        assert follow[-1]["type"] == "response.completed"
        prompt = follow[-1]["response"]["output"][-1]["content"][0]["text"]
        assert "#lorem 60" in prompt and prompt.endswith("#prompt<|end|><|start|>assistant")
        assert [r.request_id for r in second.executor.requests] == [follow[-1]["response"]["id"]]  # type: ignore[attr-defined]
    finally:
        client.close()
        first.server.should_exit = True
        first.thread.join(timeout=10)
        if second is not None:
            second.stop()


def test_drain_refuses_what_has_not_started_and_closes_with_1012(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    running = serve(RecordingEcho(encoding, tokens_per_second=100))
    try:
        with ws_connect(_ws_url(running)) as ws:
            ws.send(json.dumps({"type": "response.create", "input": "#lorem 40"}))
            ws.send(json.dumps({"type": "response.create", "input": "queued behind it"}))
            received: list[dict[str, Any]] = []
            while True:
                received.append(json.loads(ws.recv(timeout=10)))
                if received[-1]["type"] == "response.output_text.delta":
                    break
            threading.Thread(target=running.stop, daemon=True).start()
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    received.append(json.loads(ws.recv(timeout=20)))
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        kinds = [e["type"] for e in received]
        assert kinds.count("response.completed") == 1 and "response.failed" not in kinds
        (error,) = [e for e in received if e["type"] == "error"]
        assert error["status"] == 503 and error["error"]["code"] == "server_restarting"
        check_stream([e for e in received if e["type"] != "error"])
        assert len(running.executor.requests) == 1  # type: ignore[attr-defined]
    finally:
        running.stop()


def test_a_drain_past_its_deadline_closes_with_1012_anyway(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    """A response that outlasts the drain deadline does not hold the shutdown: uvicorn closes with 1012."""
    running = serve(RecordingEcho(encoding, tokens_per_second=50), drain_timeout=1.0)
    try:
        with ws_connect(_ws_url(running)) as ws:
            ws.send(json.dumps({"type": "response.create", "input": "#lorem 2000"}))
            while json.loads(ws.recv(timeout=10))["type"] != "response.output_text.delta":
                pass
            started = time.monotonic()
            threading.Thread(target=running.stop, daemon=True).start()
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    assert json.loads(ws.recv(timeout=20))["type"] != "response.completed"
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert time.monotonic() - started < 15  # the deadline (1 s), not the response's 40 s
    finally:
        running.stop()


def test_generate_false_prepares_a_response_that_a_later_create_continues(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    running = serve(RecordingEcho(encoding))
    client = openai.OpenAI(
        base_url=running.base_url + "/v1", api_key="unused", max_retries=0, _strict_response_validation=True
    )
    try:
        with client.responses.connect() as connection:
            connection.response.create(
                model="gpt-oss", input="Remember the word tangerine.", store=False, generate=False
            )
            prepared = _events(connection)
            assert [e["type"] for e in prepared] == [
                "response.created",
                "response.in_progress",
                "response.completed",
            ]
            done = check_stream(prepared)
            assert done["output"] == [] and done["usage"]["output_tokens"] == 0
            assert done["usage"]["input_tokens"] > 0
            connection.response.create(
                model="gpt-oss", input="#prompt", previous_response_id=done["id"], store=False
            )
            follow = check_stream(_events(connection))
        prompt = follow["output"][-1]["content"][0]["text"]
        assert "Remember the word tangerine.<|end|><|start|>user<|message|>#prompt" in prompt
        # The prepared prompt went through the engine (prefill), one token and no more.
        (prefill,) = [r for r in running.executor.requests if r.request_id == done["id"]]  # type: ignore[attr-defined]
        assert prefill.sampling.max_tokens == 1
        # What was prefilled is the prefix of the next prompt (all of it but <|start|>assistant): the engine's
        # KV-cache block reuse serves it again.
        prompts = running.executor.prompts  # type: ignore[attr-defined]
        assert prompts[follow["id"]][: len(prompts[done["id"]]) - 2] == prompts[done["id"]][:-2]
        with client.responses.connect() as connection:
            connection.send({"type": "response.create", "model": "gpt-oss", "input": "x", "generate": "no"})  # type: ignore[typeddict-item]
            error = next(iter(connection)).model_dump()
        assert error["type"] == "error" and error["error"]["param"] == "generate"
    finally:
        client.close()
        running.stop()


async def test_lanes_run_side_by_side_and_fork_across_lanes_with_the_sdk_session(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    """``stream_id`` as the SDK types it: FIFO per lane, lanes concurrent, events echo their lane, and
    ``previous_response_id`` (lineage) is independent of the lane (routing)."""
    running = serve(RecordingEcho(encoding, tokens_per_second=200))
    client = openai.AsyncOpenAI(base_url=running.base_url + "/v1", api_key="unused", max_retries=0)
    try:
        limits = ResponsesWebSocketLimits(
            max_lanes=4,
            max_events_per_lane=1024,
            max_events=4096,
            max_bytes_per_lane=1 << 24,
            max_bytes=1 << 25,
        )
        async with (
            client.responses.connect() as connection,
            AsyncResponsesWebSocketSession(connection, limits=limits) as session,
        ):
            a, b = session.lane("a"), session.lane("b")
            await a.send(
                {"type": "response.create", "model": "gpt-oss", "input": "#lorem 30", "store": False}
            )
            await b.send(
                {"type": "response.create", "model": "gpt-oss", "input": "from lane b", "store": False}
            )
            first_a, first_b = await asyncio.gather(a.get_final_response(), b.get_final_response())
            assert first_a.output_text.count(" ") == 30 and first_b.output_text == "from lane b"
            # Lane b forks from lane a's response (connection-local state, store: false).
            await b.send(
                {
                    "type": "response.create",
                    "model": "gpt-oss",
                    "input": "#prompt",
                    "previous_response_id": first_a.id,
                    "store": False,
                }
            )
            fork = await b.get_final_response()
            assert "#lorem 30" in fork.output_text and "from lane b" not in fork.output_text
        starts = {r.request_id: i for i, r in enumerate(running.executor.requests)}  # type: ignore[attr-defined]
        assert starts[first_a.id] < starts[fork.id] and starts[first_b.id] < starts[fork.id]
    finally:
        await client.close()
        running.stop()
