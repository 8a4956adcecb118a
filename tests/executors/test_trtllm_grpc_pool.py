"""A pool of gRPC engines (``executors/trtllm_grpc/pool.py`` and the executor over it): placement by rendezvous
hashing with bounded loads (pure), then the executor against several scripted engines
(``support/grpc_client_double.py``): a session stays on its engine, a failure before the first token is retried
once elsewhere and one after is not, abort reaches the engine the request runs on, health with backoff,
engines agreeing or refused, joining and draining. The whole server in front of fake engine processes:
``test_trtllm_grpc_pool_served.py``."""

from __future__ import annotations

import asyncio
import random
import socket
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.grpc_client_double import Script, ScriptedEngine, pb2, pb2_grpc
from test_trtllm_grpc import _until

from trtllm_responses.executors.base import ExecutorError, GenerationRequest, SamplingSettings
from trtllm_responses.executors.trtllm_grpc.executor import TrtllmGrpcExecutor
from trtllm_responses.executors.trtllm_grpc.pool import (
    LOAD_FACTOR,
    load_bound,
    place,
    read_urls_file,
    rendezvous_order,
)
from trtllm_responses.harmony import HarmonyEncoding

URLS = [f"grpc://10.0.0.{i}:8001" for i in range(1, 4)]


def key_on(url: str, urls: list[str], skip: int = 0) -> str:
    """A session key whose rendezvous order over ``urls`` starts with ``url`` (the ``skip``-th such key)."""
    found = (f"session-{i}" for i in range(10_000) if rendezvous_order(f"session-{i}", urls)[0] == url)
    for _ in range(skip):
        next(found)
    return next(found)


# -------------------------------------------------------------------------------------------- placement


def test_rendezvous_order_depends_on_the_set_not_its_order() -> None:
    keys = [f"k{i}" for i in range(200)]
    assert all(rendezvous_order(k, URLS) == rendezvous_order(k, URLS[::-1]) for k in keys)
    homes = Counter(rendezvous_order(k, URLS)[0] for k in keys)
    assert set(homes) == set(URLS) and min(homes.values()) > 40  # spread over all three


def test_an_engine_joining_or_leaving_moves_only_the_sessions_it_wins_or_held() -> None:
    keys = [f"k{i}" for i in range(300)]
    before = {k: rendezvous_order(k, URLS)[0] for k in keys}
    fourth = [*URLS, "grpc://10.0.0.4:8001"]
    after = {k: rendezvous_order(k, fourth)[0] for k in keys}
    moved = [k for k in keys if after[k] != before[k]]
    assert moved and all(after[k] == fourth[3] for k in moved)
    gone = {k: rendezvous_order(k, URLS[1:])[0] for k in keys}
    assert all(gone[k] == before[k] for k in keys if before[k] != URLS[0])


def test_without_a_bound_reached_a_session_goes_home() -> None:
    key = key_on(URLS[1], URLS)
    assert place(key, dict.fromkeys(URLS, 0)) == URLS[1]
    assert place(key, {URLS[0]: 2, URLS[1]: 2, URLS[2]: 2}) == URLS[1]  # bound ceil(1.25 * 7 / 3) = 3


def test_a_hot_set_of_sessions_hashing_to_one_engine_spills_over() -> None:
    hot = [key_on(URLS[0], URLS, skip=i) for i in range(30)]  # 30 sessions whose home is one engine
    loads = dict.fromkeys(URLS, 0)
    for key in hot:  # each placed while the earlier ones still run
        loads[place(key, loads)] += 1
    assert sum(loads.values()) == 30
    assert max(loads.values()) <= 13 and min(loads.values()) > 0  # ceil(1.25 * 30 / 3) = 13
    assert load_bound(dict.fromkeys(URLS, 10), LOAD_FACTOR) == 13
    assert loads[URLS[0]] == max(loads.values())  # the home engine fills first


def test_the_bound_always_leaves_an_engine() -> None:
    rng = random.Random(7)
    for _ in range(500):
        loads = {url: rng.randrange(0, 20) for url in URLS[: rng.randrange(1, 4)]}
        chosen = place(f"k{rng.random()}", loads)
        assert loads[chosen] < load_bound(loads)


def test_without_a_key_the_least_loaded_engine_is_chosen_ties_in_turn() -> None:
    assert place(None, {URLS[0]: 3, URLS[1]: 1, URLS[2]: 2}) == URLS[1]
    tied = {place(None, dict.fromkeys(URLS, 0), turn=t) for t in range(3)}
    assert tied == set(URLS)


def test_the_urls_file_reads_comments_blanks_and_refuses_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "engines"
    path.write_text(f"# engines\n\n{URLS[0]}\n  {URLS[1]}   # rack 2\n{URLS[0]}\n")
    assert read_urls_file(str(path)) == URLS[:2]
    path.write_text(f"{URLS[0]}\nhttp://x:1\n")
    with pytest.raises(ValueError, match="line 2: .*grpc://HOST:PORT"):
        read_urls_file(str(path))


# ------------------------------------------------------------------------------------------- the executor


class Engines:
    """Scripted engines, each a grpc.aio server on a loopback port of its own; ``stop(i)`` takes one away
    (its port refuses), ``serve(i)`` brings it back on the same port."""

    def __init__(self, count: int) -> None:
        self.doubles = [ScriptedEngine() for _ in range(count)]
        self.ports = [_free_port() for _ in range(count)]
        self.servers: list[Any] = [None] * count

    @property
    def urls(self) -> list[str]:
        return [f"grpc://127.0.0.1:{port}" for port in self.ports]

    async def serve(self, index: int) -> None:
        server = grpc.aio.server()
        pb2_grpc.add_TrtllmServiceServicer_to_server(self.doubles[index], server)
        server.add_insecure_port(f"127.0.0.1:{self.ports[index]}")
        await server.start()
        self.servers[index] = server

    async def stop(self, index: int) -> None:
        if self.servers[index] is not None:
            await self.servers[index].stop(None)
            self.servers[index] = None

    def index_of(self, request_id: str) -> list[int]:
        return [i for i, d in enumerate(self.doubles) if any(r.request_id == request_id for r in d.requests)]


@pytest.fixture
async def engines() -> AsyncIterator[Engines]:
    running = Engines(3)
    for index in range(3):
        await running.serve(index)
    yield running
    for index in range(3):
        await running.stop(index)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(encoding: HarmonyEncoding, request_id: str, key: str | None) -> GenerationRequest:
    settings = SamplingSettings(max_tokens=64, stop_token_ids=encoding.assistant_action_stops)
    return GenerationRequest(request_id, [200006, 17, 18], settings, session_key=key)


async def _pool(urls: list[str], encoding: HarmonyEncoding, **kwargs: Any) -> TrtllmGrpcExecutor:
    executor = TrtllmGrpcExecutor(urls, encoding=encoding, **kwargs)
    await executor.start()
    return executor


async def _tokens(executor: TrtllmGrpcExecutor, request: GenerationRequest) -> list[int]:
    return [t async for d in executor.generate(request) for t in d.token_ids]


async def test_a_sessions_generations_stay_on_its_engine(engines: Engines, encoding: HarmonyEncoding) -> None:
    executor = await _pool(engines.urls, encoding)
    key = key_on(engines.urls[2], engines.urls)
    for turn in range(6):
        assert await _tokens(executor, _request(encoding, f"t{turn}", key)) == [1, 2, 3]
    for turn in range(6):
        await _tokens(executor, _request(encoding, f"n{turn}", None))
    await executor.shutdown()
    assert [len(d.requests) for d in engines.doubles][2] >= 6
    assert all(engines.index_of(f"t{turn}") == [2] for turn in range(6))
    assert {engines.index_of(f"n{turn}")[0] for turn in range(6)} == {0, 1, 2}  # no key: spread


async def test_an_engine_down_before_any_token_is_left_for_another_once(
    engines: Engines, encoding: HarmonyEncoding
) -> None:
    executor = await _pool(engines.urls, encoding, health_interval=60)  # the pool has not noticed
    key = key_on(engines.urls[0], engines.urls)
    await engines.stop(0)
    assert await _tokens(executor, _request(encoding, "r1", key)) == [1, 2, 3]
    [moved] = engines.index_of("r1")
    assert engines.urls[moved] == rendezvous_order(key, engines.urls[1:])[0]  # the session's next engine
    assert executor.pool.health()[engines.urls[0]] is False and executor.healthy()
    assert await _tokens(executor, _request(encoding, "r2", key)) == [1, 2, 3]
    assert engines.index_of("r2") == [moved]  # the next turn goes there directly
    await executor.shutdown()


@pytest.mark.parametrize(
    ("status", "retried"),
    [
        (grpc.StatusCode.INTERNAL, True),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, True),
        (grpc.StatusCode.INVALID_ARGUMENT, False),  # the request's own fault: the same on every engine
    ],
)
async def test_a_failure_before_the_first_token_is_retried_unless_the_request_is_at_fault(
    engines: Engines, encoding: HarmonyEncoding, status: grpc.StatusCode, retried: bool
) -> None:
    executor = await _pool(engines.urls, encoding)
    key = key_on(engines.urls[0], engines.urls)
    engines.doubles[0].script = Script(chunks=[], status=status)
    if retried:
        assert await _tokens(executor, _request(encoding, "r1", key)) == [1, 2, 3]
        assert len(engines.index_of("r1")) == 2
    else:
        with pytest.raises(ExecutorError, match="INVALID_ARGUMENT"):
            await _tokens(executor, _request(encoding, "r1", key))
        assert engines.index_of("r1") == [0]
    await executor.shutdown()


async def test_a_retry_happens_once(engines: Engines, encoding: HarmonyEncoding) -> None:
    executor = await _pool(engines.urls, encoding)
    for double in engines.doubles:
        double.script = Script(chunks=[[]], error="CUDA error: out of memory")
    with pytest.raises(ExecutorError, match="INTERNAL: CUDA error"):
        await _tokens(executor, _request(encoding, "r1", "some-session"))
    await executor.shutdown()
    assert len(engines.index_of("r1")) == 2


async def test_a_failure_after_tokens_is_not_retried_and_says_retry(
    engines: Engines, encoding: HarmonyEncoding
) -> None:
    executor = await _pool(engines.urls, encoding)
    key = key_on(engines.urls[1], engines.urls)
    engines.doubles[1].script = Script(status=grpc.StatusCode.UNAVAILABLE)
    seen: list[int] = []
    with pytest.raises(ExecutorError, match="UNAVAILABLE.*mid-stream: retry the request"):
        async for delta in executor.generate(_request(encoding, "r1", key)):
            seen += delta.token_ids
    assert seen == [1, 2, 3] and engines.index_of("r1") == [1]
    # the engine said UNAVAILABLE: out of placement, so the session's next turn moves
    assert executor.pool.health()[engines.urls[1]] is False
    await _tokens(executor, _request(encoding, "r2", key))
    [moved] = engines.index_of("r2")
    assert engines.urls[moved] == rendezvous_order(key, [engines.urls[0], engines.urls[2]])[0]
    await executor.shutdown()


async def test_abort_reaches_the_engine_the_request_runs_on(
    engines: Engines, encoding: HarmonyEncoding
) -> None:
    executor = await _pool(engines.urls, encoding)
    key = key_on(engines.urls[2], engines.urls)
    engines.doubles[2].script = Script(hold=True)
    deltas = executor.generate(_request(encoding, "r-abort", key))
    await deltas.__anext__()
    assert executor.pool.loads()[engines.urls[2]] == 1
    executor.abort("r-abort")
    rest = [d async for d in deltas]
    assert rest[-1].finish_reason == "cancelled"
    assert [rid for rid, _ in engines.doubles[2].aborts] == ["r-abort"]
    assert not engines.doubles[0].aborts and not engines.doubles[1].aborts
    assert executor.pool.loads()[engines.urls[2]] == 0
    await executor.shutdown()


# -------------------------------------------------------------------------------------- health, the set


async def test_health_takes_an_engine_out_and_back(engines: Engines, encoding: HarmonyEncoding) -> None:
    executor = await _pool(engines.urls, encoding, health_interval=0.05)
    engines.doubles[0].health = "Executor is unhealthy"
    assert await _until(lambda: executor.pool.health()[engines.urls[0]] is False)
    key = key_on(engines.urls[0], engines.urls)
    await _tokens(executor, _request(encoding, "r1", key))
    assert engines.index_of("r1") != [0]
    assert executor.healthy()
    for double in engines.doubles:
        double.health = "Executor is unhealthy"
    assert await _until(lambda: not executor.healthy())
    with pytest.raises(ExecutorError, match="no healthy TensorRT-LLM gRPC engine"):
        await _tokens(executor, _request(encoding, "r2", key))
    for double in engines.doubles:
        double.health = "OK"
    assert await _until(lambda: all(executor.pool.health().values()))
    await executor.shutdown()


async def test_a_slow_health_check_is_not_a_dead_engine(engines: Engines, encoding: HarmonyEncoding) -> None:
    """Checks that time out leave an engine in placement until SLOW_CHECKS_TO_LEAVE have in a row (a busy engine
    answered late; the only engine leaving would fail every turn); then it leaves as any failed engine does."""
    from trtllm_responses.executors.trtllm_grpc import pool as pool_module

    executor = await _pool(engines.urls[:1], encoding, health_interval=60)
    member = executor.pool._members[engines.urls[0]]
    timed_out = "DEADLINE_EXCEEDED: Deadline Exceeded"
    for _ in range(pool_module.SLOW_CHECKS_TO_LEAVE - 1):
        assert executor.pool._judged(member, timed_out) is None
    await _tokens(executor, _request(encoding, "r-slow", None))  # still placed
    assert executor.pool._judged(member, None) is None  # an answer in time: the count starts again
    for _ in range(pool_module.SLOW_CHECKS_TO_LEAVE - 1):
        assert executor.pool._judged(member, timed_out) is None
    assert executor.pool._judged(member, timed_out) == timed_out
    assert executor.pool._judged(member, "Executor is unhealthy") == "Executor is unhealthy"  # at once
    await executor.shutdown()


async def test_an_engine_down_at_start_joins_once_it_answers(
    engines: Engines, encoding: HarmonyEncoding
) -> None:
    await engines.stop(1)
    executor = await _pool(engines.urls, encoding, health_interval=0.2, connect_timeout=0.5)
    assert executor.pool.health() == {engines.urls[0]: True, engines.urls[1]: False, engines.urls[2]: True}
    await engines.serve(1)
    assert await _until(lambda: executor.pool.health()[engines.urls[1]], seconds=10)
    await _tokens(executor, _request(encoding, "r1", key_on(engines.urls[1], engines.urls)))
    assert engines.index_of("r1") == [1]
    await executor.shutdown()


async def test_no_engine_reachable_refuses_to_start_naming_one(encoding: HarmonyEncoding) -> None:
    urls = [f"grpc://127.0.0.1:{_free_port()}" for _ in range(2)]
    executor = TrtllmGrpcExecutor(urls, encoding=encoding, connect_timeout=0.3)
    with pytest.raises(ExecutorError, match=r"cannot reach .*127\.0\.0\.1:\d+ within 0\.3 s"):
        await executor.start()
    assert not executor.healthy()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"vocab_size": 201089}, "a vocabulary of 201089 where"),
        ({"max_seq_len": 4096}, "a context window of 4096 where"),
        ({"version": "1.3.0rc25"}, "whose sampler applies other settings"),
    ],
)
async def test_an_engine_that_serves_something_else_is_refused(
    engines: Engines, encoding: HarmonyEncoding, change: dict[str, Any], says: str
) -> None:
    odd = engines.doubles[2]
    if "version" in change:
        odd.version = change["version"]
    else:
        fields = {"model_id": "gpt-oss-tiny", "max_seq_len": 8192, "vocab_size": 201088, **change}
        odd.model = pb2.GetModelInfoResponse(**fields)
    # the first two set what is served; the third, described last, must agree
    executor = TrtllmGrpcExecutor(engines.urls[:2], encoding=encoding)
    await executor.start()
    with pytest.raises(
        ExecutorError, match=f"{engines.urls[2]} does not serve what the other engines.*{says}"
    ):
        executor._accept(engines.urls[2], await _info(engines.urls[2]))
    await executor.shutdown()
    with pytest.raises(ExecutorError, match="does not serve what the other engines"):
        await _pool([engines.urls[0], engines.urls[2]], encoding)


async def _info(url: str) -> Any:
    from trtllm_responses.executors.trtllm_grpc.engine import GrpcEngine

    engine = GrpcEngine(url)
    try:
        return await engine.connect(2.0)
    finally:
        await engine.close()


async def test_the_file_reread_adds_engines_and_drains_removed_ones(
    engines: Engines, encoding: HarmonyEncoding, tmp_path: Path
) -> None:
    listed = tmp_path / "engines"
    listed.write_text(f"{engines.urls[1]}\n")
    executor = TrtllmGrpcExecutor([engines.urls[0]], urls_file=str(listed), encoding=encoding)
    await executor.start()
    assert list(executor.pool.health()) == engines.urls[:2]
    key = key_on(engines.urls[1], engines.urls[:2])
    engines.doubles[1].script = Script(hold=True)
    held = executor.generate(_request(encoding, "held", key))
    await held.__anext__()
    listed.write_text(f"# engine 1 leaves, 2 joins\n{engines.urls[2]}\n")
    executor.reload()
    assert await _until(lambda: list(executor.pool.health()) == [engines.urls[0], engines.urls[2]])
    assert await _until(lambda: all(executor.pool.health().values()))
    # new sessions go to the engine added; the generation on the removed engine runs on
    await _tokens(
        executor, _request(encoding, "new", key_on(engines.urls[2], [engines.urls[0], engines.urls[2]]))
    )
    assert engines.index_of("new") == [2]
    engines.doubles[1]._held["held"].set()  # the engine finishes it (as an abort would)
    rest = [d async for d in held]
    assert rest[-1].finish_reason is not None
    listed.write_text("not a url\n")
    executor.reload()  # a broken file changes nothing
    await asyncio.sleep(0.2)
    assert list(executor.pool.health()) == [engines.urls[0], engines.urls[2]]
    await executor.shutdown()
