"""Client disconnects abort the generation; concurrent continuations of one response stay independent."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time

import httpx
import pytest
from support.server_harness import RecordingEcho, ServerFactory, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding


@pytest.fixture
def paced_server(encoding: HarmonyEncoding, serve: ServerFactory):  # type: ignore[no-untyped-def]
    running = serve(RecordingEcho(encoding, tokens_per_second=200))
    yield running
    running.stop()


def test_client_disconnect_aborts_the_generation(paced_server) -> None:  # type: ignore[no-untyped-def]
    executor: RecordingEcho = paced_server.executor
    with httpx.Client(base_url=paced_server.base_url, timeout=30) as client:
        with client.stream(
            "POST", "/v1/responses", json={"input": "#lorem 5000", "stream": True}
        ) as response:
            lines = response.iter_lines()
            first = next(lines)
            assert first == "event: response.created"
            response_id = __import__("json").loads(next(lines)[len("data: ") :])["response"]["id"]
            for _ in range(20):
                next(lines)
        # The stream is closed mid-generation (5000 tokens at 200/s would take 25 s).
        deadline = time.monotonic() + 10
        while response_id not in executor.aborted and time.monotonic() < deadline:
            time.sleep(0.02)
        assert response_id in executor.aborted
        while executor._running and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not executor._running, "the aborted generation is still running"
        # Not stored: the response never finished.
        assert client.get(f"/v1/responses/{response_id}").status_code == 404
        # The server keeps serving.
        assert check_stream(stream_events(client, {"input": "#lorem 5"}))["status"] == "completed"


def test_finished_generations_are_not_aborted(paced_server) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=paced_server.base_url, timeout=30) as client:
        response = check_stream(stream_events(client, {"input": "done soon"}))
    assert response["id"] not in paced_server.executor.aborted


def test_concurrent_continuations_of_one_response(echo_server) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=echo_server.base_url, timeout=30) as client:
        root = client.post("/v1/responses", json={"input": "root"}).json()
        before = asyncio.run(echo_server.store.get(root["id"])).history

        def branch(n: int) -> dict:
            return client.post(
                "/v1/responses", json={"input": f"branch {n}", "previous_response_id": root["id"]}
            ).json()

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            branches = list(pool.map(branch, range(16)))
        assert all(b["status"] == "completed" for b in branches)
        assert asyncio.run(echo_server.store.get(root["id"])).history is before
        assert len(before.messages) == 3  # user, analysis, final: untouched by its 16 continuations
        for n, b in enumerate(branches):
            prompt = client.post(
                "/v1/responses", json={"input": "#prompt", "previous_response_id": b["id"]}
            ).json()
            text = prompt["output"][-1]["content"][0]["text"]
            assert f"branch {n}<|end|>" in text
            assert all(f"branch {m}<|end|>" not in text for m in range(16) if m != n)


def test_many_concurrent_streams_all_pass_the_grammar(echo_server) -> None:  # type: ignore[no-untyped-def]
    def one(n: int) -> dict:
        with httpx.Client(base_url=echo_server.base_url, timeout=60) as client:
            return check_stream(stream_events(client, {"input": f"#lorem {50 + n}"}))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(32)))
    assert len({r["id"] for r in results}) == 32
    assert all(r["status"] == "completed" for r in results)
