"""Disaggregated serving's files of engines (``--prefill_engine_urls_file``, ``--decode_engine_urls_file``), read at
start and again on SIGHUP (``TrtllmGrpcExecutor.reload``, ``pool.EngineList``): each side's pool follows its file as
the whole turns' pool follows ``--engine_urls_file`` (``test_trtllm_grpc_pool.py``), against small in-process
OpenEngine engines scripted here (a context leg ends with a ``PrefillReady``, a generation leg with ``finished``;
either can be held). The whole server in front of fake engine processes, the file rewritten and SIGHUP sent:
``test_trtllm_grpc_disagg_served.py``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from test_trtllm_grpc import _until
from test_trtllm_grpc_pool import key_on

from trtllm_responses.executors.base import GenerationRequest, SamplingSettings, TokenDelta
from trtllm_responses.executors.trtllm_grpc.executor import TrtllmGrpcExecutor
from trtllm_responses.executors.trtllm_grpc.openengine import (
    generation_pb2,
    kv_pb2,
    lifecycle_pb2,
    model_pb2,
    openengine_pb2_grpc,
    server_pb2,
)
from trtllm_responses.executors.trtllm_grpc.pool import EngineList
from trtllm_responses.harmony import HarmonyEncoding


class _Engine(openengine_pb2_grpc.InferenceServicer, openengine_pb2_grpc.ControlServicer):
    """One OpenEngine engine: a context leg (``extra["request_type"] == "context_only"``) streams one token and
    ends with a ``PrefillReady``, any other request streams two tokens and ends ``finished`` (stop). ``hold``: the
    next request waits after its first token until :meth:`release` (or an ``Abort``). Records each request id
    with its kind (``context``, ``generation``: carrying a ``KvSessionRef``, or ``whole``)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.hold = False
        self._held: dict[str, asyncio.Event] = {}

    def kinds(self, request_id: str) -> list[str]:
        return [kind for rid, kind in self.requests if rid == request_id]

    def release(self) -> None:
        for event in self._held.values():
            event.set()

    async def Generate(self, request: Any, context: Any) -> AsyncIterator[Any]:
        rid = request.request_id
        if dict(request.extra.items()).get("request_type") == "context_only":
            kind = "context"
        else:
            kind = "generation" if request.kv.HasField("session") else "whole"
        self.requests.append((rid, kind))
        token = generation_pb2.TokenOutput(tokens=[generation_pb2.TokenInfo(token_id=17)])
        yield generation_pb2.GenerateResponse(request_id=rid, token=token)
        reason = generation_pb2.FINISH_REASON_STOP
        if self.hold:
            self.hold = False
            self._held[rid] = held = asyncio.Event()
            try:
                await held.wait()
            finally:
                self._held.pop(rid, None)
        if kind == "context":
            session = kv_pb2.KvSessionRef(session_id=rid, transfer_backend="UCX")
            session.attributes_struct.update({"opaque_state": "b3BhcXVl", "first_gen_tokens": [17]})
            ready = generation_pb2.PrefillReady(kv_session=session)
            yield generation_pb2.GenerateResponse(request_id=rid, prefill_ready=ready)
            return
        more = generation_pb2.TokenOutput(tokens=[generation_pb2.TokenInfo(token_id=18)])
        yield generation_pb2.GenerateResponse(request_id=rid, token=more)
        finished = generation_pb2.GenerationFinished(reason=reason)
        yield generation_pb2.GenerateResponse(request_id=rid, finished=finished)

    async def GetServerInfo(self, request: Any, context: Any) -> Any:
        connector = kv_pb2.KvConnectorInfo(enabled=True, transfer_backend="UCX", supports_abort_cleanup=True)
        return server_pb2.ServerInfo(
            engine_name="tensorrt_llm", engine_version="1.4.0rc1", schema_revision=1, kv_connector=connector
        )

    async def GetModelInfo(self, request: Any, context: Any) -> Any:
        return model_pb2.ModelInfo(served_model_name="gpt-oss-x", max_context_length=4096)

    async def Health(self, request: Any, context: Any) -> Any:
        return lifecycle_pb2.HealthResponse(state=lifecycle_pb2.HEALTH_STATE_READY)

    async def Abort(self, request: Any, context: Any) -> Any:
        held = self._held.get(request.request_id)
        if held is not None:
            held.set()
        status = lifecycle_pb2.ABORT_STATUS_ABORTED if held else lifecycle_pb2.ABORT_STATUS_ALREADY_FINISHED
        return lifecycle_pb2.AbortResponse(status=status)


class _Engines:
    """Engines by name, each served on a loopback port of its own."""

    def __init__(self) -> None:
        self.engines: dict[str, _Engine] = {}
        self.urls: dict[str, str] = {}
        self._servers: list[Any] = []

    async def add(self, name: str) -> None:
        engine = self.engines[name] = _Engine()
        server = grpc.aio.server()
        openengine_pb2_grpc.add_InferenceServicer_to_server(engine, server)
        openengine_pb2_grpc.add_ControlServicer_to_server(engine, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._servers.append(server)
        self.urls[name] = f"grpc://127.0.0.1:{port}"

    def where(self, request_id: str) -> dict[str, list[str]]:
        """Each engine that saw ``request_id``: the kinds of its requests."""
        return {n: e.kinds(request_id) for n, e in self.engines.items() if e.kinds(request_id)}

    async def stop(self) -> None:
        for server in self._servers:
            await server.stop(None)


@pytest.fixture
async def engines() -> AsyncIterator[_Engines]:
    running = _Engines()
    for name in ("P1", "P2", "D0", "D1", "D2"):
        await running.add(name)
    yield running
    await running.stop()


def _request(encoding: HarmonyEncoding, request_id: str, key: str) -> GenerationRequest:
    settings = SamplingSettings(max_tokens=64, stop_token_ids=encoding.assistant_action_stops)
    return GenerationRequest(request_id, [200006, 17, 18], settings, session_key=key)


async def _turn(executor: TrtllmGrpcExecutor, request: GenerationRequest) -> list[TokenDelta]:
    return [delta async for delta in executor.generate(request)]


async def test_sighup_rereads_each_sides_file_engines_added_join_and_removed_ones_drain(
    engines: _Engines, encoding: HarmonyEncoding, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = engines.urls
    prefill_file, decode_file = tmp_path / "prefill", tmp_path / "decode"
    prefill_file.write_text(f"{url['P1']}\n")  # the prefill side from its file alone
    decode_file.write_text(f"{url['D1']}  # rack 1\n")  # the decode side: a flag's engine and the file's
    executor = TrtllmGrpcExecutor(
        encoding=encoding,
        protocol="openengine",
        prefill_urls_file=str(prefill_file),
        decode_urls=[url["D0"]],
        decode_urls_file=str(decode_file),
        connect_timeout=5,
    )
    await executor.start()
    prefill = executor._prefill
    assert prefill is not None
    assert (list(prefill.health()), list(executor.pool.health())) == ([url["P1"]], [url["D0"], url["D1"]])
    # Two turns held while the files change: one in its generation leg on D1, one in its context leg on P1.
    engines.engines["D1"].hold = True
    decoding = asyncio.create_task(
        _turn(executor, _request(encoding, "decoding", key_on(url["D1"], [url["D0"], url["D1"]])))
    )
    assert await _until(lambda: engines.where("decoding").get("D1") == ["generation"])
    engines.engines["P1"].hold = True
    prefilling = asyncio.create_task(_turn(executor, _request(encoding, "prefilling", "k")))
    assert await _until(lambda: engines.where("prefilling") == {"P1": ["context"]})

    prefill_file.write_text(f"# P1 leaves, P2 joins\n{url['P2']}\n")
    decode_file.write_text(f"{url['D2']}\n")
    executor.reload()
    assert await _until(lambda: list(prefill.health()) == [url["P2"]] and all(prefill.health().values()))
    assert await _until(lambda: executor.pool.health() == {url["D0"]: True, url["D2"]: True})
    # A new session's legs run on the engines added ...
    key = key_on(url["D2"], [url["D0"], url["D2"]])
    finished = await _turn(executor, _request(encoding, "new", key))
    assert finished[-1].finish_reason == "stop"
    assert engines.where("new") == {"P2": ["context"], "D2": ["generation"]}
    # ... while the removed ones drain: the turns running there finish.
    engines.engines["D1"].release()
    engines.engines["P1"].release()
    decoded, prefilled = await asyncio.wait_for(asyncio.gather(decoding, prefilling), 5)
    assert decoded[-1].finish_reason == prefilled[-1].finish_reason == "stop"
    assert engines.where("decoding") == {"P1": ["context"], "D1": ["generation"]}
    # the held context handed off after its engine left: its generation leg runs on a decode engine of now
    assert set(engines.where("prefilling")) in ({"P1", "D0"}, {"P1", "D2"})

    # A file that leaves its side no engine, or does not read, changes nothing for that side (logged) ...
    prefill_file.write_text("# no engine\n")
    decode_file.unlink()
    with caplog.at_level(logging.ERROR):
        executor.reload()
        await asyncio.sleep(0.3)
    assert list(prefill.health()) == [url["P2"]] and list(executor.pool.health()) == [url["D0"], url["D2"]]
    assert (
        f"Prefill engines not changed: cannot use {prefill_file}: {prefill_file} lists no engine"
        in caplog.text
    )
    assert f"Decode engines not changed: cannot use {decode_file}" in caplog.text
    # ... and nothing for the other side: a broken prefill file, a decode file that reads
    prefill_file.write_text("not a url\n")
    decode_file.write_text(f"{url['D1']}\n")
    executor.reload()
    assert await _until(lambda: list(executor.pool.health()) == [url["D0"], url["D1"]])
    await asyncio.sleep(0.2)
    assert list(prefill.health()) == [url["P2"]]
    await executor.shutdown()


def test_an_engine_list_is_its_flags_then_its_file(tmp_path: Path) -> None:
    path = tmp_path / "engines"
    path.write_text("grpc://h:2\ngrpc://h:1\n")
    assert EngineList(["grpc://h:1"], str(path), "--decode_engine_url").read() == ["grpc://h:1", "grpc://h:2"]
    path.write_text("# none yet\n")
    with pytest.raises(ValueError, match="lists no engine, and no --decode_engine_url is given"):
        EngineList([], str(path), "--decode_engine_url").read()
    assert EngineList(["grpc://h:1"], str(path), "--decode_engine_url").read() == ["grpc://h:1"]
    assert not EngineList([], None, "--engine_url").given and EngineList([], str(path), "--engine_url").given
