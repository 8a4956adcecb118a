"""The beta multi-agent surface (docs/agent-clients.md#multi-agent-responses-beta) through ``client.beta.responses``.

Every response and event is validated against the SDK's beta models (``model_validate``, never
``construct``), over HTTP (streaming and not) and WebSocket, against a real server on loopback. The
echo executor's ``#steps`` scripts make the root's multi-agent calls; a sub-agent answers its task by
the same rules (its task is its user message).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.beta import BetaResponse, BetaResponsesServerEvent, BetaResponseStreamEvent
from pydantic import TypeAdapter
from support.server_harness import RecordingEcho, RunningServer, ServerFactory, steps

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.responses import SubagentLimits

BETA = {"openai-beta": "responses_multi_agent=v1"}
ON = {"enabled": True}
EVENT = TypeAdapter(BetaResponseStreamEvent)


def spawn(task: str, name: str | None = None) -> str:
    args: dict[str, Any] = {"task": task}
    if name is not None:
        args["name"] = name
    return "call multi_agent.spawn_agent " + json.dumps(args)


def call(action: str, **args: Any) -> str:
    return f"call multi_agent.{action} " + json.dumps(args)


@pytest.fixture(scope="module")
def fast(serve: ServerFactory, encoding: HarmonyEncoding) -> Iterator[RunningServer]:
    with serve(RecordingEcho(encoding)) as running:
        yield running


@pytest.fixture(scope="module")
def slow(serve: ServerFactory, encoding: HarmonyEncoding) -> Iterator[RunningServer]:
    """200 tokens a second: a ``#lorem 4000`` sub-agent runs for 20 s, a root step takes ~0.2 s."""
    limits = SubagentLimits(task_seconds=8.0, wait_seconds=3.0)
    with serve(RecordingEcho(encoding, tokens_per_second=200), subagents=limits) as running:
        yield running


_OPEN: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Each test's SDK clients are closed when it ends (their sockets with them)."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def beta_client(server: RunningServer) -> openai.OpenAI:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    _OPEN.append(client)
    return client


def create(server: RunningServer, script: Any, **body: Any) -> BetaResponse:
    """A non-streamed beta create, the response re-validated from its raw JSON by the SDK's model."""
    body = {"multi_agent": ON, **body}
    with beta_client(server) as client:
        raw = client.beta.responses.with_raw_response.create(
            model="gpt-oss", input=script, betas=["responses_multi_agent=v1"], **body
        )
    return BetaResponse.model_validate(json.loads(raw.text))


def outputs(response: BetaResponse) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", exclude_none=True) for item in response.output]


def call_output(items: list[dict[str, Any]], action: str, nth: int = 0) -> dict[str, Any]:
    """The JSON the model read for the ``nth`` call to ``action``."""
    found = [i for i in items if i["type"] == "multi_agent_call_output" and i["action"] == action]
    return json.loads(found[nth]["output"][0]["text"])


def test_spawn_wait_and_answer_non_streaming(fast: RunningServer) -> None:
    response = create(
        fast, steps(spawn("Hello from the child", "kid"), call("wait_agent"), "All done."), store=True
    )
    items = outputs(response)
    kinds = [(i["type"], i.get("agent", {}).get("agent_name")) for i in items if i["type"] != "reasoning"]
    assert kinds == [
        ("multi_agent_call", None),
        ("multi_agent_call_output", None),
        ("agent_message", None),  # the task, root → kid
        ("multi_agent_call", None),
        ("multi_agent_call_output", None),
        ("message", "kid"),  # the sub-agent's own answer, stamped with its name
        ("agent_message", "kid"),  # its result, kid → root
        ("message", None),
    ]
    calls = [i for i in items if i["type"] == "multi_agent_call"]
    results = [i for i in items if i["type"] == "multi_agent_call_output"]
    assert [c["action"] for c in calls] == ["spawn_agent", "wait_agent"]
    assert [r["call_id"] for r in results] == [c["call_id"] for c in calls]
    assert call_output(items, "spawn_agent") == {"agent": "kid", "status": "running"}
    assert call_output(items, "wait_agent") == {
        "agents": [{"agent": "kid", "status": "completed", "output": "Hello from the child"}],
        "timed_out": False,
    }
    task, result = [i for i in items if i["type"] == "agent_message"]
    assert (task["author"], task["recipient"], task["content"][0]["text"]) == (
        "root",
        "kid",
        "Hello from the child",
    )
    assert (result["author"], result["recipient"], result["content"][0]["text"]) == (
        "kid",
        "root",
        "Hello from the child",
    )
    assert items[-1]["content"][0]["text"] == "All done."
    # Stored as streamed: the beta retrieve validates the same items.
    with beta_client(fast) as client:
        stored = client.beta.responses.retrieve(response.id, betas=["responses_multi_agent=v1"])
    assert outputs(BetaResponse.model_validate(stored.model_dump(mode="json"))) == items
    # The sub-agent's tokens are the response's (its turn's usage is added).
    recording = fast.executor
    assert isinstance(recording, RecordingEcho)
    assert response.usage is not None and response.usage.output_tokens > sum(
        len(recording.outputs[r]) for r in recording.outputs if r.startswith(response.id)
    )


def test_streamed_events_carry_the_agent(fast: RunningServer) -> None:
    body = {
        "model": "gpt-oss",
        "input": steps(spawn("Streamed child", "kid"), call("wait_agent"), "Done."),
        "multi_agent": ON,
        "stream": True,
    }
    events = []
    with httpx.Client(base_url=fast.base_url) as http:
        with http.stream("POST", "/v1/responses", json=body, headers=BETA) as answer:
            assert answer.status_code == 200
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    events.append(EVENT.validate_python(json.loads(line[6:])))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1]
    assert final.type == "response.completed"
    done = [e for e in events if e.type == "response.output_item.done"]
    assert [e.output_index for e in done] == list(range(len(final.response.output)))
    assert [e.item.id for e in done] == [i.id for i in final.response.output]
    kid_events = [e for e in done if e.agent is not None]
    assert {e.agent.agent_name for e in kid_events} == {"kid"}
    assert all(getattr(e.item, "agent", None) is not None for e in kid_events)
    assert {e.item.type for e in kid_events} == {"reasoning", "message", "agent_message"}
    added = {e.output_index: e for e in events if e.type == "response.output_item.added"}
    names = [(added[e.output_index].agent, e.agent) for e in done]
    assert all((a and a.agent_name) == (d and d.agent_name) for a, d in names)


def test_without_the_beta_header_nothing_changes(fast: RunningServer) -> None:
    client = beta_client(fast)
    script = steps(spawn("ignored"), "Answer.")
    plain = client.responses.create(model="gpt-oss", input=script, extra_body={"multi_agent": ON})
    assert not [i for i in plain.output if i.type in ("multi_agent_call", "multi_agent_call_output")]
    # The model's call to the namespace no one runs here is answered as any such call (a failed mcp_call).
    assert [i.type for i in plain.output if i.type == "mcp_call"] == ["mcp_call"]
    disabled = create(fast, script, multi_agent={"enabled": False})
    assert not [i for i in disabled.output if i.type == "multi_agent_call"]


@pytest.mark.parametrize(
    ("multi_agent", "param"),
    [
        ({"enabled": "yes"}, "multi_agent.enabled"),
        ({"enabled": True, "max_concurrent_subagents": 0}, "multi_agent.max_concurrent_subagents"),
        ("on", "multi_agent"),
    ],
)
def test_bad_config_is_a_400_naming_it(fast: RunningServer, multi_agent: Any, param: str) -> None:
    with httpx.Client(base_url=fast.base_url) as http:
        answer = http.post(
            "/v1/responses",
            json={"model": "gpt-oss", "input": "Hi", "multi_agent": multi_agent},
            headers=BETA,
        )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)


def test_send_message_followup_list_and_errors(fast: RunningServer) -> None:
    script = steps(
        spawn("First task", "kid"),
        call("wait_agent", agents=["kid"]),
        call("followup_task", agent="kid", task="Second task"),
        call("wait_agent"),
        call("send_message", agent="kid", message="A note"),
        call("wait_agent"),
        call("list_agents"),
        call("interrupt_agent", agent="nobody"),
        "Done.",
    )
    items = outputs(create(fast, script))
    assert call_output(items, "wait_agent", 1)["agents"][0]["output"] == "Second task"
    assert call_output(items, "send_message") == {"agent": "kid", "status": "running", "delivered": "now"}
    assert call_output(items, "wait_agent", 2)["agents"][0]["output"] == "A note"
    assert call_output(items, "list_agents") == {
        "agents": [{"agent": "kid", "status": "completed", "output": "A note", "task": "Second task"}]
    }
    refused = [
        i for i in items if i["type"] == "multi_agent_call_output" and i["action"] == "interrupt_agent"
    ]
    assert refused[0]["output"][0]["text"].startswith("Error: You have no sub-agent named 'nobody'")


def test_spawned_per_response_is_bounded(fast: RunningServer) -> None:
    limit = SubagentLimits().per_response
    script = steps(*[spawn(f"task {i}") for i in range(limit + 1)], "Done.")
    items = outputs(create(fast, script, multi_agent={"enabled": True, "max_concurrent_subagents": 100}))
    results = [i["output"][0]["text"] for i in items if i["type"] == "multi_agent_call_output"]
    assert all(r.startswith('{"agent":') for r in results[:limit])
    assert results[limit] == f"Error: This response has spawned its maximum of {limit} sub-agents."


def test_calls_per_response_are_bounded(fast: RunningServer) -> None:
    """Issue 44, point 4: a request of 1,000 ``send_message`` calls kept a server busy 69 s. Past the cap a
    call runs nothing (no sub-agent turn, no ``agent_message``) and its output says why; the model's next
    step goes on (here: its answer)."""
    limit = SubagentLimits().calls_per_response
    script = steps(spawn("Hello", "kid"), *[call("list_agents")] * limit, "Done.")
    items = outputs(create(fast, script))
    results = [i["output"][0]["text"] for i in items if i["type"] == "multi_agent_call_output"]
    assert len(results) == limit + 1
    assert all(not r.startswith("Error:") for r in results[:limit])
    assert results[limit] == (
        f"Error: This response has made its maximum of {limit} multi-agent calls: no more run."
        " Answer with what you have."
    )
    assert items[-1]["type"] == "message" and items[-1]["content"][0]["text"] == "Done."


def test_depth_is_bounded(fast: RunningServer) -> None:
    """At the default depth (1) a sub-agent is not shown the actions: its call is one nobody runs."""
    script = steps(spawn(spawn("grandchild"), "kid"), call("wait_agent"), "Done.")
    items = outputs(create(fast, script))
    (kid,) = call_output(items, "wait_agent")["agents"]
    assert kid["status"] == "completed"
    assert kid["output"].startswith("multi_agent.spawn_agent returned: Error:")
    assert {i.get("agent", {}).get("agent_name") for i in items} == {None, "kid"}


def test_concurrency_wait_timeout_and_interrupt(slow: RunningServer) -> None:
    script = steps(
        spawn("#lorem 4000", "long"),
        spawn("Second", "other"),
        call("wait_agent", agents=["long"], timeout_seconds=1000),
        call("interrupt_agent", agent="long"),
        "Done.",
    )
    started = time.monotonic()
    items = outputs(create(slow, script, multi_agent={"enabled": True, "max_concurrent_subagents": 1}))
    assert (
        time.monotonic() - started < 60
    )  # the wait was cut to 3 s, not 1000 (generous for a loaded machine)
    assert call_output(items, "spawn_agent", 0)["status"] == "running"
    refused = [i for i in items if i["type"] == "multi_agent_call_output" and i["action"] == "spawn_agent"][1]
    assert "max_concurrent_subagents" in refused["output"][0]["text"]
    waited = call_output(items, "wait_agent")
    assert waited["timed_out"] is True  # cut to SubagentLimits.wait_seconds (3 s), not 1000
    assert waited["agents"][0]["status"] == "running"
    assert call_output(items, "interrupt_agent")["status"] == "interrupted"
    report = [i for i in items if i["type"] == "agent_message" and i["author"] == "long"]
    assert report[0]["content"][0]["text"].startswith("[interrupted]")
    assert_child_aborted(slow)


def test_task_time_is_bounded(slow: RunningServer) -> None:
    script = steps(
        spawn("#lorem 4000", "long"), call("wait_agent"), call("wait_agent"), call("wait_agent"), "Done."
    )
    items = outputs(create(slow, script))
    last = call_output(items, "wait_agent", 2)["agents"][0]
    assert last == {"agent": "long", "status": "failed", "output": "Stopped: its task ran past 8 s."}


def test_running_sub_agents_end_with_the_response(slow: RunningServer) -> None:
    items = outputs(create(slow, steps(spawn("#lorem 4000", "long"), "Done without waiting.")))
    report = [i for i in items if i["type"] == "agent_message" and i["author"] == "long"]
    assert report[-1]["content"][0]["text"] == "[interrupted] The response ended before it finished."
    assert items[-2]["type"] == "message" and items[-1] == report[-1]  # before the terminal event
    wait_for_idle(slow)


def wait_for_idle(server: RunningServer) -> None:
    """Every sub-agent of the process has ended (and its engine request was aborted)."""
    service = server.app.state.service
    deadline = time.monotonic() + 5
    while service.subagents.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.subagents.running == 0


def test_a_client_that_leaves_ends_its_sub_agents(slow: RunningServer) -> None:
    recording = slow.executor
    assert isinstance(recording, RecordingEcho)
    body = {
        "model": "gpt-oss",
        "input": steps(spawn("#lorem 4000", "long"), call("wait_agent"), "Done."),
        "multi_agent": ON,
        "stream": True,
    }
    with httpx.Client(base_url=slow.base_url) as http:
        with http.stream("POST", "/v1/responses", json=body, headers=BETA) as answer:
            for line in answer.iter_lines():
                if '"multi_agent_call_output"' in line:
                    break  # spawned; the root waits: the client goes away
    wait_for_idle(slow)
    assert_child_aborted(slow)


def assert_child_aborted(server: RunningServer) -> None:
    """The engine request of the last ``#lorem 4000`` sub-agent was aborted (its generation stopped)."""
    recording = server.executor
    assert isinstance(recording, RecordingEcho)
    encoding = server.app.state.service.adapter.encoding
    children = [
        r.request_id
        for r in recording.requests
        if "#lorem 4000" in encoding.decode(list(r.prompt_token_ids)[-12:])
    ]
    assert children
    deadline = time.monotonic() + 5
    while children[-1] not in recording.aborted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children[-1] in recording.aborted


SERVER_EVENT = TypeAdapter(BetaResponsesServerEvent)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_websocket_inject_resumes_a_waiting_sub_agent(fast: RunningServer) -> None:
    """A sub-agent's client tool call reaches the client with its agent; response.inject answers it."""
    script = steps(
        spawn('call get_weather {"city": "Paris"}', "kid"),
        call("wait_agent"),  # returns: kid waits for the client's output
        call("wait_agent"),  # returns once kid, resumed by response.inject, is done
        "Done.",
    )
    client = beta_client(fast)
    with client.beta.responses.connect(extra_headers=BETA) as conn:
        conn.response.create(model="gpt-oss", input=script, multi_agent=ON, tools=[WEATHER], store=False)
        events = []
        injected = []
        while True:
            event = SERVER_EVENT.validate_json(conn.recv_bytes())
            events.append(event)
            if event.type == "response.output_item.done" and event.item.type == "function_call":
                assert event.agent is not None and event.agent.agent_name == "kid"
                response_id = events[0].response.id
                conn.response.inject(
                    response_id=response_id,
                    input=[
                        {"type": "function_call_output", "call_id": event.item.call_id, "output": "sunny"}
                    ],
                )
                injected.append(event.item.call_id)
            if event.type in ("response.completed", "response.failed", "response.incomplete"):
                break
        assert injected
        assert any(e.type == "response.inject.created" and e.response_id == response_id for e in events)
        final = events[-1]
        assert final.type == "response.completed"
        items = [i.model_dump(mode="json", exclude_none=True) for i in final.response.output]
        assert call_output(items, "wait_agent", 0)["agents"] == [
            {"agent": "kid", "status": "waiting", "output": "", "waiting_for": ["get_weather"]}
        ]
        assert call_output(items, "wait_agent", 1)["agents"] == [
            {"agent": "kid", "status": "completed", "output": "get_weather returned: sunny"}
        ]
        # The response has ended: what is injected now comes back, with OpenAI's code.
        late = [{"type": "function_call_output", "call_id": injected[0], "output": "again"}]
        conn.response.inject(response_id=response_id, input=late)
        failed = SERVER_EVENT.validate_json(conn.recv_bytes())
        assert failed.type == "response.inject.failed"
        assert (failed.error.code, failed.response_id) == ("response_already_completed", response_id)
        assert [i.model_dump(mode="json", exclude_none=True) for i in failed.input] == late
        conn.response.inject(response_id="resp_unknown", input=late)
        unknown = SERVER_EVENT.validate_json(conn.recv_bytes())
        assert unknown.type == "response.inject.failed" and unknown.error.code == "response_not_found"


def test_websocket_inject_refuses_what_no_agent_waits_for(fast: RunningServer) -> None:
    script = steps(spawn("#lorem 200", "kid"), call("wait_agent"), "Done.")
    client = beta_client(fast)
    with client.beta.responses.connect(extra_headers=BETA) as conn:
        conn.response.create(model="gpt-oss", input=script, multi_agent=ON, store=False)
        created = SERVER_EVENT.validate_json(conn.recv_bytes())
        assert created.type == "response.created"
        wrong = [{"type": "function_call_output", "call_id": "call_nobody", "output": "x"}]
        conn.response.inject(response_id=created.response.id, input=wrong)
        errors = []
        while True:
            raw = json.loads(conn.recv_bytes())
            if raw["type"] == "error":
                errors.append(raw)
                continue
            event = SERVER_EVENT.validate_python(raw)
            if event.type in ("response.completed", "response.failed"):
                break
        assert [(e["status"], e["error"]["param"]) for e in errors] == [(400, "input[0].call_id")]
        assert event.type == "response.completed"


def test_websocket_without_the_beta_header_ignores_multi_agent(fast: RunningServer) -> None:
    client = beta_client(fast)
    with client.beta.responses.connect() as conn:
        conn.response.create(model="gpt-oss", input=steps(spawn("x"), "Done."), multi_agent=ON, store=False)
        while True:
            event = SERVER_EVENT.validate_json(conn.recv_bytes())
            if event.type == "response.completed":
                break
        assert not [i for i in event.response.output if i.type == "multi_agent_call"]


def test_a_message_sent_while_it_runs_is_its_next_turn(slow: RunningServer) -> None:
    script = steps(
        spawn("#lorem 200", "kid"),  # a second at 200 tokens/s: the message arrives while it runs
        call("send_message", agent="kid", message="Then this"),
        call("wait_agent", timeout_seconds=3),
        call("wait_agent", timeout_seconds=3),
        "Done.",
    )
    items = outputs(create(slow, script))
    assert call_output(items, "send_message") == {"agent": "kid", "status": "running", "delivered": "queued"}
    finished = [call_output(items, "wait_agent", n)["agents"][0] for n in (0, 1)]
    assert {"agent": "kid", "status": "completed", "output": "Then this"} in finished
    wait_for_idle(slow)


def test_sub_agents_running_in_the_process_are_bounded(
    serve: ServerFactory, encoding: HarmonyEncoding
) -> None:
    limits = SubagentLimits(server_running=1, wait_seconds=1.0)
    with serve(RecordingEcho(encoding, tokens_per_second=200), subagents=limits) as running:
        script = steps(
            spawn("#lorem 4000", "a"), spawn("Second", "b"), call("interrupt_agent", agent="a"), "Done."
        )
        items = outputs(
            create(running, script, multi_agent={"enabled": True, "max_concurrent_subagents": 10})
        )
        second = [
            i for i in items if i["type"] == "multi_agent_call_output" and i["action"] == "spawn_agent"
        ][1]
        assert (
            second["output"][0]["text"]
            == "Error: The server runs its maximum of 1 sub-agents; try again later."
        )
        wait_for_idle(running)


def test_output_items_replay_and_continue(fast: RunningServer) -> None:
    """The beta items round-trip as input (a stateless replay), and a stored response continues: the model
    reads its own multi-agent calls and their outputs, never a sub-agent's items."""
    first = create(fast, steps(spawn("Child says hi", "kid"), call("wait_agent"), "Done."), store=True)
    replayed = [item.model_dump(mode="json", exclude_none=True) for item in first.output]
    shown = create(fast, [*replayed, {"role": "user", "content": "#prompt"}])
    continued = create(fast, "#prompt", previous_response_id=first.id)
    for response, said in ((shown, 2), (continued, 3)):
        prompt = outputs(response)[-1]["content"][0]["text"]
        assert "to=multi_agent.spawn_agent" in prompt
        assert "<|start|>multi_agent.wait_agent to=assistant" in prompt
        assert "Child says hi" in prompt  # in the wait's output (the model's view of the sub-agent)
        # The spawn's arguments, the wait's output (and the stored turn's script): neither kid's answer nor
        # the agent_messages.
        assert prompt.count("Child says hi") == said
    bad = [*replayed[:1], {**replayed[1], "agent": {"agent_name": 5}}]
    with httpx.Client(base_url=fast.base_url) as http:
        answer = http.post(
            "/v1/responses", json={"model": "gpt-oss", "input": bad, "multi_agent": ON}, headers=BETA
        )
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "input[1].agent.agent_name"


def test_over_http_a_sub_agent_on_a_client_tool_waits_until_interrupted(fast: RunningServer) -> None:
    script = steps(
        spawn('call get_weather {"city": "Paris"}', "kid"),
        call("wait_agent"),
        call("interrupt_agent", agent="kid"),
        "Done.",
    )
    items = outputs(create(fast, script, tools=[WEATHER]))
    (waiting,) = call_output(items, "wait_agent")["agents"]
    assert (waiting["status"], waiting["waiting_for"]) == ("waiting", ["get_weather"])
    (kid_call,) = [i for i in items if i["type"] == "function_call"]
    assert (kid_call["name"], kid_call["agent"]) == ("get_weather", {"agent_name": "kid"})
    assert call_output(items, "interrupt_agent") == {
        "agent": "kid",
        "status": "interrupted",
        "output": "Interrupted while it waited for the client.",
    }
    reports = [
        i["content"][0]["text"] for i in items if i["type"] == "agent_message" and i["author"] == "kid"
    ]
    assert reports[-1] == "[interrupted] Interrupted while it waited for the client."


def test_the_sdk_streams_it(fast: RunningServer) -> None:
    """``client.beta.responses.create(stream=True)``: every event it yields re-validates as the SDK's model."""
    client = beta_client(fast)
    stream = client.beta.responses.create(
        model="gpt-oss",
        input=steps(spawn("Via the SDK", "kid"), call("wait_agent"), "Done."),
        betas=["responses_multi_agent=v1"],
        multi_agent=ON,
        stream=True,
    )
    events = [EVENT.validate_python(event.model_dump(mode="json", exclude_unset=True)) for event in stream]
    assert events[-1].type == "response.completed"
    stamped = [e for e in events if e.type == "response.output_item.done" and e.agent is not None]
    assert [(e.item.type, e.agent.agent_name) for e in stamped] == [
        ("reasoning", "kid"),
        ("message", "kid"),
        ("agent_message", "kid"),
    ]
