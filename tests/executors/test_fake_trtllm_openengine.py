"""The fake TensorRT-LLM engine's OpenEngine wire (``grpc_server.py --grpc-protocol openengine``) driven over the
raw vendored stubs, as a client drives ``trtllm-serve MODEL --grpc --grpc-protocol openengine``.

Two engine processes (support/trtllm_grpc_harness.py), both 1.4.0rc1 with xgrammar, block reuse, a cache
transceiver and paced steps: an aggregated generation (token events, ``finished`` with the stop token, usage
with cached tokens); the hand-off (a ``context_only`` leg on A ending in ``PrefillReady``, its ``KvSessionRef``
sent back on B, the tokens equal to an aggregated run's, the prefix reused on A at the next context leg);
``Abort`` answered as TensorRT-LLM's ``control.py`` answers; a context leg cancelled before ``PrefillReady``
aborts; the info RPCs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from support.trtllm_grpc_harness import GrpcEngine, grpc_engines

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.trtllm_grpc.openengine import (
    generation_pb2,
    lifecycle_pb2,
    model_pb2,
    openengine_pb2_grpc,
    server_pb2,
)
from trtllm_responses.request.protocol import parse_request

OPTIONS = {
    "guided_decoding_backend": "xgrammar",
    "kv_cache_config": {"enable_block_reuse": True},
    "cache_transceiver_config": {"backend": "UCX"},
}
ENV = {"FAKE_TRTLLM_STEP_DELAY": "0.01", "FAKE_TRTLLM_NOISE": "0.3"}
QUESTION = "Disaggregate this turn. " + "It has a prompt of several KV blocks. " * 12


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[GrpcEngine, GrpcEngine]]:
    a = GrpcEngine(
        "1.4.0rc1", options=OPTIONS, env=ENV, served_model_name="gpt-oss-fake", protocol="openengine"
    )
    b = GrpcEngine("1.4.0rc1", options=OPTIONS, env=ENV, protocol="openengine")
    with grpc_engines(a, b):
        yield a, b


def _inference(engine: GrpcEngine) -> Any:
    return openengine_pb2_grpc.InferenceStub(grpc.insecure_channel(engine.target))


def _control(engine: GrpcEngine) -> Any:
    return openengine_pb2_grpc.ControlStub(grpc.insecure_channel(engine.target))


def _request(adapter: HarmonyAdapter, text: str, request_id: str, **extra: Any) -> Any:
    prompt = adapter.build_prompt(parse_request({"input": text}))
    request = generation_pb2.GenerateRequest(
        request_id=request_id,
        model="gpt-oss-fake",
        token_ids=generation_pb2.TokenIds(ids=prompt.token_ids),
        stopping=generation_pb2.StoppingOptions(
            max_tokens=512,
            include_stop_in_output=False,
            conditions=[generation_pb2.StopCondition(stop_token_id=t) for t in adapter.stop_token_ids],
        ),
    )
    if extra:
        request.extra.update(extra)
    return request


def _events(responses: Any) -> list[Any]:
    return list(responses)


def _tokens(events: list[Any]) -> list[int]:
    return [t.token_id for e in events if e.WhichOneof("event") == "token" for t in e.token.tokens]


def test_aggregated_generation_streams_tokens_and_finishes_with_usage(
    engines: Any, adapter: HarmonyAdapter
) -> None:
    a, _ = engines
    request = _request(adapter, "Tell me about OpenEngine streams", "agg-plain")
    request.response.return_output_logprobs = True
    request.response.output_candidates.top_n = 2
    events = _events(_inference(a).Generate(request, timeout=60))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "finished" and set(kinds[:-1]) == {"token"}
    finished = events[-1]
    assert finished.finished.reason == generation_pb2.FINISH_REASON_STOP
    assert finished.finished.stop_match.stop_token_id in adapter.stop_token_ids
    tokens = _tokens(events)
    assert finished.usage.completion_tokens == len(tokens) > 0
    assert finished.usage.prompt_tokens == len(request.token_ids.ids)
    assert finished.usage.HasField("cached_prompt_tokens")
    first = events[0].token.tokens[0]
    assert [c.rank for c in first.candidates] == [1, 2]
    # The same prompt again reuses its prefix: cached tokens on the final response.
    request.request_id = "agg-plain-2"
    again = _events(_inference(a).Generate(request, timeout=60))
    assert again[-1].usage.cached_prompt_tokens > 0


def test_the_hand_off_across_two_engines(engines: Any, adapter: HarmonyAdapter) -> None:
    a, b = engines
    whole = _events(_inference(b).Generate(_request(adapter, QUESTION, "whole-1"), timeout=60))
    context = _events(
        _inference(a).Generate(_request(adapter, QUESTION, "ctx-1", request_type="context_only"), timeout=60)
    )
    # The context leg: its first token, then PrefillReady, and no finished (PrefillReady is the terminal event).
    assert [e.WhichOneof("event") for e in context] == ["token", "prefill_ready"]
    assert _tokens(context) == _tokens(whole)[:1]
    session = context[-1].prefill_ready.kv_session
    assert int(session.session_id) > 0 and session.transfer_backend == "UCX"
    attributes = dict(session.attributes_struct.items())
    assert attributes["first_gen_tokens"] == [float(_tokens(whole)[0])] and attributes["opaque_state"]
    assert context[-1].usage.completion_tokens == 1
    # The generation leg on B takes the session back and writes what one aggregated request writes.
    generation = _request(adapter, QUESTION, "gen-1")
    generation.kv.session.CopyFrom(session)
    decoded = _events(_inference(b).Generate(generation, timeout=60))
    assert decoded[-1].WhichOneof("event") == "finished"
    assert decoded[-1].finished.reason == generation_pb2.FINISH_REASON_STOP
    assert _tokens(decoded) == _tokens(whole)
    generated = [r for r in map(json.loads, b.fake_log.read_text().splitlines()) if r["event"] == "generate"]
    assert generated[-1]["sampling"]["max_tokens"] == 512
    # "generation_only" cannot be named without a session.
    with pytest.raises(grpc.RpcError) as refused:
        _events(_inference(b).Generate(_request(adapter, QUESTION, "gen-x", request_type="generation_only")))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The prefill engine stored the context: the session's next context leg reuses its prefix there.
    again = _events(
        _inference(a).Generate(_request(adapter, QUESTION, "ctx-2", request_type="context_only"), timeout=60)
    )
    assert again[-1].usage.cached_prompt_tokens > context[-1].usage.cached_prompt_tokens


def test_abort_answers_as_tensorrt_llm(engines: Any, adapter: HarmonyAdapter) -> None:
    a, _ = engines
    context = _events(
        _inference(a).Generate(
            _request(adapter, QUESTION, "ctx-abort", request_type="context_only"), timeout=60
        )
    )
    session = context[-1].prefill_ready.kv_session
    control = _control(a)
    # After PrefillReady the request is no longer active: nothing to abort, its blocks are not freed by this.
    answer = control.Abort(lifecycle_pb2.AbortRequest(request_id="ctx-abort"), timeout=10)
    assert answer.status == lifecycle_pb2.ABORT_STATUS_ALREADY_FINISHED
    with pytest.raises(grpc.RpcError) as by_session:
        control.Abort(lifecycle_pb2.AbortRequest(kv_session=session), timeout=10)
    assert by_session.value.code() == grpc.StatusCode.UNIMPLEMENTED
    # A running stream is aborted and ends cancelled.
    call = _inference(a).Generate(_request(adapter, "Write a long answer " * 5, "running-1"), timeout=60)
    first = next(call)
    assert first.WhichOneof("event") == "token"
    answer = control.Abort(lifecycle_pb2.AbortRequest(request_id="running-1"), timeout=10)
    assert answer.status == lifecycle_pb2.ABORT_STATUS_ABORTED
    rest = list(call)
    assert rest[-1].finished.reason == generation_pb2.FINISH_REASON_CANCELLED


def test_a_context_leg_cancelled_before_prefill_ready_aborts(engines: Any, adapter: HarmonyAdapter) -> None:
    a, _ = engines
    # ``#hold``: the context leg's prefill lasts until it is aborted, so the cancel lands mid-prefill, after the
    # engine took the request (its log says so), whatever the machine's load.
    before = a.fake_log.read_text().count('"event": "abort"')
    taken = a.fake_log.read_text().count('"event": "generate"')
    call = _inference(a).Generate(
        _request(adapter, "#hold", "ctx-cancel", request_type="context_only"), timeout=60
    )

    def cancel_once_taken() -> None:
        deadline = time.monotonic() + 30
        while a.fake_log.read_text().count('"event": "generate"') == taken and time.monotonic() < deadline:
            time.sleep(0.02)
        call.cancel()

    threading.Thread(target=cancel_once_taken).start()
    with pytest.raises(grpc.RpcError) as cancelled:
        for event in call:
            assert event.WhichOneof("event") != "prefill_ready", "the hand-off came before the cancel"
    assert cancelled.value.code() == grpc.StatusCode.CANCELLED
    assert a.fake_log.read_text().count('"event": "generate"') > taken
    deadline = time.monotonic() + 10
    while a.fake_log.read_text().count('"event": "abort"') == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert a.fake_log.read_text().count('"event": "abort"') > before


def test_server_model_info_and_health(engines: Any) -> None:
    a, _ = engines
    control = _control(a)
    info = control.GetServerInfo(server_pb2.GetServerInfoRequest(), timeout=10)
    assert info.engine_name == "tensorrt_llm" and info.engine_version == "1.4.0rc1"
    assert info.schema_revision == 1 and info.schema_release == "768a93c7b44e40f28c692ad0b471a8f2"
    assert info.kv_connector.enabled and not info.kv_connector.supports_abort_cleanup
    assert info.kv_connector.HasField("supports_abort_cleanup")
    model = control.GetModelInfo(model_pb2.GetModelInfoRequest(), timeout=10)
    assert model.served_model_name == "gpt-oss-fake" and model.supports_token_ids_input
    assert model_pb2.GUIDED_DECODING_MODE_STRUCTURAL_TAG in model.generation.guided_decoding.modes
    health = control.Health(lifecycle_pb2.HealthRequest(), timeout=10)
    assert health.state == lifecycle_pb2.HEALTH_STATE_READY


def test_a_release_before_openengine_generate_refuses_to_start() -> None:
    engine = GrpcEngine("1.3.0rc27", protocol="openengine")
    engine.launch()
    assert engine.process is not None and engine.process.wait(120) == 2
    assert "no OpenEngine Generate" in engine.output()
