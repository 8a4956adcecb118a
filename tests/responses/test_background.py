"""Background responses with the openai SDK: create, poll, cancel, resume (also after a disconnect).

Also: GET of a foreground response while it streams, and the 400s for what only background responses do.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest
from support.server_harness import RecordingEcho, ServerFactory, parse_sse, stream_events
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding


@pytest.fixture(scope="module")
def paced(encoding: HarmonyEncoding, serve: ServerFactory):  # type: ignore[no-untyped-def]
    running = serve(RecordingEcho(encoding, tokens_per_second=400))
    yield running
    running.stop()


@pytest.fixture
def client(paced) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    with openai.OpenAI(base_url=paced.base_url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture
def http(paced):  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=paced.base_url, timeout=60) as c:
        yield c


def wait_for(client: openai.OpenAI, response_id: str, statuses: set[str], timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        response = client.responses.retrieve(response_id)
        if response.status in statuses or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def replay(http: httpx.Client, response_id: str, starting_after: int | None = None) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"stream": "true"}
    if starting_after is not None:
        params["starting_after"] = starting_after
    with http.stream("GET", f"/v1/responses/{response_id}", params=params) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return parse_sse(response.iter_lines())


def test_background_create_returns_at_once_then_polls_to_completed(client: openai.OpenAI, http) -> None:  # type: ignore[no-untyped-def]
    created = client.responses.create(model="m", input="#lorem 200", background=True)
    assert created.background is True and created.status in ("queued", "in_progress")
    assert created.output == []
    seen = {client.responses.retrieve(created.id).status}
    done = wait_for(client, created.id, {"completed"})
    assert done.status == "completed" and done.background is True
    assert "in_progress" in seen or "queued" in seen
    # The whole stream can still be replayed, and it agrees with the stored response.
    final = check_stream(replay(http, created.id))
    assert (
        final["id"] == created.id
        and final["output"] == done.model_dump(mode="json", exclude_unset=True)["output"]
    )


def test_stream_background_survives_a_disconnect_and_resumes_with_the_sdk(
    client: openai.OpenAI, paced
) -> None:  # type: ignore[no-untyped-def]
    executor: RecordingEcho = paced.executor
    seen = []
    with client.responses.stream(model="m", input="#lorem 400", background=True) as stream:
        for event in stream:
            seen.append(event)
            if len(seen) == 12:
                break  # the client goes away mid-stream
    response_id = seen[0].response.id
    last = seen[-1].sequence_number
    time.sleep(0.2)
    assert response_id not in executor.aborted, "a background response must outlive its client"
    assert client.responses.retrieve(response_id).status == "in_progress"
    resumed = []
    with client.responses.stream(response_id=response_id, starting_after=last) as stream:
        for event in stream:
            resumed.append(event)
        final = stream.get_final_response()
    assert resumed[0].sequence_number == last + 1
    assert resumed[-1].type == "response.completed" and final.status == "completed"
    # Both halves make one whole stream.
    whole = [e.sequence_number for e in seen + resumed]
    assert whole == list(range(len(whole)))
    assert client.responses.retrieve(response_id).output_text == final.output_text


def test_retrieve_stream_true_with_starting_after(client: openai.OpenAI, http) -> None:  # type: ignore[no-untyped-def]
    created = client.responses.create(model="m", input="#lorem 30", background=True)
    wait_for(client, created.id, {"completed"})
    events = list(client.responses.retrieve(created.id, stream=True, starting_after=5))
    assert [e.sequence_number for e in events][0] == 6 and events[-1].type == "response.completed"
    raw = replay(http, created.id, starting_after=5)
    assert [e["sequence_number"] for e in raw] == [e.sequence_number for e in events]


def test_cancel_aborts_in_the_executor_and_is_idempotent(client: openai.OpenAI, paced, http) -> None:  # type: ignore[no-untyped-def]
    executor: RecordingEcho = paced.executor
    created = client.responses.create(model="m", input="#lorem 5000", background=True)
    wait_for(client, created.id, {"in_progress"})
    time.sleep(0.1)
    cancelled = client.responses.cancel(created.id)
    assert cancelled.status == "cancelled" and cancelled.id == created.id
    assert created.id in executor.aborted
    assert client.responses.cancel(created.id).status == "cancelled"
    assert client.responses.retrieve(created.id).status == "cancelled"
    # The recorded stream ends with a terminal event, whose response says cancelled.
    events = replay(http, created.id)
    final = check_stream(events)
    assert final["status"] == "cancelled" and events[-1]["type"] == "response.failed"
    # A finished response stays as it is.
    quick = client.responses.create(model="m", input="#lorem 3", background=True)
    wait_for(client, quick.id, {"completed"})
    assert client.responses.cancel(quick.id).status == "completed"


def test_cancel_and_stream_are_400_for_foreground_responses(client: openai.OpenAI, http) -> None:  # type: ignore[no-untyped-def]
    done = client.responses.create(model="m", input="#lorem 3")
    for call in (
        lambda: client.responses.cancel(done.id),
        lambda: list(client.responses.retrieve(done.id, stream=True)),
    ):
        with pytest.raises(openai.BadRequestError) as info:
            call()
        assert "background" in info.value.message
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_nope")
    assert http.get(f"/v1/responses/{done.id}", params={"starting_after": 2}).status_code == 400


def test_retrieve_during_a_foreground_stream_is_its_in_progress_snapshot(
    paced, client: openai.OpenAI
) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=paced.base_url, timeout=60) as http:
        with http.stream("POST", "/v1/responses", json={"input": "#lorem 2000", "stream": True}) as response:
            lines = response.iter_lines()
            assert next(lines) == "event: response.created"
            response_id = json.loads(next(lines)[len("data: ") :])["response"]["id"]
            for _ in range(40):
                next(lines)
            snapshot = client.responses.retrieve(response_id)
            assert snapshot.status == "in_progress" and snapshot.id == response_id
            assert snapshot.background is False
            # The reasoning item is done by now; the message is still streaming.
            assert [item.type for item in snapshot.output] == ["reasoning"]
            with pytest.raises(openai.BadRequestError) as info:
                list(client.responses.retrieve(response_id, stream=True))
            assert "background" in info.value.message


def test_background_needs_store(http) -> None:  # type: ignore[no-untyped-def]
    response = http.post("/v1/responses", json={"input": "x", "background": True, "store": False})
    assert response.status_code == 400 and response.json()["error"]["param"] == "background"


def test_event_buffers_are_bounded_and_dropped_after_the_grace_period(serve) -> None:  # type: ignore[no-untyped-def]
    from trtllm_responses.responses import BackgroundLimits

    running = serve()
    try:
        background = running.app.state.service.runs
        background.limits = BackgroundLimits(max_events=20, max_bytes=1 << 20, grace=3600.0)
        with httpx.Client(base_url=running.base_url, timeout=30) as http:
            created = http.post("/v1/responses", json={"input": "#lorem 100", "background": True}).json()
            deadline = time.monotonic() + 20
            while http.get(f"/v1/responses/{created['id']}").json()["status"] != "completed":
                assert time.monotonic() < deadline
                time.sleep(0.02)
            run = background.get(created["id"])
            assert run is not None and len(run.frames) == 20
            # Only the last 20 events are kept: older ones are a clear 400, the kept tail replays.
            old = http.get(f"/v1/responses/{created['id']}", params={"stream": "true", "starting_after": 3})
            assert old.status_code == 400 and "no longer kept" in old.json()["error"]["message"]
            tail = replay(http, created["id"], starting_after=run.first_sequence - 1)
            assert len(tail) == 20 and tail[-1]["type"] == "response.completed"
            background.limits = BackgroundLimits(max_events=20, max_bytes=1 << 20, grace=0.0)
            background._reap()
            assert background.get(created["id"]) is None
            gone = http.get(f"/v1/responses/{created['id']}", params={"stream": "true"})
            assert gone.status_code == 400 and "no longer kept" in gone.json()["error"]["message"]
            # The response itself is still stored.
            assert http.get(f"/v1/responses/{created['id']}").json()["status"] == "completed"
            assert check_stream(stream_events(http, {"input": "#lorem 3"}))["status"] == "completed"
    finally:
        running.stop()


def test_finished_runs_kept_for_replay_are_capped(serve) -> None:  # type: ignore[no-untyped-def]
    from trtllm_responses.responses import BackgroundLimits

    running = serve()
    try:
        background = running.app.state.service.runs
        # The server's reaper also runs every 5 s: the cap is lowered only once every run has ended.
        background.limits = BackgroundLimits(max_finished=1000)
        with httpx.Client(base_url=running.base_url, timeout=30) as http:
            ids = [
                http.post("/v1/responses", json={"input": "#lorem 5", "background": True}).json()["id"]
                for _ in range(6)
            ]
            deadline = time.monotonic() + 20
            while any(http.get(f"/v1/responses/{i}").json()["status"] != "completed" for i in ids):
                assert time.monotonic() < deadline
                time.sleep(0.02)
            by_end = sorted(ids, key=lambda i: background.kept[i].ended_at)
            background.limits = BackgroundLimits(max_finished=3)
            background._reap()
            assert sorted(background.kept) == sorted(by_end[3:])  # the three that ended last
            assert replay(http, by_end[-1])[-1]["type"] == "response.completed"
            dropped = http.get(f"/v1/responses/{by_end[0]}", params={"stream": "true"})
            assert dropped.status_code == 400 and "no longer kept" in dropped.json()["error"]["message"]
    finally:
        running.stop()


def test_cancel_right_after_create_lands(client: openai.OpenAI) -> None:
    """A cancel that may arrive before the executor started the generation still ends it cancelled."""
    for _ in range(5):
        created = client.responses.create(model="m", input="#lorem 5000", background=True)
        assert client.responses.cancel(created.id).status == "cancelled"
