"""Reasoning summaries (``reasoning.summary``): a side generation per analysis message, streamed into its
reasoning item with OpenAI's summary events, through a real server and the openai SDK (strict validation)."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import openai
import pytest
from support.server_harness import RecordingEcho, RunningServer
from support.stream_grammar import check_stream

from trtllm_responses.executors.base import GenerationRequest, TokenDelta
from trtllm_responses.responses.summaries import SUMMARY_TOKENS
from trtllm_responses.stream.summary import MAX_SUMMARIES

#: The events of a reasoning item with a summary, in OpenAI's order (the SDK's event types).
REASONING_WITH_SUMMARY = [
    "response.output_item.added",
    "response.content_part.added",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.content_part.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_summary_part.done",
    "response.output_item.done",
]


class ChunkedEcho(RecordingEcho):
    """The echo executor with several tokens per engine step (TensorRT-LLM's ``stream_interval``), and a
    log of when each generation's deltas came, for checking what ran beside what."""

    def __init__(self, *args: Any, step: int = 1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step = step
        self.log: list[tuple[str, float]] = []  # (request id, when a delta was taken)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        pending: list[TokenDelta] = []
        async for delta in super().generate(request):
            pending.append(delta)
            if len(pending) == self.step or delta.finish_reason is not None:
                tokens = [t for d in pending for t in d.token_ids]
                logprobs = (
                    [lp for d in pending for lp in (d.logprobs or ())] if delta.logprobs is not None else None
                )
                pending = []
                self.log.append((request.request_id, time.perf_counter()))
                yield TokenDelta(tokens, delta.finish_reason, delta.error, delta.cached_tokens, logprobs)


def _server(encoding, serve, **kwargs: Any) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    step = kwargs.pop("step", 1)
    pace = kwargs.pop("tokens_per_second", 0.0)
    running = serve(ChunkedEcho(encoding, step=step, tokens_per_second=pace), **kwargs)
    yield running
    running.stop()


@pytest.fixture
def server(encoding, serve) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    yield from _server(encoding, serve)


def _client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0, _strict_response_validation=True
    )


def _stream(target: openai.OpenAI | RunningServer, **body: Any) -> list[dict[str, Any]]:
    """A streamed response's events (through a new client when given a server)."""
    if isinstance(target, RunningServer):
        with _client(target) as client:
            return _stream(client, **body)
    with target.responses.create(model="gpt-oss", stream=True, **body) as stream:
        return [event.model_dump(mode="json", exclude_unset=True) for event in stream]


def _item_events(events: list[dict[str, Any]], output_index: int) -> list[str]:
    """The event types of one output item, consecutive deltas collapsed to one."""
    types: list[str] = []
    for event in events:
        if event.get("output_index") == output_index and (not types or types[-1] != event["type"]):
            types.append(event["type"])
    return types


def test_a_streamed_summary_has_all_its_events_in_order_and_is_stored(server: RunningServer) -> None:
    with _client(server) as client:
        _check_summary_stream(server, client)


def _check_summary_stream(server: RunningServer, client: openai.OpenAI) -> None:
    events = _stream(client, input="Hello there. How are you?", reasoning={"summary": "auto"})
    final = check_stream(events)
    assert _item_events(events, 0) == REASONING_WITH_SUMMARY
    reasoning, message = final["output"]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Summary: Echoing the user."}]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "Echoing the user."}]
    assert message["content"][0]["text"] == "Hello there. How are you?"
    # The summary part events carry the reasoning item's id, as the final response does.
    summary_events = [e for e in events if e["type"].startswith("response.reasoning_summary")]
    assert {e["item_id"] for e in summary_events} == {reasoning["id"]}
    # Usage: the summary's output tokens (its text and <|return|>) are added to output and reasoning tokens.
    encoding = server.executor._enc  # type: ignore[attr-defined]
    summary_tokens = len(encoding.encode_plain("Summary: Echoing the user.")) + 1
    plain = check_stream(_stream(client, input="Hello there. How are you?"))["usage"]
    usage = final["usage"]
    assert usage["output_tokens"] == plain["output_tokens"] + summary_tokens
    assert (
        usage["output_tokens_details"]["reasoning_tokens"]
        == plain["output_tokens_details"]["reasoning_tokens"] + summary_tokens
    )
    assert usage["input_tokens"] == plain["input_tokens"]  # the summarizer's prompt is not billed as input
    # Stored with its summary; the SDK's own accumulator sees the same.
    stored = client.responses.retrieve(final["id"])
    assert stored.output[0].summary[0].text == "Summary: Echoing the user."  # type: ignore[union-attr]
    with client.responses.stream(model="gpt-oss", input="Once more.", reasoning={"summary": "concise"}) as s:
        for _ in s:
            pass
        done = s.get_final_response()
    assert done.output[0].summary[0].text == "Summary: Echoing the user."  # type: ignore[union-attr]


def test_every_reasoning_item_gets_its_summary_before_a_call(server: RunningServer) -> None:
    """A response whose analysis precedes a function call: the summary closes the reasoning item first."""
    tool = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
    events = _stream(
        server, input='call get_weather {"city": "Paris"}', tools=[tool], reasoning={"summary": "detailed"}
    )
    final = check_stream(events)
    assert [item["type"] for item in final["output"]] == ["reasoning", "function_call"]
    assert final["output"][0]["summary"][0]["text"] == "Summary: Calling get_weather."
    assert final["output"][1]["arguments"] == '{"city": "Paris"}'


@pytest.mark.parametrize("step", [3, 200])
@pytest.mark.parametrize("logprobs", [False, True])
def test_several_tokens_per_step_wait_for_the_summary(encoding, serve, step: int, logprobs: bool) -> None:  # type: ignore[no-untyped-def]
    """A step that ends the analysis and starts the answer (or holds the whole completion) is split at the
    boundary: the answer's events come after the summary, none lost."""
    for running in _server(encoding, serve, step=step):
        extra: dict[str, Any] = {"top_logprobs": 2} if logprobs else {}
        events = _stream(running, input="One. Two.", reasoning={"summary": "auto"}, **extra)
        final = check_stream(events)
        assert _item_events(events, 0)[-5:] == REASONING_WITH_SUMMARY[-5:]
        assert final["output"][0]["summary"][0]["text"] == "Summary: Echoing the user."
        assert final["output"][1]["content"][0]["text"] == "One. Two."
        if logprobs:
            assert len(final["output"][1]["content"][0]["logprobs"]) == len(
                encoding.encode_plain("One. Two.")
            )


def test_the_summary_runs_beside_the_main_generation(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    """The main generation is not paused while the summary runs: its engine steps are taken meanwhile."""
    for running in _server(encoding, serve, tokens_per_second=400):
        final = check_stream(_stream(running, input="#lorem 60", reasoning={"summary": "auto"}))
        executor: ChunkedEcho = running.executor  # type: ignore[assignment]
        main_id = final["id"]
        summary_times = [t for rid, t in executor.log if rid == f"{main_id}.summary0"]
        during = [t for rid, t in executor.log if rid == main_id and summary_times[0] < t < summary_times[-1]]
        assert len(summary_times) > 3 and len(during) >= len(summary_times) - 2, (
            len(summary_times),
            len(during),
        )


def test_a_summary_cut_at_its_budget_is_marked_incomplete(server: RunningServer) -> None:
    words = " ".join(f"w{i}" for i in range(200)) + "."
    completion = (
        f"#harmony\n<|channel|>analysis<|message|>{words}<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    )
    events = _stream(server, input=completion, reasoning={"summary": "concise"})
    final = check_stream(events)
    (part_done,) = [e for e in events if e["type"] == "response.reasoning_summary_part.done"]
    assert part_done["status"] == "incomplete"
    text = final["output"][0]["summary"][0]["text"]
    encoding = server.executor._enc  # type: ignore[attr-defined]
    assert text.startswith("Summary: w0 w1") and len(encoding.encode_plain(text)) == SUMMARY_TOKENS["concise"]
    assert final["output"][1]["content"][0]["text"] == "Done."


def test_no_summary_when_not_asked_or_turned_off(encoding, serve, server: RunningServer) -> None:  # type: ignore[no-untyped-def]
    events = _stream(server, input="Hi.")
    assert not [e for e in events if "summary" in e["type"]]
    assert check_stream(events)["output"][0]["summary"] == []
    assert [r.request_id for r in server.executor.requests if ".summary" in r.request_id] == []  # type: ignore[attr-defined]
    for running in _server(encoding, serve, reasoning_summaries="off"):
        events = _stream(running, input="Hi.", reasoning={"summary": "auto"})
        assert not [e for e in events if "summary" in e["type"]]
        final = check_stream(events)
        assert final["output"][0]["summary"] == [] and final["reasoning"]["summary"] == "auto"


def test_an_unknown_summary_mode_is_a_400(server: RunningServer) -> None:
    with _client(server) as client, pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-oss", input="Hi.", reasoning={"summary": "verbose"})  # type: ignore[typeddict-item]
    assert caught.value.param == "reasoning.summary" and "verbose" in caught.value.message


def test_a_client_gone_mid_summary_aborts_both_generations(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    for running in _server(encoding, serve, tokens_per_second=50):
        with (
            _client(running) as client,
            client.responses.create(
                model="gpt-oss", input="#lorem 200", reasoning={"summary": "auto"}, stream=True
            ) as stream,
        ):
            for event in stream:
                if event.type == "response.reasoning_summary_text.delta":
                    response_id = event.item_id
                    break
        executor: ChunkedEcho = running.executor  # type: ignore[assignment]
        deadline = time.monotonic() + 10
        while len(executor.aborted) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert response_id
        assert sorted(a.endswith(".summary0") for a in executor.aborted) == [False, True], executor.aborted


def test_redacted_reasoning_still_streams_its_summary(encoding, serve) -> None:  # type: ignore[no-untyped-def]
    """With --redact_reasoning no reasoning text is streamed, but the summary is (as OpenAI shows it)."""
    for running in _server(encoding, serve, redact_reasoning=True):
        events = _stream(running, input="Hi.", reasoning={"summary": "auto"})
        final = check_stream(events)
        assert _item_events(events, 0) == [
            t for t in REASONING_WITH_SUMMARY if "content_part" not in t and "reasoning_text" not in t
        ]
        reasoning = final["output"][0]
        assert reasoning["content"] == [] and reasoning["encrypted_content"]
        assert reasoning["summary"][0]["text"] == "Summary: Echoing the user."


def test_the_summarizer_reads_a_bounded_part_of_a_long_analysis(encoding, adapter) -> None:  # type: ignore[no-untyped-def]
    """Past MAX_SUMMARIZED_CHARS the summarizer reads the analysis's head and tail, so its prompt is bounded."""
    from trtllm_responses.responses.summaries import MAX_SUMMARIZED_CHARS, Summarizer

    summarizer = Summarizer(adapter)
    long = "head " + "x" * (4 * MAX_SUMMARIZED_CHARS) + " tail"
    request = summarizer.request("r.summary0", long, "auto", 131072)
    text = encoding.decode(request.prompt_token_ids)
    assert "head " in text and " tail" in text and "[…]" in text
    assert len(text) < MAX_SUMMARIZED_CHARS + 2000
    assert request.sampling.max_tokens == SUMMARY_TOKENS["auto"]
    assert text.endswith("<|start|>assistant<|channel|>final<|message|>")


# -- stream_options.reasoning_summary_delivery (Codex: openai/codex PRs #29692, #31306) ----------------


def _summary_of(events: list[dict[str, Any]]) -> tuple[str, str | None]:
    """The reasoning item's summary text and its part's status (``completed`` when the SDK's event omits it;
    None: no summary part)."""
    final = check_stream(events)
    parts = [e for e in events if e["type"] == "response.reasoning_summary_part.done"]
    text = "".join(p["text"] for p in final["output"][0]["summary"])
    return text, parts[0].get("status", "completed") if parts else None


@pytest.mark.parametrize("delivery", ["sequential_cutoff", "concurrent_cutoff"])
def test_a_cutoff_delivery_ends_the_summary_when_the_answer_is_ready(
    server: RunningServer, delivery: str
) -> None:
    """A ``*_cutoff`` delivery: the summary stops (its part ``incomplete``, its text what it had) as soon as the
    answer's first item is ready, so the answer never waits for it; the default waits for the whole summary."""
    whole = "Summary: Writing 5 tokens."
    full = _stream(server, input="#lorem 5", reasoning={"summary": "auto"})
    assert _summary_of(full) == (whole, "completed")
    events = _stream(
        server,
        input="#lorem 5",
        reasoning={"summary": "auto"},
        extra_body={"stream_options": {"reasoning_summary_delivery": delivery}},
    )
    text, status = _summary_of(events)
    assert whole.startswith(text) and text != whole  # cut: a strict prefix (possibly empty)
    assert status in ("incomplete", None)  # None: cut before its first token (no part at all)
    # The reasoning item closed before the answer opened (items never interleave); the answer is whole.
    opened = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
    closed = [e["output_index"] for e in events if e["type"] == "response.output_item.done"]
    assert opened == closed == [0, 1]
    order = [e["type"] for e in events if e["type"].startswith("response.output_item")]
    assert order == ["response.output_item.added", "response.output_item.done"] * 2
    assert check_stream(events)["output"][1]["content"][0]["text"] == " lorem ipsum dolor sit amet"


@pytest.mark.parametrize("delivery", ["sequential", "concurrent", "a-mode-from-the-future"])
def test_other_deliveries_wait_for_the_whole_summary(server: RunningServer, delivery: str) -> None:
    """``sequential``/``concurrent`` and a value this server does not know are the default delivery (ignored,
    never a 400 that would break a newer client)."""
    events = _stream(
        server,
        input="#lorem 5",
        reasoning={"summary": "auto"},
        extra_body={"stream_options": {"reasoning_summary_delivery": delivery}},
    )
    assert _summary_of(events) == ("Summary: Writing 5 tokens.", "completed")


def test_a_delivery_that_is_not_a_string_is_a_400(server: RunningServer) -> None:
    with _client(server) as client, pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="gpt-oss",
            input="hi",
            stream=True,
            extra_body={"stream_options": {"reasoning_summary_delivery": 1}},
        )
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == "stream_options.reasoning_summary_delivery" and error["code"] == "invalid_type"


def test_summaries_per_response_are_capped(server: RunningServer) -> None:
    # Before: every reasoning item was summarized (1,000 in one response, 139k summarizer prompt tokens
    # outside its usage). Past MAX_SUMMARIES, reasoning items keep summary: [] and run no side generation.
    count = MAX_SUMMARIES + 4
    text = "".join(
        f"<|channel|>analysis<|message|>Thought {i}.<|end|><|start|>assistant" for i in range(count)
    )
    events = _stream(
        server,
        input="#harmony\n" + text + "<|channel|>final<|message|>Done.<|return|>",
        reasoning={"summary": "auto"},
    )
    final = check_stream(events)
    reasoning = [item for item in final["output"] if item["type"] == "reasoning"]
    assert len(reasoning) == count
    assert all(len(item["summary"]) == 1 for item in reasoning[:MAX_SUMMARIES])
    assert all(item["summary"] == [] for item in reasoning[MAX_SUMMARIES:])
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    summaries = [r for r in executor.requests if ".summary" in r.request_id]
    assert len(summaries) == MAX_SUMMARIES
