"""Tenants across processes: a group of frontends (``serve --num_serve_frontends 2 --tenants FILE``) and
two replicas sharing one Redis.

- **Isolation** (docs/tenants.md#isolation): what one tenant stores or runs on one frontend is unknown to
  another tenant on the other, whether the other frontend reads the shared store, follows the Redis relay or
  hands the request to its peer (SQLite); the owner reaches it from either. The in-process matrix is
  ``tests/server/test_isolation.py``.
- **Limits** (docs/tenants.md#limits): the two frontends of a group on one SQLite file, and two replicas
  sharing one Redis, refuse the turn past a tenant's requests per window wherever it lands, and the group's
  ``/metrics`` counts the tenant's turns and refusals of both frontends; a tenant's stored bytes are one count
  for all of them (docs/tenants.md#stored-bytes), on Redis freed when its responses expire.
- **Reload** (docs/tenants.md#the-tenants-file): SIGHUP reloads the tenants file in every frontend of the
  group: a key added works, a key removed is refused, and a stream already running under a removed key
  finishes.

Each start of a group or a replica takes seconds (~13 s for a group on the 2-core machine), so the module
starts three: a group on SQLite, a group on Redis, two replicas on another Redis, all with one tenants file
(each its own copy) whose tenants are each test's own, so that no test sees another's turns, windows or
bytes. The reload test changes the SQLite group's table: it runs last on it.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.process_harness import ServeProcess, on_frontend
from support.redis_harness import RedisServer, redis_binary

from trtllm_responses.tenants import hash_key

#: Each test's tenants and keys (``key-<tenant>``); ``reload-c`` is added by the reload test.
TENANTS: dict[str, dict[str, Any]] = {
    "a": {},  # isolation: the owner
    "b": {},  # isolation: the other
    "window": {"requests_per_minute": 4},  # a group's window
    "bytes": {"max_stored_bytes": 1},  # a group's stored bytes
    "replica-window": {"requests_per_minute": 3},  # replicas' window
    "replica-bytes": {"max_stored_bytes": 1},  # replicas' stored bytes, freed by expiry
    "reload-a": {},  # reload: removed
    "reload-b": {},  # reload: kept
}
BODY = {"model": "m", "input": "hi"}
#: The groups' echo pace (tokens a second): a long ``#lorem`` is still running when a test acts on it.
PACE = 200


def key(tenant: str) -> str:
    return f"key-{tenant}"


def bearer(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key(tenant)}"}


def write_tenants(path: Path, names: list[str]) -> Path:
    """The tenants file of ``names`` (each with its :data:`TENANTS` limits) at ``path``."""
    table = {name: {"keys": [hash_key(key(name))], **TENANTS.get(name, {})} for name in names}
    path.write_text(json.dumps({"tenants": table}))
    return path


def redis_server() -> RedisServer:
    if redis_binary() is None:
        pytest.fail("redis-server is not installed: run `make test` (it installs it)")
    return RedisServer().start()


def stop(server: ServeProcess) -> None:
    if server.process is not None:
        server.terminate()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("frontend-tenants")


@pytest.fixture(scope="module")
def sqlite_group(folder: Path) -> Iterator[ServeProcess]:
    """A group of two frontends on one SQLite file; the reload test, its last, rewrites its tenants file."""
    tenants = write_tenants(folder / "sqlite-tenants.json", list(TENANTS))
    flags = ("--num_serve_frontends", "2", "--store", f"sqlite:///{folder / 'group.db'}")
    server = ServeProcess(*flags, "--tenants", str(tenants), "--echo_tokens_per_second", str(PACE))
    yield server.start()
    stop(server)


@pytest.fixture(scope="module")
def redis_group(folder: Path) -> Iterator[ServeProcess]:
    """A group of two frontends on a Redis of its own."""
    redis = redis_server()
    tenants = write_tenants(folder / "redis-tenants.json", list(TENANTS))
    flags = ("--num_serve_frontends", "2", "--store", redis.url, "--tenants", str(tenants))
    server = ServeProcess(*flags, "--echo_tokens_per_second", str(PACE))
    try:
        yield server.start()
        stop(server)
    finally:
        redis.stop()


@pytest.fixture(scope="module")
def replicas(folder: Path) -> Iterator[list[ServeProcess]]:
    """Two replicas sharing a Redis of their own; stored responses expire after 2 s."""
    redis = redis_server()
    tenants = write_tenants(folder / "replica-tenants.json", list(TENANTS))
    flags = ("--store", redis.url, "--store_ttl", "2", "--tenants", str(tenants))
    started: list[ServeProcess] = []
    try:
        for _ in range(2):
            started.append(ServeProcess(*flags).start())
        yield started
        for replica in started:
            stop(replica)
    finally:
        for replica in started:
            replica.kill()  # what a failed start left
        redis.stop()


# -- isolation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_a_tenants_responses_are_its_own_on_every_frontend(
    store: str, request: pytest.FixtureRequest
) -> None:
    server: ServeProcess = request.getfixturevalue(f"{store}_group")
    with closing(on_frontend(server, 0, bearer("a"))) as owner:
        stored = owner.post("/v1/responses", json={"model": "m", "input": "A's secret", "store": True})
        assert stored.status_code == 200, stored.text
        body = {"model": "m", "input": f"#lorem {PACE * 30}", "background": True, "store": True}  # ~30 s
        running = owner.post("/v1/responses", json=body).json()["id"]
    # tenant b on the other frontend, by Bearer and by Anthropic's x-api-key: unknown, as a made-up id
    fake = "resp_" + "0" * 32
    for headers in (bearer("b"), {"x-api-key": key("b")}):
        with closing(on_frontend(server, 1, headers)) as other:
            for the_id in (stored.json()["id"], running):
                for method, path in [
                    ("GET", "/v1/responses/{}"),
                    ("GET", "/v1/responses/{}?stream=true&starting_after=0"),
                    ("POST", "/v1/responses/{}/cancel"),
                    ("GET", "/v1/responses/{}/input_items"),
                    ("DELETE", "/v1/responses/{}"),
                ]:
                    theirs = other.request(method, path.format(the_id))
                    none = other.request(method, path.format(fake))
                    assert theirs.status_code == none.status_code == 404, (method, path, theirs.text)
                    assert theirs.text.replace(the_id, fake) == none.text
                follow = {"model": "m", "input": "go on", "previous_response_id": the_id}
                assert other.post("/v1/responses", json=follow).status_code == 404
    # tenant a reaches both from the other frontend, by either header
    with closing(on_frontend(server, 1, {"x-api-key": key("a")})) as owner_elsewhere:
        assert owner_elsewhere.get(f"/v1/responses/{stored.json()['id']}").json()["output"]
        assert owner_elsewhere.get(f"/v1/responses/{running}").json()["status"] in ("queued", "in_progress")
        cancelled = owner_elsewhere.post(f"/v1/responses/{running}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text


# -- limits ------------------------------------------------------------------------------------------------


def test_a_groups_frontends_count_one_window(sqlite_group: ServeProcess) -> None:
    tenant = bearer("window")
    remaining = []
    for index in (0, 1, 0, 1):
        with closing(on_frontend(sqlite_group, index)) as client:
            answer = client.post("/v1/responses", json=BODY, headers=tenant)
            assert answer.status_code == 200, answer.text
            remaining.append(answer.headers["x-ratelimit-remaining-requests"])
    assert remaining == ["3", "2", "1", "0"]
    for index in (0, 1):
        with closing(on_frontend(sqlite_group, index)) as client:
            refused = client.post("/v1/responses", json=BODY, headers=tenant)
            assert refused.status_code == 429 and refused.json()["error"]["type"] == "requests"
            assert int(refused.headers["retry-after"]) <= 60
    with closing(on_frontend(sqlite_group, 1)) as client:
        metrics = client.get("/metrics").text
    assert 'trtllm_tenant_requests_total{tenant="window"} 4.0' in metrics
    assert 'trtllm_tenant_refusals_total{tenant="window",type="requests"} 2.0' in metrics


def test_stored_bytes_are_one_count_for_a_groups_frontends(sqlite_group: ServeProcess) -> None:
    tenant = bearer("bytes")
    with closing(on_frontend(sqlite_group, 0)) as client:
        stored = client.post("/v1/responses", json=BODY, headers=tenant)
        assert stored.status_code == 200, stored.text  # under the limit (0 bytes): it overshoots by its own
    for index in (1, 0):
        with closing(on_frontend(sqlite_group, index)) as client:
            refused = client.post("/v1/responses", json=BODY, headers=tenant)
            assert refused.status_code == 429 and refused.json()["error"]["code"] == "insufficient_quota"
    with closing(on_frontend(sqlite_group, 1)) as client:
        assert client.delete(f"/v1/responses/{stored.json()['id']}", headers=tenant).status_code == 200
    with closing(on_frontend(sqlite_group, 0)) as client:
        assert client.post("/v1/responses", json=BODY, headers=tenant).status_code == 200


def test_replicas_sharing_redis_count_one_window(replicas: list[ServeProcess]) -> None:
    tenant = bearer("replica-window")
    for replica in (0, 1, 0):
        answer = httpx.post(
            replicas[replica].base_url + "/v1/responses", json=BODY, headers=tenant, timeout=30
        )
        assert answer.status_code == 200, answer.text
    for one in replicas:
        refused = httpx.post(one.base_url + "/v1/responses", json=BODY, headers=tenant, timeout=30)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limit_exceeded"


def test_replicas_sharing_redis_free_stored_bytes_when_they_expire(replicas: list[ServeProcess]) -> None:
    post = [
        partial(
            httpx.post, r.base_url + "/v1/responses", json=BODY, headers=bearer("replica-bytes"), timeout=30
        )
        for r in replicas
    ]
    assert post[0]().status_code == 200
    refused = post[1]()
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "insufficient_quota"
    time.sleep(2.5)  # the stored response expired, unseen: the check at the limit reconciles
    assert post[1]().status_code == 200
    assert post[0]().status_code == 429


# -- reload: last on the SQLite group (it rewrites the group's table) ------------------------------------


def statuses(server: ServeProcess, tenant: str, connections: int = 12) -> set[int]:
    """The statuses of ``GET /v1/models`` with ``tenant``'s key over new connections (the kernel spreads
    them over the group's frontends)."""
    seen = set()
    for _ in range(connections):
        with closing(httpx.Client(base_url=server.base_url, timeout=10)) as client:
            seen.add(client.get("/v1/models", headers=bearer(tenant)).status_code)
    return seen


def frontends_reached(server: ServeProcess, tries: int = 60) -> set[int]:
    reached = set()
    for _ in range(tries):
        with closing(httpx.Client(base_url=server.base_url, timeout=10)) as client:
            reached.add(client.get("/health").json()["frontend"])
    return reached


def test_sighup_reloads_every_frontend_and_open_streams_finish(
    sqlite_group: ServeProcess, folder: Path
) -> None:
    server = sqlite_group
    assert frontends_reached(server) == {0, 1}  # the connections below reach both
    assert statuses(server, "reload-a") == {200} and statuses(server, "reload-c") == {401}
    events: list[str] = []
    started = threading.Event()

    def stream_as_a() -> None:
        body: dict[str, Any] = {"model": "m", "input": f"#lorem {PACE * 3}", "stream": True}  # 3 s
        with httpx.stream(
            "POST", server.base_url + "/v1/responses", json=body, headers=bearer("reload-a"), timeout=60
        ) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:])["type"])
                    started.set()

    streaming = threading.Thread(target=stream_as_a)
    streaming.start()
    assert started.wait(30), "the stream began"
    others = [name for name in TENANTS if name != "reload-a"]
    write_tenants(folder / "sqlite-tenants.json", [*others, "reload-c"])  # reload-a removed, reload-c added
    assert server.process is not None
    server.process.send_signal(signal.SIGHUP)  # to the launcher: it tells the other frontend
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        statuses(server, "reload-c") != {200} or statuses(server, "reload-a") != {401}
    ):
        time.sleep(0.2)
    assert statuses(server, "reload-c", 24) == {200}, "a key added works on every frontend"
    assert statuses(server, "reload-a", 24) == {401}, "a key removed is refused on every frontend"
    assert statuses(server, "reload-b", 24) == {200}
    streaming.join(60)
    assert events[-1] == "response.completed", events[-3:]  # the stream begun under a finished
    assert server.process.poll() is None  # SIGHUP reloads, never stops the server
