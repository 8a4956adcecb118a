"""Redis dying under two real ``serve`` processes: every promise of docs/stores-and-frontends.md#stores still holds.

Before: a replica following another's background response through Redis had its stream cut with
no terminal event when Redis died; the owner's response, whose final store write failed, was a 404
forever without a word; ``store: true`` requests generated in full and answered 200 ``failed``
while Redis was down, where docs/stores-and-frontends.md#stores promises a 503.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from support.process_harness import ServeProcess
from support.redis_harness import RedisServer, redis_binary

pytestmark = pytest.mark.skipif(
    redis_binary() is None, reason="redis-server is not installed (make test installs it)"
)


def test_store_true_while_redis_is_down_is_a_503_before_generating() -> None:
    redis = RedisServer().start()
    server = ServeProcess("--store", redis.url).start()
    try:
        with server.sdk() as client:
            redis.stop()
            began = time.monotonic()
            for stream in (False, True):
                with pytest.raises(openai.InternalServerError) as info:
                    client.responses.create(model="m", input="#lorem 20000", stream=stream)
                assert info.value.status_code == 503
                assert info.value.body["code"] == "service_unavailable"  # type: ignore[index]
            assert time.monotonic() - began < 15  # not 20,000 tokens generated first
            redis.start()
            stats = httpx.get(server.base_url + "/stats", timeout=10).json()
            assert stats["output_tokens"] == 0, "nothing was generated for the refused requests"
            assert client.responses.create(model="m", input="fine", store=False).status == "completed"
            assert client.responses.create(model="m", input="back").status == "completed"
    finally:
        server.kill()
        redis.stop()


@contextlib.contextmanager
def _two_replicas() -> Iterator[tuple[RedisServer, openai.OpenAI, openai.OpenAI]]:
    """A redis-server and two paced ``serve`` processes sharing it (A and B), killed afterwards."""
    redis = RedisServer().start()
    paced = ("--store", redis.url, "--echo_tokens_per_second", "100")
    a, b = ServeProcess(*paced), ServeProcess(*paced)
    try:  # a process that does not start leaves none behind, Redis included
        a.start()
        b.start()
        with a.sdk() as on_a, b.sdk() as on_b:
            yield redis, on_a, on_b
    finally:
        a.kill()
        b.kill()
        redis.stop()


def test_a_follower_gets_a_terminal_event_and_the_owner_reports_the_failed_write() -> None:
    with _two_replicas() as (redis, on_a, on_b):
        created = on_a.responses.create(model="m", input="#lorem 2000", background=True)
        deadline = time.monotonic() + 30
        while on_b.responses.retrieve(created.id).status == "queued":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        events = []
        with on_b.responses.stream(response_id=created.id, starting_after=0) as stream:
            for event in stream:
                events.append(event)
                if len(events) == 20:
                    redis.stop()  # Redis dies under the follower
        assert events[-1].type == "response.failed", [e.type for e in events[-3:]]
        assert "Redis" in events[-1].response.error.message  # type: ignore[union-attr]
        seqs = [e.sequence_number for e in events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # the terminal event follows on
        # The owner finishes generating; its store write fails; it says so instead of a 404.
        deadline = time.monotonic() + 120
        while (owner := on_a.responses.retrieve(created.id)).status in ("queued", "in_progress"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert owner.status == "failed" and "store" in owner.error.message  # type: ignore[union-attr]


def _wait_status(client: openai.OpenAI, response_id: str, done: set[str], timeout: float) -> str:
    """Poll until the response's status is in ``done`` (a 404 counts as "missing"); the status."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = client.responses.retrieve(response_id).status or ""
        except openai.NotFoundError:
            status = "missing"
        except openai.InternalServerError:  # 503 while Redis is down
            status = "unavailable"
        if status in done or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def test_redis_back_every_replica_serves_the_run_its_owner_copies_again() -> None:
    # Before: the owner's copy of the run to Redis stopped at its first error, so when Redis came back
    # (empty) another replica answered 404 for the rest of the run and, its store write failed, after it.
    with _two_replicas() as (redis, on_a, on_b):
        # 1. Redis is down for a while and back while the run goes on: B sees it running, then done.
        created = on_a.responses.create(model="m", input="#lorem 800", background=True)
        assert _wait_status(on_b, created.id, {"in_progress"}, 30) == "in_progress"
        redis.stop()
        time.sleep(1.5)
        redis.start()
        assert _wait_status(on_b, created.id, {"in_progress", "completed"}, 5) in (
            "in_progress",
            "completed",
        )
        assert _wait_status(on_b, created.id, {"completed"}, 60) == "completed"
        events = list(on_b.responses.retrieve(created.id, stream=True, starting_after=-1))  # type: ignore[call-overload]
        assert events[0].sequence_number == 0 and events[-1].type == "response.completed"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        # 2. Redis is down when the run ends (its store write fails): once Redis is back, B serves
        # the failed response the owner reports, within a few seconds.
        created = on_a.responses.create(model="m", input="#lorem 300", background=True)
        assert _wait_status(on_b, created.id, {"in_progress"}, 30) == "in_progress"
        redis.stop()
        owner = _wait_status(on_a, created.id, {"failed", "completed"}, 60)
        assert owner == "failed"
        redis.start()
        began = time.monotonic()
        assert _wait_status(on_b, created.id, {"failed"}, 10) == "failed"
        assert time.monotonic() - began < 5
        failed = on_b.responses.retrieve(created.id)
        assert "store" in failed.error.message  # type: ignore[union-attr]


def _read_back_failed(on_a: openai.OpenAI, on_b: openai.OpenAI, response_id: str) -> None:
    """``response_id`` reads back ``failed`` (a store error) on its process and on the other replica."""
    assert on_a.responses.retrieve(response_id).status == "failed"
    assert _wait_status(on_b, response_id, {"failed"}, 10) == "failed"
    assert "store" in on_b.responses.retrieve(response_id).error.message  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError):  # not a background response: no events to replay
        on_b.responses.retrieve(response_id, stream=True)


def test_a_stored_response_whose_write_failed_reads_back_failed_everywhere() -> None:
    """docs/stores-and-frontends.md#stores, "When Redis fails": a response whose final store write failed is
    answered ``failed`` to GET for the grace period, by its process (Redis down or not) and, once Redis is back,
    by every other. Before: background responses were; a streamed or non-streamed one was a 503 on its process
    while Redis was down and a 404 on both after (12 of 12)."""
    with _two_replicas() as (redis, on_a, on_b):
        # Streamed: Redis dies mid-stream, the stream ends failed (its write failed).
        events = []
        with on_a.responses.stream(model="m", input="#lorem 1000") as stream:  # 10 s
            for event in stream:
                events.append(event)
                if len(events) == 5:
                    redis.stop()
        streamed = events[-1].response  # type: ignore[union-attr]
        assert events[-1].type == "response.failed" and "store" in streamed.error.message  # type: ignore[union-attr]
        # Redis down: its process answers it all the same.
        assert on_a.responses.retrieve(streamed.id).model_dump() == streamed.model_dump()
        redis.start()  # back, empty: the owner copies it there, and every replica answers it
        _read_back_failed(on_a, on_b, streamed.id)
        # Not streamed: Redis dies while it is generated. (Redis restarts empty again, so what the owner had
        # copied there is gone with it: a store without persistence keeps nothing across its own restart.)
        stopper = threading.Timer(1.0, redis.stop)
        stopper.start()
        plain = on_a.responses.create(model="m", input="#lorem 1000")
        stopper.join()
        assert plain.status == "failed" and "store" in plain.error.message  # type: ignore[union-attr]
        assert on_a.responses.retrieve(plain.id).model_dump() == plain.model_dump()
        redis.start()  # back, empty
        _read_back_failed(on_a, on_b, plain.id)
        on_b.responses.delete(plain.id)  # forgotten everywhere
        with pytest.raises(openai.NotFoundError):
            on_b.responses.retrieve(plain.id)
