"""``serve --num_serve_frontends 2``: two processes on one port, the store shared, every feature through
either (docs/stores-and-frontends.md#many-frontends-num_serve_frontends). The module starts one group on
SQLite and one on Redis (each ~13 s to start on the 2-core machine) and its tests share them: each test uses
ids of its own and counts what it adds (metrics, stats) from what was there before it. The two tests that end
a group run last on it: a frontend killed ends the Redis group, SIGTERM drains the SQLite one. The
TensorRT-LLM group (the fake) is its own.

Which frontend answers a connection is the kernel's choice (``SO_REUSEPORT``); a test that needs a given
one opens connections until ``/health`` on that connection names it, then sends its request on it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.background_checks import check_background_across
from support.process_harness import ServeProcess, on_frontend
from support.redis_harness import RedisServer, redis_binary

from trtllm_responses.server import MAX_SERVE_FRONTENDS


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid``, that run ``serve`` (the attached frontends)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"trtllm_responses.cli" in cmdline:
            found.append(int(entry.name))
    return found


#: The groups' echo pace: fast enough for chains of turns, slow enough that a long ``#lorem`` is still
#: running when a test cancels it or stops the group (tokens a second).
PACE = 1000


def start_group(store: str, env: dict[str, str] | None = None) -> Iterator[ServeProcess]:
    server = ServeProcess(
        "--num_serve_frontends", "2", "--store", store, "--echo_tokens_per_second", str(PACE), env=env
    )
    server.start()
    yield server
    if server.process is not None:
        if server.process.poll() is None:
            server.terminate()
        else:
            server.process = None


@pytest.fixture(scope="module")
def key_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SQLite group's own cache folder (``TRTLLM_RESPONSES_CACHE``): where its launcher makes the key."""
    return tmp_path_factory.mktemp("frontends") / "cache"


@pytest.fixture(scope="module")
def sqlite_group(key_cache: Path) -> Iterator[ServeProcess]:
    """The module's group on SQLite; its last test (SIGTERM) stops it."""
    store = f"sqlite:///{key_cache.parent / 'group.db'}"
    yield from start_group(store, env={"TRTLLM_RESPONSES_CACHE": str(key_cache)})


@pytest.fixture(scope="module")
def redis_group() -> Iterator[ServeProcess]:
    """The module's group on a Redis of its own; its last test (a frontend killed) ends it."""
    if redis_binary() is None:
        pytest.fail("redis-server is not installed: run `make test` (it installs it)")
    redis = RedisServer().start()
    try:
        yield from start_group(redis.url)
    finally:
        redis.stop()


def test_two_frontends_answer_on_one_port(sqlite_group: ServeProcess) -> None:
    seen = set()
    for _ in range(60):
        with httpx.Client(base_url=sqlite_group.base_url, timeout=10) as client:
            seen.add(client.get("/health").json()["frontend"])
        if seen == {0, 1}:
            break
    assert seen == {0, 1}
    assert sqlite_group.process is not None
    assert len(children_of(sqlite_group.process.pid)) == 1


def test_a_memory_store_is_refused_with_the_command_that_works(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "trtllm_responses.cli", "serve", "--num_serve_frontends", "2"]
    result = subprocess.run(command + ["--port", "0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--store sqlite:///PATH" in result.stderr and "--store redis://" in result.stderr


def test_the_frontend_count_is_bounded() -> None:
    command = [sys.executable, "-m", "trtllm_responses.cli", "serve", "--num_serve_frontends"]
    result = subprocess.run(
        command + [str(MAX_SERVE_FRONTENDS + 1)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and f"at most {MAX_SERVE_FRONTENDS} frontends" in result.stderr


def completed_responses(client: httpx.Client) -> float:
    """The ``trtllm_responses_total`` lines of ``/metrics`` on ``client``'s frontend: only ``completed``,
    its count."""
    text = client.get("/metrics").text
    lines = [line for line in text.splitlines() if line.startswith("trtllm_responses_total{")]
    assert len(lines) <= 1 and all(
        ln.startswith('trtllm_responses_total{status="completed"} ') for ln in lines
    ), text
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


def test_metrics_count_the_whole_group(sqlite_group: ServeProcess) -> None:
    with closing(on_frontend(sqlite_group, 0)) as client:
        before = completed_responses(client)
    for index in (0, 1, 0, 1, 1, 0):
        with closing(on_frontend(sqlite_group, index)) as client:
            answer = client.post("/v1/responses", json={"model": "m", "input": "hi"})
            assert answer.status_code == 200
    for index in (0, 1):
        with closing(on_frontend(sqlite_group, index)) as client:
            assert completed_responses(client) == before + 6  # each frontend counts the group's


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_a_chain_of_50_continuations_each_on_a_new_connection(
    store: str, request: pytest.FixtureRequest
) -> None:
    server: ServeProcess = request.getfixturevalue(f"{store}_group")
    previous = None
    frontends = []
    for turn in range(50):
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            frontends.append(client.get("/health").json()["frontend"])
            body: dict[str, Any] = {"model": "m", "input": f"turn {turn}", "store": True}
            if previous is not None:
                body["previous_response_id"] = previous
            answer = client.post("/v1/responses", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "completed"
            previous = answer.json()["id"]
    assert set(frontends) == {0, 1}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        items = client.get(f"/v1/responses/{previous}/input_items", params={"limit": 100}).json()
    assert items["data"][0]["content"][0]["text"] == "turn 49"


def test_a_conversation_driven_from_both(sqlite_group: ServeProcess) -> None:
    with closing(on_frontend(sqlite_group, 0)) as client:
        conversation = client.post("/v1/conversations", json={}).json()["id"]
    for turn, index in enumerate((0, 1, 0, 1)):
        with closing(on_frontend(sqlite_group, index)) as client:
            body = {"model": "m", "input": f"turn {turn}", "conversation": conversation}
            answer = client.post("/v1/responses", json=body)
            assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    with closing(on_frontend(sqlite_group, 1)) as client:
        items = client.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()["data"]
    users = [i["content"][0]["text"] for i in items if i.get("role") == "user"]
    assert users == ["turn 0", "turn 1", "turn 2", "turn 3"]


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_background_runs_are_followed_and_cancelled_through_the_other_frontend(
    store: str, request: pytest.FixtureRequest
) -> None:
    """Redis: through the relay of several replicas; SQLite: the frontend running it answers the other."""
    server: ServeProcess = request.getfixturevalue(f"{store}_group")
    with closing(on_frontend(server, 0)) as owner:
        body = {"model": "m", "input": f"#lorem {PACE * 3}", "background": True, "store": True}
        followed = owner.post("/v1/responses", json=body).json()["id"]  # 3 s: running when looked at
        body = {**body, "input": f"#lorem {PACE * 50}"}  # 50 s: still running when cancelled
        cancelled = owner.post("/v1/responses", json=body).json()["id"]
    with closing(on_frontend(server, 1)) as other:
        answer = other.post(f"/v1/responses/{cancelled}/cancel")
        assert answer.status_code == 200 and answer.json()["status"] == "cancelled", answer.text
        assert other.get(f"/v1/responses/{followed}").json()["status"] in ("queued", "in_progress")
        events = []
        with other.stream("GET", f"/v1/responses/{followed}", params={"stream": "true"}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:])["type"])
        assert events[-1] == "response.completed" and "response.output_text.delta" in events


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_the_group_passes_the_background_checks_of_two_redis_replicas(
    store: str, request: pytest.FixtureRequest
) -> None:
    """The check two ``serve`` processes on one Redis pass (``support/background_checks.py``), with A and B the
    group's two frontends. Before: on SQLite, replaying a finished background response on the frontend that
    did not run it was a 400 "no longer kept" (the group handed a request on only on a 404)."""
    server: ServeProcess = request.getfixturevalue(f"{store}_group")
    with sdk_on(server, 0) as on_a, sdk_on(server, 1) as on_b:
        check_background_across(on_a, on_b, pace=PACE)


def sdk_on(server: ServeProcess, index: int) -> openai.OpenAI:
    """An ``openai`` client whose one connection is served by frontend ``index`` (no retries)."""
    pinned = on_frontend(server, index)
    return openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=30, http_client=pinned
    )


def test_stats_are_the_whole_group_and_reset_for_it(sqlite_group: ServeProcess) -> None:
    def stats_of(index: int) -> dict[str, Any]:
        with closing(on_frontend(sqlite_group, index)) as client:
            return client.get("/stats").json()  # type: ignore[no-any-return]

    with closing(on_frontend(sqlite_group, 0)) as client:
        assert client.get("/stats", params={"reset": "1"}).status_code == 200
    before = stats_of(1)["responses"]
    for index in (0, 1, 1, 0, 1):
        with closing(on_frontend(sqlite_group, index)) as client:
            assert client.post("/v1/responses", json={"model": "m", "input": "hi"}).status_code == 200
    for index in (0, 1):
        stats = stats_of(index)
        assert stats["responses"] == before + 5 and stats["server_added_latency"]["count"] == 5, stats
        assert stats["frontends"] == 2 and stats["frontends_missing"] == []
    with closing(on_frontend(sqlite_group, 1)) as client:
        assert client.get("/stats", params={"reset": "1"}).status_code == 200
    assert stats_of(0)["server_added_latency"]["count"] == 0  # both were reset


def test_encrypted_reasoning_made_by_one_frontend_is_opened_by_the_other(
    sqlite_group: ServeProcess, key_cache: Path
) -> None:
    """No key given: the launcher makes the group's one key (in the group's own cache folder) before any
    frontend reads it."""
    server = sqlite_group
    body = {"model": "m", "input": "hi", "store": False, "include": ["reasoning.encrypted_content"]}
    with closing(on_frontend(server, 0)) as client:
        output = client.post("/v1/responses", json=body).json()["output"]
    sealed = [item for item in output if item["type"] == "reasoning"]
    assert sealed and sealed[0]["encrypted_content"]
    assert (key_cache / "encryption.key").exists()
    turn = [{"role": "user", "content": "hi"}, *output, {"role": "user", "content": "more"}]
    with closing(on_frontend(server, 1)) as client:
        answer = client.post("/v1/responses", json={**body, "input": turn})
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text


def test_frontends_of_tensorrt_llm_attach_to_the_launchers_engine(tmp_path: Path) -> None:
    """``--engine trtllm`` on the fake: the launcher makes the one LLM with ``num_serve_frontends=2``, the
    attached frontend attaches to it (TensorRT-LLM's ``TLLM_EXECUTOR_ATTACH_INFO``, ``executor/proxy.py`` of
    the fake), and a session whose turns land on both finds its prefix in the one engine's KV cache."""
    from support.checkpoints import make_checkpoint
    from support.trtllm_harness import Served

    ckpt = make_checkpoint(tmp_path)
    store = f"sqlite:///{tmp_path / 'trt.db'}"
    served = Served(
        [str(ckpt), "--engine", "trtllm", "--num_serve_frontends", "2", "--store", store],
        tmp_path / "fake.log",
    )
    try:
        inits, attaches = served.records("init"), served.records("attach")
        assert len(inits) == 2 and [a["frontend_id"] for a in attaches] == [1]
        assert all(i["args"]["num_serve_frontends"] == 2 for i in inits)
        previous, cached = None, []
        for turn, index in enumerate((0, 1, 0, 1)):
            with closing(on_frontend(served.url, index)) as client:
                body: dict[str, Any] = {"input": f"turn {turn}: " + "go on " * 80, "store": True}
                if previous:
                    body["previous_response_id"] = previous
                answer = client.post("/v1/responses", json=body).json()
            assert answer["status"] == "completed", answer
            previous = answer["id"]
            cached.append(answer["usage"]["input_tokens_details"]["cached_tokens"])
        assert cached[0] == 0 and all(c > 0 for c in cached[1:]), cached  # one engine's cache, both frontends
    finally:
        out = served.stop()
    assert "Traceback" not in out, out


def test_frontends_are_refused_on_a_tensorrt_llm_without_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel
    from support.trtllm_harness import fake_trtllm_importable

    from trtllm_responses.executors.trtllm import check_frontends

    with fake_trtllm_importable():
        import tensorrt_llm.llmapi.llm_args as llm_args

        class Release121(BaseModel):  # TorchLlmArgs of 1.1-1.2.1: no num_serve_frontends
            model: str

        monkeypatch.setattr(llm_args, "TorchLlmArgs", Release121)
        check_frontends(1, "pytorch")  # one frontend: nothing to check
        with pytest.raises(ValueError, match="PR #16523"):
            check_frontends(2, "pytorch")
    with pytest.raises(ValueError, match="PyTorch backend"):
        check_frontends(2, "tensorrt")


def test_a_websocket_continues_what_another_frontend_stored(sqlite_group: ServeProcess) -> None:
    """A socket stays on the frontend that accepted it; the response it continues may have been stored by
    the other (the store is shared). Which frontend a socket reached is read off that frontend's own count."""
    from websockets.sync.client import connect

    def responses_of(index: int) -> int:
        with closing(on_frontend(sqlite_group, index)) as client:
            return int(client.get("/stats", params={"scope": "frontend"}).json()["responses"])

    with closing(on_frontend(sqlite_group, 0)) as client:
        first = client.post(
            "/v1/responses", json={"model": "m", "input": "remember 42", "store": True}
        ).json()
    url = sqlite_group.base_url.replace("http://", "ws://") + "/v1/responses"
    body = {"type": "response.create", "model": "m", "input": "what was it?", "store": True}
    for _ in range(40):  # until a socket lands on frontend 1 (the kernel picks: SO_REUSEPORT)
        before = responses_of(1)
        with connect(url) as socket:
            socket.send(json.dumps({**body, "previous_response_id": first["id"]}))
            while (event := json.loads(socket.recv()))["type"] not in ("response.completed", "error"):
                pass
        assert event["type"] == "response.completed", event
        if responses_of(1) > before:
            break
    else:
        raise AssertionError("no socket reached frontend 1")
    with closing(on_frontend(sqlite_group, 0)) as client:
        items = client.get(f"/v1/responses/{event['response']['id']}/input_items").json()["data"]
    assert items[0]["content"][0]["text"] == "what was it?"


def test_a_frontend_that_dies_stops_the_group(redis_group: ServeProcess) -> None:
    """Last on the Redis group: it ends it."""
    assert redis_group.process is not None
    launcher = redis_group.process
    (child,) = children_of(launcher.pid)
    os.kill(child, signal.SIGKILL)
    assert launcher.wait(timeout=60) != 0  # the group lives and dies together
    redis_group.process = None


def test_sigterm_drains_every_frontend(sqlite_group: ServeProcess) -> None:
    """Last on the SQLite group: it stops it."""
    server = sqlite_group
    ends: dict[int, str] = {}

    def stream(index: int, client: httpx.Client) -> None:
        body = {"model": "m", "input": f"#lorem {PACE * 2}", "stream": True}
        with client.stream("POST", "/v1/responses", json=body) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    ends[index] = json.loads(line[6:])["type"]
        client.close()

    clients = {index: on_frontend(server, index) for index in (0, 1)}
    threads = [threading.Thread(target=stream, args=item) for item in clients.items()]
    for thread in threads:
        thread.start()
    time.sleep(0.8)  # both streaming (for 2 s)
    assert server.process is not None
    launcher = server.process.pid
    children = children_of(launcher)
    assert server.terminate(timeout=60) == 0
    for thread in threads:
        thread.join(timeout=30)
    assert ends == {0: "response.completed", 1: "response.completed"}  # drained, not cut
    assert all(not Path(f"/proc/{pid}").exists() for pid in children)
