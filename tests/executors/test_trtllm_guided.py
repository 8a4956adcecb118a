"""Constraints and logprobs through the TensorRT-LLM executor, against the fake LLM API's own field names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.server_harness import ServerFactory
from support.trtllm_harness import collect, executor_for

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.constraints.guided import structural_tag
from trtllm_responses.executors.base import GenerationRequest, SamplingSettings
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
JSON_FORMAT = {"format": {"type": "json_schema", "name": "place", "schema": SCHEMA, "strict": True}}


async def test_llm_gets_the_xgrammar_guided_decoding_backend(
    fake_trtllm: Any, encoding: HarmonyEncoding
) -> None:
    executor = executor_for(encoding)
    await executor.start()
    assert executor._llm.args.guided_decoding_backend == "xgrammar"


def test_another_guided_decoding_backend_is_refused(encoding: HarmonyEncoding) -> None:
    with pytest.raises(ValueError, match="structural tags"):
        executor_for(encoding, guided_decoding_backend="llguidance")


async def test_constraint_reaches_sampling_params_as_a_structural_tag(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = executor_for(encoding)
    await executor.start()
    prompt = adapter.build_prompt(parse_request({"input": "Where?", "text": JSON_FORMAT}))
    assert prompt.constraint is not None
    params = executor.sampling_params(SamplingSettings(64, adapter.stop_token_ids), prompt.constraint)
    guided = params.guided_decoding
    assert isinstance(guided, fake_trtllm.GuidedDecodingParams)
    assert guided.structural_tag == structural_tag(prompt.constraint)
    assert guided.json is None and guided.grammar is None and guided.regex is None and not guided.json_object
    assert json.loads(guided.structural_tag)["type"] == "structural_tag"
    free = executor.sampling_params(SamplingSettings(64, adapter.stop_token_ids))
    assert free.guided_decoding is None and free.logprobs is None


async def test_logprobs_reach_sampling_params_and_come_back_per_token(
    fake_trtllm: Any, encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    executor = executor_for(encoding, stream_interval=3)
    await executor.start()
    assert executor.sampling_params(SamplingSettings(8, (1,), logprobs=3)).logprobs == 3
    assert executor.sampling_params(SamplingSettings(8, (1,), logprobs=0)).logprobs == 1
    prompt = adapter.build_prompt(parse_request({"input": "Hello there"})).token_ids
    deltas = await collect(
        executor, GenerationRequest("r", prompt, SamplingSettings(4096, adapter.stop_token_ids, logprobs=2))
    )
    for delta in deltas:
        assert delta.logprobs is not None and len(delta.logprobs) == len(delta.token_ids)
        for token, (logprob, top) in zip(delta.token_ids, delta.logprobs, strict=True):
            # The fake: the sampled token at -0.25 (rank 1), token+1 at -1.25 (rank 2).
            assert logprob == -0.25 and top == [(token, -0.25), (token + 1, -1.25)]


def test_server_streams_logprobs_from_multi_token_steps(
    fake_trtllm: Any, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    """Several tokens per engine step: each token's logprob still lands on the text it produced."""
    import httpx
    from support.server_harness import stream_events
    from support.stream_grammar import check_stream

    running = serve(executor_for(encoding, stream_interval=3))
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as client:
            events = stream_events(
                client, {"input": "Logprobs from several tokens per step", "top_logprobs": 1}
            )
            final = check_stream(events)
            deltas = [e for e in events if e["type"] == "response.output_text.delta"]
            assert all(len(e["logprobs"]) == 1 for e in deltas)  # fed one token at a time
            part = final["output"][-1]["content"][0]
            assert "".join(lp["token"] for lp in part["logprobs"]) == part["text"]
            assert {lp["logprob"] for lp in part["logprobs"]} == {-0.25}
            assert all(len(lp["top_logprobs"]) == 1 for lp in part["logprobs"])
    finally:
        running.stop()
