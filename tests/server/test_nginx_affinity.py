"""Session affinity in a real deployment: Debian's nginx, configured with ``examples/nginx-session-affinity.conf``
as it is, in front of two ``serve`` processes sharing one real redis-server
(docs/stores-and-frontends.md#session-affinity).

A 40-turn session stays on one replica; killing that replica moves the session to the other without
losing a turn (the store is shared; the KV cache is cold there). A turn in flight when its replica dies
fails, and the client's retry succeeds on the other replica. Each response says which replica answered
in ``x-upstream`` (nginx's ``$upstream_addr``, added by the test harness).

The tests share one deployment (each with session keys of its own), the one that kills a replica last on it;
the turn cut in flight has a paced deployment of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support.nginx_harness import Nginx, nginx_binary
from support.process_harness import ServeProcess
from support.redis_harness import RedisServer, redis_binary
from websockets.sync.client import connect as ws_connect

Deploy = Callable[..., tuple[Nginx, list[ServeProcess]]]


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    if redis_binary() is None or nginx_binary() is None:
        pytest.fail("redis-server and nginx are needed: run `make test` (it installs both with apt-get)")
    server = RedisServer().start()
    yield server
    server.stop()


def start_deployment(
    redis: RedisServer, database: int, started: list[Any], *flags: str
) -> tuple[Nginx, list[ServeProcess]]:
    """Two replicas on ``database`` of the shared Redis and nginx in front of them (each in ``started``)."""
    url = redis.url.rsplit("/", 1)[0] + f"/{database}"
    replicas = [ServeProcess("--store", url, *flags) for _ in range(2)]
    for replica in replicas:
        started.append(replica.start())
    nginx = Nginx([f"127.0.0.1:{r.port}" for r in replicas])
    started.append(nginx.start())
    return nginx, replicas


def stop_all(started: list[Any]) -> None:
    for thing in reversed(started):
        thing.stop() if isinstance(thing, Nginx) else thing.kill()


@pytest.fixture(scope="module")
def shared(redis: RedisServer) -> Iterator[tuple[Nginx, list[ServeProcess]]]:
    """The module's deployment (two replicas ~6 s each to start on the 2-core machine, and nginx): the tests
    that leave both replicas serving share it, each with session keys of its own; the 40-turn test, which
    kills a replica, runs last on it."""
    started: list[Any] = []
    try:
        yield start_deployment(redis, 1, started)
    finally:
        stop_all(started)


@pytest.fixture
def deploy(redis: RedisServer) -> Iterator[Deploy]:
    """A deployment of the test's own (a fresh database of the shared Redis)."""
    started: list[Any] = []
    database = [1]

    def start(*flags: str) -> tuple[Nginx, list[ServeProcess]]:
        database[0] += 1
        return start_deployment(redis, database[0], started, *flags)

    yield start
    stop_all(started)


def served_by(response: httpx.Response) -> int:
    """The port of the replica that answered (the last address nginx tried)."""
    return int(response.headers["x-upstream"].split(",")[-1].strip().rsplit(":", 1)[1])


def turn(http: httpx.Client, text: str, previous: str | None, **headers: str) -> httpx.Response:
    body: dict[str, Any] = {"model": "gpt-oss", "input": text}
    if previous is not None:
        body["previous_response_id"] = previous
    response = http.post("/v1/responses", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


def prompt_holds(http: httpx.Client, previous: str, texts: list[str]) -> None:
    """The session's whole history is there: ``#prompt`` (the echo executor) answers with the prompt."""
    prompt = turn(http, "#prompt", previous).json()["output"][-1]["content"][0]["text"]
    for text in texts:
        assert f"<|start|>user<|message|>{text}<|end|>" in prompt, f"{text!r} was lost"


def test_a_turn_in_flight_when_its_replica_dies_fails_and_its_retry_succeeds(deploy: Deploy) -> None:
    nginx, replicas = deploy("--echo_tokens_per_second", "200")
    ports = {r.port: r for r in replicas}
    with httpx.Client(base_url=nginx.base_url, headers={"session-id": "codex-thread-1"}, timeout=30) as http:
        first = turn(http, "first words", None)
        second = turn(http, "second words", first.json()["id"])
        owner = ports[served_by(second)]
        previous = second.json()["id"]
        body = {"model": "gpt-oss", "input": "#lorem 2000", "previous_response_id": previous, "stream": True}
        completed = False
        with pytest.raises(httpx.HTTPError):  # the stream is cut: no response.completed
            with http.stream("POST", "/v1/responses", json=body) as streamed:
                assert streamed.status_code == 200 and ports[served_by(streamed)] is owner
                for line in streamed.iter_lines():
                    if line.startswith("data: ") and '"response.output_text.delta"' in line:
                        owner.kill()
                    completed = completed or '"response.completed"' in line
        assert not completed
        retry = turn(http, "third words", previous)  # the client's retry, same previous_response_id
        assert ports[served_by(retry)] is not owner
        prompt_holds(http, retry.json()["id"], ["first words", "second words", "third words"])


def test_codex_and_clients_that_return_the_servers_key_stay_on_one_replica(
    shared: tuple[Nginx, list[ServeProcess]],
) -> None:
    nginx, _ = shared
    with httpx.Client(base_url=nginx.base_url, timeout=30) as http:
        # Codex: a session-id header (its thread id) on every request, the first one included.
        previous, seen = None, set()
        for n in range(6):
            answer = turn(
                http, f"codex {n}", previous, **{"session-id": "0195e3b4-5a6f-7c2d-9e01-23456789abcd"}
            )
            seen.add(served_by(answer))
            previous = answer.json()["id"]
        assert len(seen) == 1
        # A client with no key of its own: the first turn lands anywhere; it sends the x-session-id it got
        # back, and from the second turn on the session stays where that key hashes.
        first = turn(http, "plain 0", None)
        key = first.headers["x-session-id"]
        assert key == first.json()["id"]
        previous, seen = key, set()
        for n in range(1, 6):
            answer = turn(http, f"plain {n}", previous, **{"x-session-id": key})
            assert answer.headers["x-session-id"] == key
            seen.add(served_by(answer))
            previous = answer.json()["id"]
        assert len(seen) == 1
        # Codex 0.171's sub-agent (its thread under its tree) and Claude Code on /v1/messages: each thread's
        # turns stay on one replica, keyed by the thread (docs/sessions-and-kv-cache.md#identity).
        codex = {"session-id": "0195e3b4-tree", "thread-id": "0195e3b4-thread-2"}
        claude = {"x-claude-code-session-id": "cc-session", "x-claude-code-agent-id": "cc-agent-1"}
        message = {"model": "gpt-oss", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
        for path, headers, body, key in (
            (
                "/v1/responses",
                codex,
                {"model": "gpt-oss", "input": "hi", "store": False},
                "0195e3b4-thread-2",
            ),
            ("/v1/messages", claude, message, "cc-agent-1"),
        ):
            answers = [http.post(path, json=body, headers=headers) for _ in range(8)]
            assert {a.headers["x-session-id"] for a in answers} == {key}
            assert len({served_by(a) for a in answers}) == 1


def test_a_websocket_goes_through_with_its_key(shared: tuple[Nginx, list[ServeProcess]]) -> None:
    nginx, _ = shared
    url = nginx.base_url.replace("http://", "ws://") + "/v1/responses"
    with ws_connect(url, additional_headers={"x-session-id": "ws-session"}) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "gpt-oss", "input": "over a socket"}))
        while (event := json.loads(ws.recv()))["type"] != "response.completed":
            assert event["type"] != "error", event
    assert event["response"]["output"][-1]["content"][0]["text"]


def test_a_chain_keeps_its_key_across_replicas(shared: tuple[Nginx, list[ServeProcess]]) -> None:
    """The key is stored with each response in the shared store: a turn on the other replica, without
    a header, inherits it from the response it continues (no walk of the chain)."""
    _, (a, b) = shared
    with (
        httpx.Client(base_url=a.base_url, timeout=30) as on_a,
        httpx.Client(base_url=b.base_url, timeout=30) as on_b,
    ):
        first = turn(on_a, "hi", None, **{"x-multi-turn-session-id": "moved-session"})
        second = turn(on_b, "again", first.json()["id"])
        third = turn(on_a, "and again", second.json()["id"])
        assert [r.headers["x-session-id"] for r in (first, second, third)] == ["moved-session"] * 3


def test_a_40_turn_session_stays_on_one_replica_and_moves_when_it_is_killed(
    shared: tuple[Nginx, list[ServeProcess]],
) -> None:
    """Last on the shared deployment: it kills a replica."""
    nginx, replicas = shared
    ports = {r.port: r for r in replicas}
    key = "agent-session-40"
    with httpx.Client(base_url=nginx.base_url, headers={"x-session-id": key}, timeout=30) as http:
        previous = None
        seen = []
        for n in range(1, 41):
            answer = turn(http, f"turn {n}", previous)
            assert answer.headers["x-session-id"] == key
            seen.append(served_by(answer))
            previous = answer.json()["id"]
        assert len(set(seen)) == 1, f"the session moved between replicas: {seen}"
        owner = ports[seen[0]]
        (other,) = [r for r in replicas if r is not owner]
        owner.kill()  # SIGKILL: nothing of it runs again
        for n in range(41, 46):
            answer = turn(http, f"turn {n}", previous)
            assert served_by(answer) == other.port and answer.headers["x-session-id"] == key
            previous = answer.json()["id"]
        assert previous is not None
        prompt_holds(http, previous, [f"turn {n}" for n in range(1, 46)])
