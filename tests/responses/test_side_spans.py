"""Spans of a response's side runs (docs/tracing-and-dashboards.md#tool-spans): compaction's summarization,
a reasoning summary's side generation, a multi-agent sub-agent's turn; exported to a real OTLP receiver by
a server on loopback driven over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from support.server_harness import RecordingEcho, RunningServer, ServerFactory, steps
from support.traced import all_text, named, one, traced

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.ops import tracing

#: Text no span may carry by default.
MARKER = "okapi-marker-9163"


@pytest.fixture
def running(serve: ServerFactory, encoding: HarmonyEncoding) -> Iterator[RunningServer]:
    with serve(RecordingEcho(encoding)) as server:
        yield server


def test_compaction_and_a_reasoning_summary(running: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    with traced(monkeypatch) as receiver, httpx.Client(base_url=running.base_url, timeout=60) as http:
        compacted = http.post("/v1/responses/compact", json={"model": "m", "input": f"Fix {MARKER}."})
        summarized = http.post(
            "/v1/responses", json={"model": "m", "input": f"{MARKER}.", "reasoning": {"summary": "concise"}}
        )
        tracing.shutdown()
        spans = receiver.wait_for(
            lambda got: bool(named(got, "compaction") and named(got, "reasoning_summary"))
        )
    usage = compacted.json()["usage"]
    compaction = one(spans, "compaction")
    assert compaction.status == 0 and compaction.attributes["gen_ai.request.model"]
    assert compaction.attributes["trtllm.side_generation.input_tokens"] == usage["input_tokens"]
    assert compaction.attributes["trtllm.side_generation.output_tokens"] == usage["output_tokens"]
    reasoning = next(i for i in summarized.json()["output"] if i["type"] == "reasoning")
    assert reasoning["summary"], "the summary ran"
    summary = one(spans, "reasoning_summary")
    assert summary.attributes["trtllm.summary.mode"] == "concise"
    assert summary.attributes["trtllm.summary.cut"] is False
    assert summary.attributes["trtllm.side_generation.input_tokens"] > 0
    assert summary.attributes["trtllm.side_generation.output_tokens"] > 0
    assert MARKER not in all_text(spans)


def test_a_sub_agent_turn_is_an_invoke_agent_span(
    running: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawn = "call multi_agent.spawn_agent " + json.dumps({"task": "Hello from the child", "name": "kid"})
    body = {
        "model": "m",
        "input": steps(spawn, "call multi_agent.wait_agent {}", "All done."),
        "multi_agent": {"enabled": True},
        "store": True,
    }
    with traced(monkeypatch) as receiver, httpx.Client(base_url=running.base_url, timeout=60) as http:
        answer = http.post("/v1/responses", json=body, headers={"openai-beta": "responses_multi_agent=v1"})
        tracing.shutdown()
        spans = receiver.wait_for(lambda got: bool(named(got, "invoke_agent kid")))
    assert answer.status_code == 200, answer.text
    agent = one(spans, "invoke_agent kid")
    spawned = one(spans, "execute_tool multi_agent.spawn_agent")
    assert agent.parent_span_id == spawned.span_id and agent.trace_id == spawned.trace_id
    attributes = dict(agent.attributes)
    assert attributes["gen_ai.operation.name"] == "invoke_agent" and attributes["gen_ai.agent.name"] == "kid"
    assert attributes["trtllm.agent.depth"] == 1 and agent.status == 0
    assert attributes["session.previous_id"] == answer.headers["x-session-id"]  # the root's session
    assert attributes["gen_ai.agent.id"] == attributes["session.id"] != attributes["session.previous_id"]
    waited = one(spans, "execute_tool multi_agent.wait_agent")
    assert waited.attributes["gen_ai.tool.name"] == "multi_agent.wait_agent"
    assert waited.attributes["trtllm.tool.output_bytes"] > 0
