"""The gRPC executor (``executors/trtllm_grpc.py``) against a scripted TensorRT-LLM gRPC service
(``support/grpc_client_double.py``): what it refuses at start, what each generation sends, how the stream
becomes token deltas, abort, failures, health. The whole server in front of the fake engine process:
``tests/executors/test_trtllm_grpc_served.py``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from support.grpc_client_double import Script, ScriptedEngine, pb2, serve_double

from trtllm_responses.constraints import Constraint, structural_tag
from trtllm_responses.executors.base import (
    ExecutorError,
    Generating,
    GenerationRequest,
    SamplingSettings,
    TokenDelta,
)
from trtllm_responses.executors.trtllm_grpc.executor import TrtllmGrpcExecutor
from trtllm_responses.executors.trtllm_grpc.messages import cache_salt_id
from trtllm_responses.harmony import HarmonyEncoding


@pytest.fixture
async def engine() -> AsyncIterator[tuple[ScriptedEngine, int]]:
    double = ScriptedEngine()
    server, port = await serve_double(double)
    yield double, port
    await server.stop(None)


def _request(encoding: HarmonyEncoding, request_id: str = "r1", **sampling: Any) -> GenerationRequest:
    settings = SamplingSettings(max_tokens=64, stop_token_ids=encoding.assistant_action_stops, **sampling)
    return GenerationRequest(request_id, [200006, 17, 18], settings)


async def _started(port: int, encoding: HarmonyEncoding, **kwargs: Any) -> TrtllmGrpcExecutor:
    executor = TrtllmGrpcExecutor(f"grpc://127.0.0.1:{port}", encoding=encoding, **kwargs)
    await executor.start()
    return executor


async def _collect(executor: TrtllmGrpcExecutor, request: GenerationRequest) -> list[TokenDelta]:
    return [delta async for delta in executor.generate(request)]


# ----------------------------------------------------------------------------------------------- start


async def test_an_unreachable_engine_refuses_to_start_naming_it(encoding: HarmonyEncoding) -> None:
    with socket_closed() as port:
        executor = TrtllmGrpcExecutor(f"grpc://127.0.0.1:{port}", encoding=encoding, connect_timeout=0.5)
        began = time.monotonic()
        with pytest.raises(ExecutorError, match=rf"cannot reach .*127.0.0.1:{port} within 0.5 s"):
            await executor.start()
        assert time.monotonic() - began < 5
    assert not executor.healthy()


@pytest.mark.parametrize("url", ["http://h:1", "grpc://h", "grpc://:80", "grpc://h:99999", "grpc://h:1/x"])
def test_a_malformed_engine_url_is_refused_before_anything_starts(
    url: str, encoding: HarmonyEncoding
) -> None:
    with pytest.raises(ValueError, match="grpc://HOST:PORT"):
        TrtllmGrpcExecutor(url, encoding=encoding)


async def test_a_release_before_smgs_protocol_is_refused(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    double.version = "1.3.0rc24"  # its gRPC server may still speak the early in-tree protocol
    with pytest.raises(ExecutorError, match=r"predates SMG's protocol.*1\.3\.0rc25 or newer"):
        await _started(port, encoding)


@pytest.mark.parametrize("version", ["1.0.0", "unknown", ""])
async def test_a_release_too_old_or_unnamed_is_refused(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding, version: str
) -> None:
    double, port = engine
    double.version = version
    with pytest.raises(ExecutorError, match="needs TensorRT-LLM 1.1 or newer"):
        await _started(port, encoding)


async def test_a_model_that_is_not_gpt_oss_is_refused(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    double.model = pb2.GetModelInfoResponse(model_id="llama", max_seq_len=8192, vocab_size=128256)
    with pytest.raises(ExecutorError, match="not a gpt-oss model"):
        await _started(port, encoding)


@pytest.mark.parametrize(("version", "unapplied"), [("1.3.0rc25", 4), ("1.3.0rc29", 0), ("1.4.0rc1", 0)])
async def test_the_engines_release_and_model_set_what_is_served(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding, version: str, unapplied: int
) -> None:
    double, port = engine
    double.version = version
    executor = await _started(port, encoding)
    try:
        assert executor.trtllm_release is not None and executor.trtllm_release.version == version
        assert len(executor.unapplied_sampling) == unapplied
        assert executor.max_seq_len == 8192
        assert (
            executor.prefix_isolation_refusal is not None
            and "cache_salt_id" in executor.prefix_isolation_refusal
        )
        assert executor.healthy()
    finally:
        await executor.shutdown()
    assert not executor.healthy()


# ---------------------------------------------------------------------------------------- the request


async def test_a_generation_sends_the_prompt_stops_sampling_and_salt(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    double.version = "1.3.0rc25"  # seed and the penalties are not applied there: never sent
    executor = await _started(port, encoding)
    settings = SamplingSettings(
        max_tokens=99,
        stop_token_ids=encoding.assistant_action_stops,
        temperature=0.5,
        top_p=0.9,
        top_k=7,
        seed=3,
        logprobs=0,
    )
    request = GenerationRequest("r-map", [200006, 1, 2, 3], settings, cache_salt="tenant-a")
    await _collect(executor, request)
    await executor.shutdown()
    sent = double.requests[0]
    assert sent.request_id == "r-map" and list(sent.tokenized.input_token_ids) == [200006, 1, 2, 3]
    assert sent.max_tokens == 99 and sent.streaming
    assert list(sent.stop_token_ids) == list(encoding.assistant_action_stops)
    assert not sent.include_stop_token_in_output and not sent.ignore_eos
    config = sent.sampling_config
    assert (
        config.temperature == pytest.approx(0.5) and config.top_p == pytest.approx(0.9) and config.top_k == 7
    )
    assert not config.HasField("seed")
    assert sent.output_config.logprobs == 1  # the sampled token's own comes with k >= 1
    assert not sent.HasField("guided_decoding")
    assert sent.cache_salt_id == cache_salt_id("tenant-a") != cache_salt_id("tenant-b")


async def test_a_constraint_is_sent_as_the_structural_tag(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    executor = await _started(port, encoding)
    constraint = Constraint("text")  # a free answer: the cheapest tag to build (a schema's takes seconds)
    request = GenerationRequest("r-c", [200006], _request(encoding).sampling, constraint=constraint)
    await _collect(executor, request)
    await executor.shutdown()
    guided = double.requests[0].guided_decoding
    assert guided.guide_type == pb2.GuidedDecodingParams.GUIDE_TYPE_STRUCTURAL_TAG
    assert guided.guide == structural_tag(constraint)


async def test_trace_headers_travel_as_call_metadata(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    executor = await _started(port, encoding)
    request = _request(encoding)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced = _Traced(request, {"Traceparent": parent})
    await _collect(executor, traced)  # type: ignore[arg-type]
    await _collect(executor, _request(encoding, "r2"))
    await executor.shutdown()
    assert double.metadata[0].get("traceparent") == parent
    assert "traceparent" not in double.metadata[1]


class _Traced:
    """A GenerationRequest with issue 42's ``trace_headers`` (read with getattr, so this branch needs no field)."""

    def __init__(self, request: GenerationRequest, headers: dict[str, str]) -> None:
        self._request = request
        self.trace_headers = headers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


# ----------------------------------------------------------------------------------------- the stream


async def test_chunks_become_deltas_and_the_complete_the_last(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    double.script = Script(chunks=[[5, 6], [], [7]], extra=[8], cached_tokens=2, finish_reason="length")
    executor = await _started(port, encoding)
    deltas = await _collect(executor, _request(encoding))
    await executor.shutdown()
    assert [list(d.token_ids) for d in deltas] == [[5, 6], [7], [8]]  # empty chunks yield nothing
    assert [d.finish_reason for d in deltas] == [None, None, "length"]
    assert {d.cached_tokens for d in deltas} == {2}


@pytest.mark.parametrize(
    ("reason", "finish", "error"),
    [
        ("stop", "stop", None),
        ("stop_word", "stop", None),
        ("cancelled", "cancelled", None),
        ("error", "error", "error"),
    ],
)
async def test_finish_reasons_map_as_in_process(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding, reason: str, finish: str, error: str | None
) -> None:
    double, port = engine
    double.script = Script(finish_reason=reason)
    executor = await _started(port, encoding)
    last = (await _collect(executor, _request(encoding)))[-1]
    await executor.shutdown()
    assert last.finish_reason == finish
    assert (last.error is None) if error is None else (error in (last.error or ""))


async def test_logprobs_are_ranked_and_a_missing_own_is_the_lowest(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine

    def entry(token: int, own: float, tops: dict[int, float]) -> Any:
        tops_pb = [pb2.TopLogprob(token_id=t, logprob=lp) for t, lp in tops.items()]
        return pb2.TokenLogprob(token_id=token, logprob=own, top_logprobs=tops_pb)

    double.script = Script(
        chunks=[[5], [6]],
        logprobs=[[entry(5, -0.5, {9: -2.0, 5: -0.5, 4: -1.0})], [entry(6, 0.0, {1: -0.25, 2: -3.0})]],
    )
    executor = await _started(port, encoding)
    deltas = await _collect(executor, _request(encoding, logprobs=2))
    await executor.shutdown()
    assert deltas[0].logprobs == [(-0.5, [(5, -0.5), (4, -1.0)])]
    assert deltas[1].logprobs == [(-3.0, [(1, -0.25), (2, -3.0)])]  # 6 not among the best: at most the lowest
    assert deltas[-1].logprobs == [] and deltas[-1].finish_reason == "stop"


@pytest.mark.parametrize(
    ("script", "match"),
    [
        (Script(error="CUDA error: out of memory"), "INTERNAL: CUDA error: out of memory"),
        (Script(drop=True), "closed the stream without finishing"),
        (Script(status=grpc.StatusCode.UNAVAILABLE), "UNAVAILABLE: engine went away"),
    ],
)
async def test_a_failure_mid_stream_ends_the_generation_failed(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding, script: Script, match: str
) -> None:
    double, port = engine
    double.script = script
    executor = await _started(port, encoding)
    seen: list[TokenDelta] = []
    with pytest.raises(ExecutorError, match=match):
        async for delta in executor.generate(_request(encoding)):
            seen.append(delta)
    # an engine that cannot be reached is unhealthy at once (/health 503), not only at the next health check
    assert executor.healthy() is (script.status is None)
    await executor.shutdown()
    assert [list(d.token_ids) for d in seen] == [[1, 2], [3]]  # what came before the failure was streamed


async def test_an_engine_killed_mid_stream_ends_the_generation_failed(encoding: HarmonyEncoding) -> None:
    double = ScriptedEngine()
    double.script = Script(hold=True)
    server, port = await serve_double(double)
    executor = await _started(port, encoding)
    deltas = executor.generate(_request(encoding))
    assert list((await deltas.__anext__()).token_ids) == [1, 2]
    await server.stop(None)
    with pytest.raises(ExecutorError, match="failed: (UNAVAILABLE|CANCELLED)"):
        async for _ in deltas:
            pass
    await executor.shutdown()


# ------------------------------------------------------------------------------------------------ abort


async def test_abort_sends_the_engines_abort_and_the_stream_ends_cancelled(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    double.script = Script(hold=True)
    executor = await _started(port, encoding)
    deltas = executor.generate(_request(encoding, "r-abort"))
    await deltas.__anext__()
    await deltas.__anext__()
    asked = time.monotonic()
    executor.abort("r-abort")
    rest = [d async for d in deltas]
    await executor.shutdown()
    assert rest[-1].finish_reason == "cancelled"
    assert [rid for rid, _ in double.aborts] == ["r-abort"]
    assert double.aborts[0][1] - asked < 0.05  # the engine hears of it within 50 ms


async def test_a_reader_that_leaves_cancels_the_stream_and_aborts_once(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    double.script = Script(hold=True)
    executor = await _started(port, encoding)
    async with Generating(executor, _request(encoding, "r-left")) as deltas:
        async for _ in deltas:
            assert list(executor.pool.loads().values()) == [1]
            break  # the client left after the first delta
    # Closed at once (the attempt inside too), not when the collector finds it: the engine's load is back.
    assert list(executor.pool.loads().values()) == [0]
    assert await _until(lambda: double.ended)
    await executor.shutdown()
    assert [rid for rid, _ in double.aborts] == ["r-left"]  # Generating's abort and the close: one Abort
    assert double.found_aborts == ["r-left"]  # it reached the request before a cancel made it forgotten
    assert double.ended == ["r-left"]


async def test_a_cancelled_task_cancels_the_stream_and_aborts(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    double.script = Script(hold=True)
    executor = await _started(port, encoding)

    async def read() -> None:
        async for _ in executor.generate(_request(encoding, "r-task")):
            pass

    task = asyncio.ensure_future(read())
    while not double.requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _until(lambda: double.ended)
    await executor.shutdown()
    assert [rid for rid, _ in double.aborts] == ["r-task"]
    # The Abort reached the running request: TensorRT-LLM forgets a cancelled stream's request (its request
    # manager's ``finally``), so an Abort sent after the cancel would find nothing and the engine go on.
    assert double.found_aborts == ["r-task"]
    assert double.ended == ["r-task"]


# ----------------------------------------------------------------------------------------------- health


async def test_health_follows_the_engines_health_check(
    engine: tuple[ScriptedEngine, int], encoding: HarmonyEncoding
) -> None:
    double, port = engine
    executor = await _started(port, encoding, health_interval=0.05)
    assert executor.healthy()
    double.health = "Executor is shutdown"
    assert await _until(lambda: not executor.healthy())
    double.health = "OK"
    assert await _until(executor.healthy)
    await executor.shutdown()


async def _until(condition: Any, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.02)
    return False


class socket_closed:
    """A loopback port nothing listens on (bound, then closed)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None
