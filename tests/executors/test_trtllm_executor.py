"""The TensorRT-LLM executor against the fake LLM API: streaming, finish reasons, sampling, abort, cache reuse."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from support.server_harness import ServerFactory, stream_events
from support.stream_grammar import check_stream
from support.trtllm_harness import collect, executor_for, request

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import GenerationRequest, SamplingSettings
from trtllm_responses.executors.trtllm import (
    TrtllmUnavailableError,
    check_llm_arguments,
    import_tensorrt_llm,
)
from trtllm_responses.harmony import HarmonyEncoding, parse_completion


def test_without_tensorrt_llm_the_error_says_what_to_do() -> None:
    with pytest.raises(TrtllmUnavailableError, match="--engine echo"):
        import_tensorrt_llm()


async def test_start_builds_one_llm_with_block_reuse(fake_trtllm: Any, encoding: HarmonyEncoding) -> None:
    executor = executor_for(encoding, tensor_parallel_size=2, max_seq_len=4096)
    await executor.start()
    llm = executor._llm
    assert isinstance(llm, fake_trtllm.LLM)
    assert isinstance(llm.args.kv_cache_config, fake_trtllm.KvCacheConfig)
    assert (
        llm.args.kv_cache_config.enable_block_reuse is True
        and llm.args.kv_cache_config.free_gpu_memory_fraction == 0.9
    )
    assert llm.args.tensor_parallel_size == 2 and executor.max_seq_len == 4096
    await executor.shutdown()
    assert llm.shutdown_called


async def test_streams_token_ids_diff_per_step(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = executor_for(encoding, stream_interval=4)
    await executor.start()
    deltas = await collect(executor, request(adapter, "Hello world, this is a longer echo."))
    assert all(len(d.token_ids) <= 4 for d in deltas) and any(len(d.token_ids) == 4 for d in deltas)
    assert deltas[-1].finish_reason == "stop" and all(d.finish_reason is None for d in deltas[:-1])
    tokens = [t for d in deltas for t in d.token_ids]
    assert encoding.return_ not in tokens, (
        "TensorRT-LLM strips the stop token (include_stop_str_in_output=False)"
    )
    assert [m.text for m in parse_completion(encoding, tokens)] == [
        "Echoing the user.",
        "Hello world, this is a longer echo.",
    ]


@pytest.mark.parametrize("release", ["1.2.0", "1.4.0rc1"])
async def test_sampling_params(
    fake_trtllm: Any, encoding: HarmonyEncoding, release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """temperature and top_p are always stated: all unset is greedy decoding in TensorRT-LLM. seed, min_p and the
    penalties reach SamplingParams only where the release's PyTorch sampler applies them (1.3.0rc29 on)."""
    monkeypatch.setattr(fake_trtllm, "__version__", release)
    executor = executor_for(encoding)
    await executor.start()
    plain = executor.sampling_params(SamplingSettings(100, (200002, 200012)))
    assert (plain.max_tokens, plain.stop_token_ids, plain.end_id, plain.detokenize) == (
        100,
        [200002, 200012],
        encoding.return_,
        False,
    )
    assert (plain.temperature, plain.top_p) == (1.0, 1.0) and not plain._greedy_decoding
    assert plain.top_k is None and plain.min_p is None and plain.seed is None
    assert plain.frequency_penalty is None and plain.presence_penalty is None
    tuned = executor.sampling_params(
        SamplingSettings(
            5,
            (1,),
            temperature=0.2,
            top_p=0.9,
            seed=7,
            top_k=40,
            min_p=0.05,
            frequency_penalty=0.5,
            presence_penalty=-0.5,
        )
    )
    if release == "1.4.0rc1":
        assert (tuned.temperature, tuned.top_p, tuned.seed, tuned.top_k, tuned.min_p) == (
            0.2,
            0.9,
            7,
            40,
            0.05,
        )
        assert (tuned.frequency_penalty, tuned.presence_penalty) == (0.5, -0.5)
        assert executor.unapplied_sampling == {}
    else:  # never sent where ignored (the service refuses or drops them before: tests/executors/test_trtllm_releases.py)
        assert (tuned.temperature, tuned.top_p, tuned.seed, tuned.top_k, tuned.min_p) == (
            0.2,
            0.9,
            None,
            40,
            None,
        )
        assert (tuned.frequency_penalty, tuned.presence_penalty) == (None, None)
        assert set(executor.unapplied_sampling) == {"seed", "min_p", "frequency_penalty", "presence_penalty"}
    assert executor.sampling_params(SamplingSettings(5, (1,), temperature=0.0))._greedy_decoding


def test_the_fake_is_greedy_when_sampling_is_unset(fake_trtllm: Any) -> None:
    """What the executor used to send (nothing) is greedy decoding (sampling_params.py)."""
    assert fake_trtllm.SamplingParams()._greedy_decoding
    assert not fake_trtllm.SamplingParams(temperature=1.0, top_p=1.0)._greedy_decoding
    assert fake_trtllm.SamplingParams(temperature=1.0, top_k=1)._greedy_decoding


@pytest.mark.parametrize(
    "text, max_tokens, finish, error",
    [
        ("#lorem 50", 10, "length", None),
        ("plain", 4096, "stop", None),
        ("#timeout", 4096, "error", "timeout"),
    ],
)
async def test_finish_reasons(
    fake_trtllm: Any,
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
    text: str,
    max_tokens: int,
    finish: str,
    error: str | None,
) -> None:
    executor = executor_for(encoding)
    await executor.start()
    deltas = await collect(executor, request(adapter, text, max_tokens))
    assert deltas[-1].finish_reason == finish
    if error:
        assert error in (deltas[-1].error or "")
    if finish == "length":
        assert sum(len(d.token_ids) for d in deltas) == max_tokens


async def test_engine_exception_propagates(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = executor_for(encoding)
    await executor.start()
    with pytest.raises(RuntimeError, match="fake engine failure"):
        await collect(executor, request(adapter, "#fail"))
    assert not executor._running


async def test_abort_cancels_the_tensorrt_llm_request(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """Abort is asynchronous in TensorRT-LLM (executor.abort_request): a step may still bring tokens."""
    executor = executor_for(encoding)
    await executor.start()
    out = []
    async for delta in executor.generate(request(adapter, "#lorem 500", request_id="abc")):
        out.append(delta)
        if len(out) == 3:
            result = executor._running["abc"]
            executor.abort("abc")
            assert result.aborted()
    assert out[-1].finish_reason == "cancelled"
    assert len(out) == 5 and out[3].token_ids and out[3].finish_reason is None, "tokens arrived after abort"
    executor.abort("abc")  # finished: nothing to abort, no error


async def test_cached_tokens_reported_for_a_continued_prefix(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = executor_for(encoding)
    await executor.start()
    first = await collect(executor, request(adapter, "word " * 200))
    second = await collect(executor, request(adapter, "word " * 200 + "more"))
    assert first[-1].cached_tokens == 0
    assert second[-1].cached_tokens and second[-1].cached_tokens >= 192 and second[-1].cached_tokens % 32 == 0


def test_unknown_llm_arguments_are_refused(fake_trtllm: Any) -> None:
    check_llm_arguments({"model": "m", "tensor_parallel_size": 2, "kv_cache_config": {}}, "pytorch")
    with pytest.raises(ValueError, match="no argument\\(s\\) not_a_real_option"):
        check_llm_arguments({"model": "m", "not_a_real_option": 1}, "pytorch")


def test_server_with_the_trtllm_executor(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    executor = executor_for(encoding, stream_interval=3)
    running = serve(executor)
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            events = stream_events(client, {"input": "Streaming through TensorRT-LLM"})
            response = check_stream(events)
            assert response["output"][-1]["content"][0]["text"] == "Streaming through TensorRT-LLM"
            assert any(len(e["delta"]) > 5 for e in events if e["type"] == "response.output_text.delta"), (
                "several tokens per step"
            )
            plain = client.post("/v1/responses", json={"input": "#lorem 30", "max_output_tokens": 12}).json()
            assert plain["status"] == "incomplete" and plain["usage"]["output_tokens"] == 12
            failed = check_stream(stream_events(client, {"input": "#fail"}))
            assert failed["status"] == "failed" and "fake engine failure" in failed["error"]["message"]
            timeout = check_stream(stream_events(client, {"input": "#timeout"}))
            assert timeout["status"] == "failed" and "timeout" in timeout["error"]["message"]
            first = client.post("/v1/responses", json={"input": "word " * 300}).json()
            second = client.post(
                "/v1/responses", json={"input": "again", "previous_response_id": first["id"]}
            ).json()
            assert second["usage"]["input_tokens_details"]["cached_tokens"] >= 288
    finally:
        running.stop()
    assert executor._llm is None, "the server's shutdown shut TensorRT-LLM down"


async def test_closing_the_stream_early_aborts_the_request(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = executor_for(encoding)
    await executor.start()
    stream = executor.generate(request(adapter, "#lorem 500", request_id="early"))
    await stream.__anext__()
    result = executor._running["early"]
    await stream.aclose()
    assert result.aborted() and not executor._running


async def test_cancelling_the_consumer_aborts_the_request(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TRTLLM_STEP_DELAY", "0.01")
    executor = executor_for(encoding)
    await executor.start()
    seen: list[Any] = []

    async def consume() -> None:
        async for _ in executor.generate(request(adapter, "#lorem 500", request_id="cancel-me")):
            seen.append(executor._running["cancel-me"])

    task = asyncio.create_task(consume())
    while not seen:
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen[0].aborted()


def test_service_tier_is_the_request_priority(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    """service_tier → generate_async(priority=...) (tensorrt_llm/llmapi/llm.py), echoed as the tier served."""
    import openai

    executor = executor_for(encoding)
    running = serve(executor)
    try:
        with openai.OpenAI(
            base_url=running.base_url + "/v1", api_key="x", max_retries=0, _strict_response_validation=True
        ) as client:
            tiers = [
                client.responses.create(model="m", input="hi", service_tier=tier).service_tier  # type: ignore[arg-type]
                for tier in ("flex", "priority", "fast", "auto")
            ]
            plain = client.responses.create(model="m", input="hi")
            with pytest.raises(openai.BadRequestError) as err:
                client.responses.create(model="m", input="hi", service_tier="gold")  # type: ignore[arg-type]
        assert tiers == ["flex", "priority", "priority", "default"] and plain.service_tier == "default"
        assert err.value.body["param"] == "service_tier"  # type: ignore[index]
        assert executor._llm.priorities == [0.25, 0.75, 0.75, 0.5, 0.5]
    finally:
        running.stop()


async def test_priority_left_out_where_tensorrt_llm_has_none(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Older TensorRT-LLM (generate_async without ``priority``): the request runs at the one priority there is.

    The signature is read once the LLM is made (``start``), so the older one is installed before it."""
    executor = executor_for(encoding)
    seen: list[dict[str, Any]] = []
    original = fake_trtllm.LLM.generate_async

    def older(self: Any, inputs: Any, sampling_params: Any = None, streaming: bool = False) -> Any:
        seen.append({"streaming": streaming})
        return original(self, inputs, sampling_params=sampling_params, streaming=streaming)

    monkeypatch.setattr(fake_trtllm.LLM, "generate_async", older)
    await executor.start()
    base = request(adapter, "hello")
    prioritized = GenerationRequest(base.request_id, base.prompt_token_ids, base.sampling, priority=0.75)
    out = await collect(executor, prioritized)
    assert out[-1].finish_reason == "stop" and seen == [{"streaming": True}]


async def test_prompt_cache_ttl_is_a_kv_cache_retention_config(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """prompt_cache_options.ttl → generate_async(kv_cache_retention_config=...) over the prompt's tokens (to its end:
    ``token_end`` None)."""
    import datetime

    executor = executor_for(encoding)
    await executor.start()
    base = request(adapter, "hello")
    asked = GenerationRequest(
        base.request_id, base.prompt_token_ids, base.sampling, cache_retention_seconds=43200
    )
    await collect(executor, asked)
    await collect(executor, base)
    config, plain = executor._llm.retention_configs
    assert plain is None and config.decode_retention_priority == 35
    (prompt_range,) = config.token_range_retention_configs
    assert (prompt_range.token_start, prompt_range.token_end) == (0, None)
    assert prompt_range.priority == 80 and prompt_range.duration_ms == datetime.timedelta(hours=12)


async def test_session_key_is_conversation_params(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session key → generate_async(conversation_params=ConversationParams(conversation_id=key)), the
    argument of the releases after 1.2.1 that have it (tensorrt_llm/llmapi/llm.py); none without a key."""
    monkeypatch.setattr(fake_trtllm, "__version__", "1.3.0rc29")
    executor = executor_for(encoding)
    await executor.start()
    assert executor.takes_sessions
    base = request(adapter, "hello")
    keyed = GenerationRequest(base.request_id, base.prompt_token_ids, base.sampling, session_key="sess-1")
    assert (await collect(executor, keyed))[-1].finish_reason == "stop"
    await collect(executor, base)
    assert executor._llm.conversation_ids == ["sess-1", None]


async def test_session_key_left_out_where_tensorrt_llm_has_no_conversation_params(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorRT-LLM 1.2.1's generate_async (the last release on PyPI) has priority and retention but no
    conversation_params: the key is not passed, and the request runs."""
    executor = executor_for(encoding)
    seen: list[set[str]] = []
    original = fake_trtllm.LLM.generate_async

    def release_1_2(
        self: Any,
        inputs: Any,
        sampling_params: Any = None,
        streaming: bool = False,
        kv_cache_retention_config: Any = None,
        priority: float = 0.5,
    ) -> Any:
        seen.append({"priority"} if priority != 0.5 else set())
        return original(self, inputs, sampling_params=sampling_params, streaming=streaming, priority=priority)

    monkeypatch.setattr(fake_trtllm.LLM, "generate_async", release_1_2)
    await executor.start()
    assert not executor.takes_sessions
    base = request(adapter, "hello")
    keyed = GenerationRequest(
        base.request_id, base.prompt_token_ids, base.sampling, priority=0.75, session_key="sess-1"
    )
    assert (await collect(executor, keyed))[-1].finish_reason == "stop"
    assert seen == [{"priority"}] and executor._llm.conversation_ids == [None]


def test_fake_conversation_params_are_tensorrt_llms(fake_trtllm: Any) -> None:
    """ConversationParams as tensorrt_llm/conversation_params.py has it: the id stripped, a blank one refused."""
    from tensorrt_llm.llmapi import ConversationParams  # the fake, on sys.path through the fixture

    assert ConversationParams(conversation_id="  abc ").conversation_id == "abc"
    for blank in ("", "   "):
        with pytest.raises(ValueError, match="non-empty"):
            ConversationParams(conversation_id=blank)
