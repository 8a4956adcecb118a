"""The gRPC executor over OpenEngine (``--grpc_protocol openengine``): what each generation sends
(``openengine_messages.generate_request``), how the events become steps (``OpenEngineReader``), and what
``OpenEngineEngine.connect`` refuses, against small in-process ``Control`` services. The whole server in front
of the fake engine process: ``tests/executors/test_trtllm_grpc_openengine_served.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from trtllm_responses.constraints import Constraint
from trtllm_responses.executors.base import ExecutorError, GenerationRequest, SamplingSettings
from trtllm_responses.executors.trtllm_grpc.calls import engine_fault
from trtllm_responses.executors.trtllm_grpc.executor import TrtllmGrpcExecutor
from trtllm_responses.executors.trtllm_grpc.openengine import (
    error_pb2,
    generation_pb2,
    lifecycle_pb2,
    model_pb2,
    openengine_pb2_grpc,
    server_pb2,
)
from trtllm_responses.executors.trtllm_grpc.openengine_messages import (
    EngineFailed,
    OpenEngineReader,
    generate_request,
)
from trtllm_responses.harmony import HarmonyEncoding


def _request(encoding: HarmonyEncoding, **kwargs: Any) -> GenerationRequest:
    sampling = kwargs.pop("sampling", {})
    settings = SamplingSettings(max_tokens=64, stop_token_ids=encoding.assistant_action_stops, **sampling)
    return GenerationRequest("r1", [200006, 17, 18], settings, **kwargs)


def test_a_generation_is_sent_as_tensorrt_llms_adapter_reads_it(encoding: HarmonyEncoding) -> None:
    request = _request(
        encoding,
        sampling={"temperature": 0.5, "top_p": 0.9, "top_k": 40, "seed": -1, "logprobs": 0},
        session_key="sess-1",
        cache_salt="tenant-a",
        constraint=Constraint("text"),
    )
    message = generate_request(generation_pb2, request, model="gpt-oss", unapplied={"top_k": "ignored"})
    assert message.request_id == "r1" and message.model == "gpt-oss"
    assert list(message.token_ids.ids) == [200006, 17, 18]
    assert message.sampling.temperature == 0.5 and message.sampling.top_p == pytest.approx(0.9)
    assert not message.sampling.HasField("top_k")  # the release ignores it: never sent
    assert message.sampling.seed == 2**64 - 1
    stopping = message.stopping
    assert stopping.max_tokens == 64 and stopping.HasField("include_stop_in_output")
    assert not stopping.include_stop_in_output
    assert [c.stop_token_id for c in stopping.conditions] == list(encoding.assistant_action_stops)
    assert message.response.return_output_logprobs and message.response.output_candidates.top_n == 1
    assert (
        json.loads(message.guided.structural_tag)["type"] == "structural_tag" and not message.guided.backend
    )
    assert message.kv.cache_salt == "tenant-a" and not message.kv.HasField("session")
    assert dict(message.extra.items()) == {"detokenize": False, "conversation_id": "sess-1"}


def test_a_generation_without_a_session_or_salt_sends_neither(encoding: HarmonyEncoding) -> None:
    message = generate_request(generation_pb2, _request(encoding), model="m", unapplied={})
    assert not message.HasField("kv") and dict(message.extra.items()) == {"detokenize": False}
    assert not message.HasField("response") and not message.HasField("guided")


def _token(*infos: Any) -> Any:
    return generation_pb2.GenerateResponse(request_id="r1", token=generation_pb2.TokenOutput(tokens=infos))


def test_events_become_steps() -> None:
    reader = OpenEngineReader("grpc://e:1", 2)
    ranked = [
        generation_pb2.LogProb(token_id=9, logprob=-0.5, rank=2),
        generation_pb2.LogProb(token_id=5, logprob=-0.1, rank=1),
    ]
    step = reader.read(
        _token(
            generation_pb2.TokenInfo(token_id=5, logprob=-0.1, rank=1, candidates=ranked),
            # no logprob of its own (a generation-only leg's first token): its candidate entry
            generation_pb2.TokenInfo(token_id=9, candidates=ranked),
        )
    )
    assert step is not None and list(step.tokens) == [5, 9] and step.finish is None
    assert step.logprobs == [(-0.1, [(5, -0.1), (9, -0.5)]), (-0.5, [(5, -0.1), (9, -0.5)])]
    last = reader.read(
        generation_pb2.GenerateResponse(
            finished=generation_pb2.GenerationFinished(reason=generation_pb2.FINISH_REASON_STOP),
            usage=generation_pb2.Usage(prompt_tokens=3, cached_prompt_tokens=2),
        )
    )
    assert last is not None and last.finish == ("stop", None) and last.cached_tokens == 2
    for reason, mapped in (
        (generation_pb2.FINISH_REASON_LENGTH, "length"),
        (generation_pb2.FINISH_REASON_CANCELLED, "cancelled"),
        (generation_pb2.FINISH_REASON_UNSPECIFIED, "error"),
    ):
        ended = OpenEngineReader("u", None).read(
            generation_pb2.GenerateResponse(
                finished=generation_pb2.GenerationFinished(reason=reason, message="x")
            )
        )
        assert ended is not None and ended.finish is not None and ended.finish[0] == mapped


def test_an_engine_error_event_says_whose_fault_it_is() -> None:
    def failed(code: int) -> EngineFailed:
        event = generation_pb2.GenerateResponse(
            error=error_pb2.EngineError(code=code, message="m", retryable=True)
        )
        with pytest.raises(EngineFailed) as raised:
            OpenEngineReader("grpc://e:1", None).read(event)
        return raised.value

    overloaded = failed(error_pb2.ERROR_CODE_OVERLOADED)
    assert "grpc://e:1" in str(overloaded) and "ERROR_CODE_OVERLOADED (retryable)" in str(overloaded)
    assert engine_fault(overloaded)  # retried on another engine before the first token
    assert not engine_fault(failed(error_pb2.ERROR_CODE_INVALID_ARGUMENT))
    assert not engine_fault(failed(error_pb2.ERROR_CODE_UNSUPPORTED_FEATURE))


class _Control(openengine_pb2_grpc.ControlServicer):
    """A ``Control`` service that describes itself as told (``info`` None: the stub's UNIMPLEMENTED)."""

    def __init__(self, info: Any) -> None:
        self.info = info

    async def GetServerInfo(self, request: Any, context: Any) -> Any:
        if self.info is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")
        return self.info

    async def GetModelInfo(self, request: Any, context: Any) -> Any:
        return model_pb2.ModelInfo(served_model_name="gpt-oss-x", max_context_length=4096)

    async def Health(self, request: Any, context: Any) -> Any:
        return lifecycle_pb2.HealthResponse(state=lifecycle_pb2.HEALTH_STATE_READY)


@pytest.fixture
async def control() -> AsyncIterator[tuple[_Control, str]]:
    service = _Control(None)
    server = grpc.aio.server()
    openengine_pb2_grpc.add_ControlServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield service, f"grpc://127.0.0.1:{port}"
    await server.stop(None)


def _executor(url: str, encoding: HarmonyEncoding) -> TrtllmGrpcExecutor:
    return TrtllmGrpcExecutor(url, encoding=encoding, protocol="openengine", connect_timeout=5)


async def test_the_stub_without_generate_is_refused_saying_which_release(
    control: tuple[_Control, str], encoding: HarmonyEncoding
) -> None:
    _, url = control
    with pytest.raises(ExecutorError, match=r"UNIMPLEMENTED.*1\.3\.0rc28"):
        await _executor(url, encoding).start()


async def test_an_engine_that_is_not_tensorrt_llm_is_refused(
    control: tuple[_Control, str], encoding: HarmonyEncoding
) -> None:
    service, url = control
    service.info = server_pb2.ServerInfo(engine_name="vllm", engine_version="0.11.0", schema_revision=1)
    with pytest.raises(ExecutorError, match="is vllm, not TensorRT-LLM"):
        await _executor(url, encoding).start()
    service.info = server_pb2.ServerInfo(
        engine_name="tensorrt_llm", engine_version="1.4.0rc1", schema_revision=2, minimum_client_revision=2
    )
    with pytest.raises(ExecutorError, match="schema revision 2 or newer"):
        await _executor(url, encoding).start()


async def test_tenants_prefixes_stay_apart_over_openengine(
    control: tuple[_Control, str], encoding: HarmonyEncoding
) -> None:
    service, url = control
    service.info = server_pb2.ServerInfo(
        engine_name="tensorrt_llm", engine_version="1.4.0rc1", schema_revision=1
    )
    executor = _executor(url, encoding)
    await executor.start()
    try:
        # The salt travels as kv.cache_salt and TensorRT-LLM's adapter passes it to generate_async: --tenants is
        # allowed (on SMG's wire the servicer drops cache_salt_id, and a tenants file is refused).
        assert executor.prefix_isolation_refusal is None
        assert executor.max_seq_len == 4096 and executor.healthy()
    finally:
        await executor.shutdown()


# ------------------------------------------------------------------------------------- disaggregation


def _session(**attributes: Any) -> Any:
    from trtllm_responses.executors.trtllm_grpc.openengine import kv_pb2

    session = kv_pb2.KvSessionRef(session_id="7", transfer_backend="UCX")
    session.attributes_struct.update({"opaque_state": "b3BhcXVl", **attributes})
    return session


def test_the_legs_messages_carry_the_hand_off_unchanged(encoding: HarmonyEncoding) -> None:
    from trtllm_responses.executors.trtllm_grpc.disagg import context_message, generation_message

    whole = generate_request(generation_pb2, _request(encoding, session_key="s"), model="m", unapplied={})
    context = context_message(whole)
    assert dict(context.extra.items())["request_type"] == "context_only" and "request_type" not in whole.extra
    session = _session(first_gen_tokens=[42])
    generation = generation_message(whole, session)
    assert generation.kv.session == session  # byte for byte what the prefill engine sent
    assert "request_type" not in generation.extra and generation.extra["conversation_id"] == "s"


def test_a_context_leg_is_read_to_its_hand_off() -> None:
    from trtllm_responses.executors.trtllm_grpc.disagg import ContextReader

    reader = ContextReader("grpc://p:1", 1)
    candidate = [generation_pb2.LogProb(token_id=42, logprob=-0.2, rank=1)]
    assert (
        reader.read(_token(generation_pb2.TokenInfo(token_id=42, logprob=-0.2, candidates=candidate))) is None
    )
    ready = generation_pb2.GenerateResponse(
        prefill_ready=generation_pb2.PrefillReady(kv_session=_session(first_gen_tokens=[42])),
        usage=generation_pb2.Usage(prompt_tokens=9, cached_prompt_tokens=5),
    )
    assert reader.read(ready) is None and reader.ended
    handoff = reader.handoff
    assert handoff is not None and handoff.first_tokens == [42] and handoff.cached_tokens == 5
    assert (
        handoff.first_logprobs == [(-0.2, [(42, -0.2)])] and handoff.session == ready.prefill_ready.kv_session
    )
    # A stop trimmed from the output sends no token event: the first token is the session's first_gen_tokens.
    trimmed = ContextReader("grpc://p:1", None)
    trimmed.read(ready)
    assert trimmed.handoff is not None and trimmed.handoff.first_tokens == [42]
    # A hand-off a decode engine could not resolve is refused (Dynamo's sidecar checks the same).
    with pytest.raises(ExecutorError, match="without a session id"):
        ContextReader("grpc://p:1", None).read(
            generation_pb2.GenerateResponse(prefill_ready=generation_pb2.PrefillReady())
        )
    # Cancelled before the hand-off: the turn ends there.
    cancelled = ContextReader("grpc://p:1", None)
    step = cancelled.read(
        generation_pb2.GenerateResponse(
            finished=generation_pb2.GenerationFinished(reason=generation_pb2.FINISH_REASON_CANCELLED)
        )
    )
    assert step is not None and step.finish == ("cancelled", None) and not cancelled.ended


def test_a_first_token_that_is_a_stop_ends_the_turn_at_the_hand_off(encoding: HarmonyEncoding) -> None:
    from trtllm_responses.executors.trtllm_grpc.disagg import Handoff

    executor = TrtllmGrpcExecutor(
        encoding=encoding, protocol="openengine", prefill_urls=["grpc://p:1"], decode_urls=["grpc://d:1"]
    )
    request = _request(encoding)
    stop = encoding.assistant_action_stops[0]
    assert executor._split is not None
    assert executor._split.ended_at_handoff(request, Handoff(_session(), [stop], None, 0)) == (
        "stop",
        "its first token is a stop token (PrefillReady hides the stop)",
    )
    assert executor._split.ended_at_handoff(request, Handoff(_session(), [17], None, 0)) is None
    executor._split._turns[request.request_id] = False
    executor.abort(request.request_id)  # between the legs: no generation leg starts after it
    assert executor._split.ended_at_handoff(request, Handoff(_session(), [17], None, 0)) is not None


def test_prefill_and_decode_engines_need_openengine(encoding: HarmonyEncoding) -> None:
    with pytest.raises(ValueError, match="OpenEngine"):
        TrtllmGrpcExecutor(encoding=encoding, prefill_urls=["grpc://p:1"], decode_urls=["grpc://d:1"])
