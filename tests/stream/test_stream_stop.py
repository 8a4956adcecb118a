"""Stopping a response at a Harmony message boundary (steering), with several tokens per engine step."""

from __future__ import annotations

import asyncio

import pytest
from support.stream_grammar import check_stream

from trtllm_responses.core.wire import to_dict
from trtllm_responses.executors.base import TokenDelta
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.request import decode_body
from trtllm_responses.responses.service import ResponsesService
from trtllm_responses.store import ConversationHistoryStore
from trtllm_responses.stream import ResponseStream, TokenStreamProcessor

COMPLETION = (
    "<|channel|>analysis<|message|>Thinking it over.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello there, friend.<|return|>"
)


def run(encoding, adapter, step: int, stop_reason: str | None):  # type: ignore[no-untyped-def]
    service = ResponsesService(
        executor=EchoExecutor(encoding),
        store=ConversationHistoryStore(10, 1 << 20),
        adapter=adapter,
        model_name="m",
    )
    prepared = asyncio.run(service.prepare(decode_body(b'{"input": "hi"}')))
    asked: list[int] = []

    class Control:  # what a ResponseRun answers the processor (stream.RunControl)
        cancelled = False

        def stop_reason(self) -> str | None:
            asked.append(1)
            return stop_reason

    processor = TokenStreamProcessor(ResponseStream(prepared.response), encoding, 10, Control())
    events = processor.start()
    tokens = encoding.encode(COMPLETION)
    chunks = [tokens[i : i + step] for i in range(0, len(tokens), step)]
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        events += processor.process(TokenDelta(chunk, "stop" if last else None))
        if processor.done:
            break
    return [to_dict(e) for e in events], asked


@pytest.mark.parametrize("step", [1, 4, 10])
def test_a_stop_ends_the_response_at_the_first_message_boundary(encoding, adapter, step: int) -> None:  # type: ignore[no-untyped-def]
    events, asked = run(encoding, adapter, step, "steered")
    final = check_stream(events)
    assert final["status"] == "incomplete" and final["incomplete_details"]["reason"] == "steered"
    assert [item["type"] for item in final["output"]] == ["reasoning"]  # the final answer never started
    assert final["output"][0]["status"] == "completed"
    assert len(asked) == 1  # asked once, when the analysis message ended


def test_no_stop_asked_means_the_response_completes(encoding, adapter) -> None:  # type: ignore[no-untyped-def]
    events, asked = run(encoding, adapter, 4, None)
    final = check_stream(events)
    assert final["status"] == "completed" and [i["type"] for i in final["output"]] == ["reasoning", "message"]
    assert len(asked) == 1  # asked at the analysis end; the last step finishes the response whole


def test_a_step_that_finishes_the_response_is_applied_whole(encoding, adapter) -> None:  # type: ignore[no-untyped-def]
    events, asked = run(encoding, adapter, 1000, "steered")  # the whole completion in one finishing step
    final = check_stream(events)
    assert final["status"] == "completed" and asked == []
