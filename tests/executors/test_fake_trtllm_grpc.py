"""The fake TensorRT-LLM gRPC engine (tests/fake_trtllm/grpc_server.py) driven as a client drives the real one.

Two engine processes are started once for the module (support/trtllm_grpc_harness.py): A plays 1.4.0rc1, B
1.3.0rc29, both with xgrammar, block reuse and paced steps. A grpcio client with the vendored stubs checks what
``tensorrt_llm/grpc/smg/servicer.py`` answers: the stream of token ids and its closing ``complete`` with the
counts, ``Abort`` of a running stream, the info RPCs, a structural tag constrained as the in-process fake LLM
constrains it, and a disaggregated turn (context-only on A, generation-only on B).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from support.trtllm_grpc_harness import GrpcEngine, grpc_engines

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.constraints.guided import structural_tag
from trtllm_responses.executors.trtllm_grpc import trtllm_service_pb2 as pb2
from trtllm_responses.executors.trtllm_grpc import trtllm_service_pb2_grpc as pb2_grpc
from trtllm_responses.request.protocol import parse_request

OPTIONS = {"guided_decoding_backend": "xgrammar", "kv_cache_config": {"enable_block_reuse": True}}
#: Paced steps (the abort test needs a stream still running) and the adversarial sampler on.
ENV = {"FAKE_TRTLLM_STEP_DELAY": "0.01", "FAKE_TRTLLM_NOISE": "0.3"}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[GrpcEngine, GrpcEngine]]:
    a = GrpcEngine("1.4.0rc1", options=OPTIONS, env=ENV, served_model_name="gpt-oss-fake")
    b = GrpcEngine("1.3.0rc29", options=OPTIONS, env=ENV)
    with grpc_engines(a, b):
        yield a, b


def _stub(engine: GrpcEngine) -> Any:
    return pb2_grpc.TrtllmServiceStub(grpc.insecure_channel(engine.target))


def _request(adapter: HarmonyAdapter, text: str, request_id: str, **fields: Any) -> Any:
    prompt = adapter.build_prompt(parse_request({"input": text}))
    return pb2.GenerateRequest(
        request_id=request_id,
        tokenized=pb2.TokenizedInput(input_token_ids=prompt.token_ids),
        streaming=True,
        stop_token_ids=list(adapter.stop_token_ids),
        **{"max_tokens": 512, **fields},
    )


def _drain(responses: Any) -> tuple[list[Any], Any]:
    chunks, complete = [], None
    for response in responses:
        kind = response.WhichOneof("response")
        if kind == "chunk":
            assert complete is None, "a chunk after the complete message"
            chunks.append(response.chunk)
        else:
            assert complete is None, "two complete messages"
            complete = response.complete
    assert complete is not None, "the stream ended without its complete message"
    return chunks, complete


def test_generate_streams_token_ids_and_completes_with_counts(engines: Any, adapter: HarmonyAdapter) -> None:
    a, _ = engines
    request = _request(
        adapter, "Tell me about gRPC streams", "plain-1", output_config=pb2.OutputConfig(logprobs=2)
    )
    chunks, complete = _drain(_stub(a).Generate(request, timeout=60))
    streamed = [token for chunk in chunks for token in chunk.token_ids]
    assert len(chunks) > 1 and all(chunk.token_ids for chunk in chunks)
    assert streamed == list(complete.output_token_ids) and streamed
    counts = [chunk.completion_tokens for chunk in chunks]
    assert counts == [sum(len(c.token_ids) for c in chunks[: i + 1]) for i in range(len(chunks))]
    prompt_len = len(request.tokenized.input_token_ids)
    assert {chunk.prompt_tokens for chunk in chunks} == {prompt_len} and complete.prompt_tokens == prompt_len
    assert complete.completion_tokens == len(streamed)
    # A Harmony stop token ended it: trimmed from the output (TensorRT-LLM's _handle_sequence), named as matched.
    assert complete.finish_reason == "stop" and complete.matched_token_id in adapter.stop_token_ids
    assert complete.matched_token_id not in streamed
    # One logprob per streamed token, the sampled token's own with its top-2 alternatives.
    assert [lp.token_id for chunk in chunks for lp in chunk.logprobs] == streamed
    assert all(len(lp.top_logprobs) == 2 for chunk in chunks for lp in chunk.logprobs)
    # The same prompt again on the same engine: its prefix comes from the KV cache, reported in every chunk. Its
    # cache salt and retention are not read by the servicer (they never reach generate_async): reused all the same.
    salted = _request(
        adapter,
        "Tell me about gRPC streams",
        "plain-2",
        cache_salt_id=12345,
        kv_cache_retention=pb2.KvCacheRetentionConfig(policy="keep", config_json="{}"),
    )
    again, complete_again = _drain(_stub(a).Generate(salted))
    assert {c.cached_tokens for c in again} == {complete_again.cached_tokens}
    assert complete.cached_tokens < complete_again.cached_tokens
    generated = [json.loads(line) for line in a.fake_log.read_text().splitlines()]
    assert [r["cache_salt"] for r in generated if r["event"] == "generate"][-1] is None


def test_abort_ends_a_running_stream_within_50_ms(engines: Any, adapter: HarmonyAdapter) -> None:
    a, _ = engines
    stub = _stub(a)
    stream = stub.Generate(
        _request(adapter, "Write a long answer", "abort-1", max_tokens=100_000), timeout=60
    )
    first = next(stream)
    assert first.WhichOneof("response") == "chunk"
    reply = stub.Abort(pb2.AbortRequest(request_id="abort-1"))
    asked = time.monotonic()
    assert reply.success and reply.message == "Request abort-1 aborted"
    chunks, complete = _drain(stream)
    elapsed = time.monotonic() - asked
    assert complete.finish_reason == "cancelled"
    assert elapsed < 0.05, f"the stream ended {elapsed * 1000:.0f} ms after Abort"
    # An id that is not running is not found.
    assert not stub.Abort(pb2.AbortRequest(request_id="abort-1")).success


def test_health_model_and_server_info(engines: Any) -> None:
    a, b = engines
    assert _stub(a).HealthCheck(pb2.HealthCheckRequest()).status == "OK"
    assert _stub(a).GetServerInfo(pb2.GetServerInfoRequest()).version == "1.4.0rc1"
    info = _stub(b).GetServerInfo(pb2.GetServerInfoRequest())
    assert (info.version, info.backend, info.tensor_parallel_size, info.world_size) == (
        "1.3.0rc29",
        "tensorrt-llm",
        1,
        1,
    )
    assert _stub(a).GetModelInfo(pb2.GetModelInfoRequest()).model_id == "gpt-oss-fake"
    assert _stub(b).GetModelInfo(pb2.GetModelInfoRequest()).model_id == "/ckpt/gpt-oss-tiny"


def test_errors_are_grpc_statuses(engines: Any, adapter: HarmonyAdapter) -> None:
    a, _ = engines
    with pytest.raises(grpc.RpcError) as missing:
        list(_stub(a).Generate(pb2.GenerateRequest(request_id="bad-1", max_tokens=8)))
    assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert missing.value.details() == "Missing tokenized input"
    with pytest.raises(grpc.RpcError) as failed:
        list(_stub(a).Generate(_request(adapter, "#fail", "bad-2")))
    assert failed.value.code() == grpc.StatusCode.INTERNAL and "#fail" in failed.value.details()


def test_a_structural_tag_is_constrained_as_the_in_process_fake_constrains_it(
    engines: Any, adapter: HarmonyAdapter, fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = engines
    text = {"format": {"type": "json_schema", "name": "place", "schema": SCHEMA, "strict": True}}
    prompt = adapter.build_prompt(parse_request({"input": "Where?", "text": text}))
    assert prompt.constraint is not None
    tag = structural_tag(prompt.constraint)
    request = pb2.GenerateRequest(
        request_id="guided-1",
        tokenized=pb2.TokenizedInput(input_token_ids=prompt.token_ids),
        max_tokens=512,
        streaming=True,
        stop_token_ids=list(adapter.stop_token_ids),
        sampling_config=pb2.SamplingConfig(seed=7),
        guided_decoding=pb2.GuidedDecodingParams(
            guide_type=pb2.GuidedDecodingParams.GUIDE_TYPE_STRUCTURAL_TAG, guide=tag
        ),
    )
    _, complete = _drain(_stub(a).Generate(request, timeout=120))
    # The same request to the fake LLM in this process, as the servicer's request manager builds it.
    monkeypatch.setattr(fake_trtllm, "__version__", "1.4.0rc1")
    monkeypatch.setenv("FAKE_TRTLLM_NOISE", ENV["FAKE_TRTLLM_NOISE"])
    from tensorrt_llm.grpc.smg.request_manager import create_sampling_params_from_proto

    params = create_sampling_params_from_proto(
        request.sampling_config, request.output_config, request.max_tokens,
        stop_token_ids=list(request.stop_token_ids), guided_decoding=request.guided_decoding,
    )  # fmt: skip
    assert params.guided_decoding.structural_tag == tag and not params._greedy_decoding
    llm = fake_trtllm.LLM("/ckpt/gpt-oss-tiny", **OPTIONS)
    local = _run(llm.generate_async({"prompt_token_ids": list(prompt.token_ids)}, params, streaming=True))
    assert list(complete.output_token_ids) == local.outputs[0].token_ids
    assert complete.finish_reason == local.outputs[0].finish_reason == "stop"
    # The engine got the tag as a structural tag, sampled (not greedy) with the seed, as the local call did.
    records = [json.loads(line) for line in a.fake_log.read_text().splitlines()]
    engine_call = [r for r in records if r["event"] == "generate"][-1]["sampling"]
    assert engine_call["guided_decoding"] == {"structural_tag": tag}
    assert (engine_call["greedy"], engine_call["seed"], engine_call["temperature"]) == (False, 7, 1.0)


def _run(result: Any) -> Any:
    import asyncio

    async def drain() -> Any:
        async for _ in result:
            pass
        return result

    return asyncio.run(drain())


def test_context_only_then_generation_only_on_another_engine(engines: Any, adapter: HarmonyAdapter) -> None:
    a, b = engines
    question = "Disaggregate this turn. " + "It has a prompt of several KV blocks. " * 12
    whole = _drain(_stub(b).Generate(_request(adapter, question, "agg-1")))[1]
    kinds = pb2.DisaggregatedParams
    context = _request(
        adapter, question, "ctx-1", disaggregated_params=kinds(request_type=kinds.REQUEST_TYPE_CONTEXT_ONLY)
    )
    chunks, prefill = _drain(_stub(a).Generate(context))
    # The context phase: the prefill and the first token, then the request ends ('length'); nothing of the context
    # phase's DisaggregatedParams comes back (GenerateComplete has no field for it).
    assert (
        list(prefill.output_token_ids)
        == list(whole.output_token_ids[:1])
        == [t for c in chunks for t in c.token_ids]
    )
    assert prefill.finish_reason == "length" and prefill.completion_tokens == 1
    generation = _request(
        adapter,
        question,
        "gen-1",
        disaggregated_params=kinds(
            request_type=kinds.REQUEST_TYPE_GENERATION_ONLY,
            ctx_request_id="ctx-1",
            context_phase_params=pb2.ContextPhaseParams(first_gen_token_id=prefill.output_token_ids[0]),
        ),
    )
    _, decoded = _drain(_stub(b).Generate(generation))
    # The generation leg starts from the context's first token and writes what one aggregated request writes.
    assert list(decoded.output_token_ids) == list(whole.output_token_ids)
    assert decoded.finish_reason == "stop"
    # It starts from whatever first token the context phase sent, and the model goes on from there.
    forced = whole.output_token_ids[1]
    generation.request_id = "gen-2"
    generation.disaggregated_params.context_phase_params.first_gen_token_id = forced
    assert _drain(_stub(b).Generate(generation))[1].output_token_ids[0] == forced != whole.output_token_ids[0]
    generated = [r for r in map(json.loads, b.fake_log.read_text().splitlines()) if r["event"] == "generate"]
    assert generated[-1]["sampling"]["max_tokens"] == 512
    # The prefill engine stored the context: the session's next turn reuses its prefix there.
    next_turn = _drain(
        _stub(a).Generate(
            _request(
                adapter,
                question,
                "ctx-2",
                disaggregated_params=kinds(request_type=kinds.REQUEST_TYPE_CONTEXT_ONLY),
            )
        )
    )[1]
    assert next_turn.cached_tokens > prefill.cached_tokens


def test_a_release_without_the_grpc_server_refuses_to_start(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import runpy

    from support.trtllm_grpc_harness import SERVER

    main = runpy.run_path(str(SERVER))["main"]
    monkeypatch.setattr(fake_trtllm, "__version__", fake_trtllm.__version__)
    monkeypatch.setenv("FAKE_TRTLLM_VERSION", "1.2.0")
    assert main(["--port", "1", "--release", "1.2.1"]) == 2
    assert "No such option: --grpc" in capsys.readouterr().err
    assert main(["--port", "1", "--release", "1.3.0rc20"]) == 2


def test_an_engine_that_crashes_says_so_and_one_killed_ends_its_streams(adapter: HarmonyAdapter) -> None:
    """Its own engine (this one dies): the ``#crash`` hook kills the fake's executor, HealthCheck then answers the
    fatal error's first line (still status OK at the gRPC level); SIGKILL ends a running stream UNAVAILABLE."""
    with grpc_engines(GrpcEngine(env={"FAKE_TRTLLM_STEP_DELAY": "0.2"})) as (engine,):
        stub = _stub(engine)
        stream = stub.Generate(
            _request(adapter, "A stream the engine's death ends", "dies-1", max_tokens=100_000)
        )
        assert next(stream).WhichOneof("response") == "chunk"
        with pytest.raises(grpc.RpcError) as crashed:
            list(stub.Generate(_request(adapter, "#crash", "crash-1")))
        assert crashed.value.code() == grpc.StatusCode.INTERNAL
        assert stub.HealthCheck(pb2.HealthCheckRequest()).status == "RequestError: the executor's worker died"
        assert engine.kill() == -9
        with pytest.raises(grpc.RpcError) as killed:
            list(stream)
        assert killed.value.code() == grpc.StatusCode.UNAVAILABLE
