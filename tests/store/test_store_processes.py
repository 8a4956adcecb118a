"""Stores through real ``serve`` processes: SQLite across a SIGKILL, Redis shared by two, Redis going away.

The two tests of two processes on one Redis share one pair (each a few seconds to start on the 2-core
machine), paced so that a long background response is still running when it is cancelled."""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest
from support.background_checks import check_background_across
from support.process_harness import ServeProcess

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_sqlite_keeps_conversations_across_a_sigkill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServeProcess("--store", f"sqlite:///{tmp_path / 'responses.db'}").start()
    try:
        with server.sdk() as client:
            first = client.responses.create(model="m", input="Weather in Paris?", tools=[WEATHER])
            call = next(item for item in first.output if item.type == "function_call")
            second = client.responses.create(
                model="m",
                previous_response_id=first.id,
                input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
                tools=[WEATHER],
            )
        server.kill()  # SIGKILL: nothing is flushed by the server
        server.start()
        with server.sdk() as client:
            assert client.responses.retrieve(first.id).output[-1].type == "function_call"
            assert client.responses.retrieve(second.id).status == "completed"
            items = client.responses.input_items.list(second.id)
            assert [i.type for i in items.data] == ["function_call_output"]
            # The continued conversation holds everything before the kill (the echo shows the prompt).
            third = client.responses.create(model="m", previous_response_id=second.id, input="#prompt")
            prompt = third.output_text
            assert "Weather in Paris?" in prompt and "sunny" in prompt
    finally:
        server.kill()


@pytest.fixture(scope="module")
def pair(redis_server) -> Iterator[tuple[ServeProcess, ServeProcess]]:  # type: ignore[no-untyped-def]
    """Two processes on the session's Redis (emptied first), the echo at 100 tokens a second."""
    redis_server.flush()
    paced = ("--store", redis_server.url, "--echo_tokens_per_second", "100")
    a = ServeProcess(*paced)
    b = ServeProcess(*paced)
    try:
        yield a.start(), b.start()
    finally:
        a.kill()
        b.kill()


def test_two_processes_share_one_redis(pair: tuple[ServeProcess, ServeProcess]) -> None:
    a, b = pair
    with a.sdk() as on_a, b.sdk() as on_b:
        first = on_a.responses.create(model="m", input="Weather in Oslo?", tools=[WEATHER])
        call = next(item for item in first.output if item.type == "function_call")
        assert on_b.responses.retrieve(first.id).id == first.id
        second = on_b.responses.create(
            model="m",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "snow"}],
            tools=[WEATHER],
        )
        third = on_a.responses.create(model="m", previous_response_id=second.id, input="#prompt")
        assert "Weather in Oslo?" in third.output_text and "snow" in third.output_text
        on_b.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            on_a.responses.retrieve(first.id)


def test_redis_going_away_is_503_then_recovers() -> None:
    from support.redis_harness import RedisServer

    redis = RedisServer().start()
    server = ServeProcess("--store", redis.url).start()
    try:
        with server.sdk() as client:
            first = client.responses.create(model="m", input="hello")
            redis.stop()
            started = time.monotonic()
            for call in (
                lambda: client.responses.retrieve(first.id),
                lambda: client.responses.create(model="m", input="again", previous_response_id=first.id),
                lambda: client.responses.delete(first.id),
            ):
                with pytest.raises(openai.InternalServerError) as info:
                    call()
                assert info.value.status_code == 503
                assert info.value.body["code"] == "service_unavailable"  # type: ignore[index]
            assert time.monotonic() - started < 30, "an unreachable store must fail fast, not hang"
            # A response that needs no store is still served; one that asked to be stored is a 503 before
            # anything is generated (tests/store/test_redis_outages.py).
            assert client.responses.create(model="m", input="#lorem 3", store=False).status == "completed"
            with pytest.raises(openai.InternalServerError) as info:
                client.responses.create(model="m", input="#lorem 3")
            assert info.value.status_code == 503
            redis.start()  # back, empty (no persistence)
            again = client.responses.create(model="m", input="hello again")
            assert client.responses.retrieve(again.id).status == "completed"
    finally:
        server.kill()
        redis.stop()


def test_background_responses_across_two_processes(pair: tuple[ServeProcess, ServeProcess]) -> None:
    """Started on A: polled, resumed and cancelled on B (events and cancels go through Redis)."""
    a, b = pair
    with a.sdk() as on_a, b.sdk() as on_b:
        check_background_across(on_a, on_b, pace=100)
