"""WebSocket mode on /v1/responses: the openai SDK's responses.connect() (sync and async), raw frames, steering."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest
from support.server_harness import TERMINAL, RunningServer, plain_event, until_terminal
from support.stream_grammar import check_stream
from websockets.sync.client import connect as ws_connect

from trtllm_responses.executors.echo import EchoExecutor

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}


@pytest.fixture(scope="module")
def paced(encoding, serve) -> RunningServer:  # type: ignore[no-untyped-def]
    """An echo server writing 40 tokens a second, so a response is still running when a steer arrives."""
    running = serve(EchoExecutor(encoding, tokens_per_second=40))
    yield running
    running.stop()


def ws_url(server: RunningServer) -> str:
    return server.base_url.replace("http://", "ws://") + "/v1/responses"


# -- the SDK, sync ------------------------------------------------------------------------------


def test_sync_connect_creates_and_continues_with_store_false(client: openai.OpenAI, echo_server) -> None:  # type: ignore[no-untyped-def]
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="Remember the word kiwi.", store=False)
        first = check_stream(until_terminal(conn))
        assert first["status"] == "completed"
        assert first["output"][-1]["content"][0]["text"] == "Remember the word kiwi."
        # Not stored: only this connection knows it.
        assert httpx.get(f"{echo_server.base_url}/v1/responses/{first['id']}").status_code == 404
        conn.response.create(model="m", input="#prompt", previous_response_id=first["id"], store=False)
        second = check_stream(until_terminal(conn))
        shown = second["output"][-1]["content"][0]["text"]
        assert "Remember the word kiwi." in shown and second["previous_response_id"] == first["id"]
        # The same events as SSE: same types in the same order.
        http_events = [
            e.type for e in client.responses.create(model="m", input="Remember the word kiwi.", stream=True)
        ]
        conn.response.create(model="m", input="Remember the word kiwi.", store=False)
        assert [e["type"] for e in until_terminal(conn)] == http_events


def test_unknown_previous_response_is_an_error_and_the_socket_stays_usable(client: openai.OpenAI) -> None:
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="hi", previous_response_id="resp_nowhere", store=False)
        error = plain_event(conn.recv())
        assert error["type"] == "error" and error["status"] == 400
        assert error["error"]["code"] == "previous_response_not_found"
        assert error["error"]["param"] == "previous_response_id"
        conn.response.create(model="m", input="still here", store=False)
        assert check_stream(until_terminal(conn))["status"] == "completed"


def test_a_failed_continuation_evicts_the_response_it_continued(client: openai.OpenAI) -> None:
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="first", store=False)
        first = check_stream(until_terminal(conn))
        bad = [{"type": "function_call_output", "call_id": "call_none", "output": "x"}]
        conn.response.create(model="m", input=bad, previous_response_id=first["id"], store=False)  # type: ignore[arg-type]
        error = plain_event(conn.recv())
        assert error["type"] == "error" and error["error"]["param"] == "input[0].call_id"
        conn.response.create(model="m", input="again", previous_response_id=first["id"], store=False)
        evicted = plain_event(conn.recv())
        assert evicted["type"] == "error" and evicted["error"]["code"] == "previous_response_not_found"


def test_stored_responses_hydrate_from_the_store(client: openai.OpenAI) -> None:
    made = client.responses.create(model="m", input="Stored over HTTP.")
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="#prompt", previous_response_id=made.id)
        shown = check_stream(until_terminal(conn))["output"][-1]["content"][0]["text"]
        assert "Stored over HTTP." in shown


# -- the SDK, async -----------------------------------------------------------------------------


async def test_async_connect_create_continue_and_errors(echo_server) -> None:  # type: ignore[no-untyped-def]
    async with openai.AsyncOpenAI(
        base_url=echo_server.base_url + "/v1", api_key="unused", max_retries=0
    ) as c:
        async with c.responses.connect() as conn:
            await conn.response.create(
                model="m", input='call get_weather {"city":"Rome"}', tools=[WEATHER], store=False
            )  # type: ignore[list-item]
            events = []
            async for event in conn:
                events.append(plain_event(event))
                if event.type in TERMINAL:
                    break
            first = check_stream(events)
            call = next(i for i in first["output"] if i["type"] == "function_call")
            await conn.response.create(
                model="m",
                store=False,
                previous_response_id=first["id"],
                tools=[WEATHER],  # type: ignore[list-item]
                input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "warm"}],
            )
            events = []
            async for event in conn:
                events.append(plain_event(event))
                if event.type in TERMINAL:
                    break
            assert check_stream(events)["output"][-1]["content"][0]["text"] == "get_weather returned: warm"
            await conn.response.create(model="m", input="x", previous_response_id="resp_gone")
            error = plain_event(await conn.recv())
            assert error["error"]["code"] == "previous_response_not_found"


# -- raw frames ---------------------------------------------------------------------------------


def _recv(ws: Any) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=30))


def test_raw_errors_lanes_and_refused_fields(echo_server) -> None:  # type: ignore[no-untyped-def]
    with ws_connect(ws_url(echo_server)) as ws:
        ws.send("{not json")
        assert _recv(ws)["status"] == 400
        ws.send(json.dumps({"type": "response.nope"}))
        assert _recv(ws)["error"]["code"] == "unknown_event_type"
        ws.send(json.dumps({"type": "response.create", "input": "x", "background": True}))
        assert _recv(ws)["error"]["param"] == "background"
        ws.send(json.dumps({"type": "response.create", "input": "x", "stream": False}))
        assert _recv(ws)["error"]["param"] == "stream"
        # stream: true is redundant and accepted; a stream_id lane is echoed on every event.
        ws.send(json.dumps({"type": "response.create", "input": "lane a", "stream": True, "stream_id": "a"}))
        events = []
        while not events or events[-1]["type"] not in TERMINAL:
            events.append(_recv(ws))
        assert {e["stream_id"] for e in events} == {"a"}
        assert check_stream([plain_event(e) for e in events])["output"][-1]["content"][0]["text"] == "lane a"


def test_connection_time_limit(serve) -> None:  # type: ignore[no-untyped-def]
    running = serve(websocket_max_seconds=0.5)
    try:
        with ws_connect(ws_url(running)) as ws:
            error = _recv(ws)
            assert error["type"] == "error"
            assert error["error"]["code"] == "websocket_connection_limit_reached"
    finally:
        running.stop()


def test_disconnect_aborts_the_generation(paced: RunningServer) -> None:
    executor = paced.executor
    with ws_connect(ws_url(paced)) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "#lorem 2000", "store": False}))
        while _recv(ws)["type"] != "response.reasoning_text.delta":
            pass
        assert executor._running  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while executor._running and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.02)
    assert not executor._running  # type: ignore[attr-defined]


# -- steering -----------------------------------------------------------------------------------


def test_steering_a_running_response(paced: RunningServer) -> None:
    with openai.OpenAI(base_url=paced.base_url + "/v1", api_key="unused", max_retries=0) as client:
        with client.responses.connect() as conn:
            conn.response.create(model="m", input="#lorem 400", store=False)
            created = plain_event(conn.recv())
            assert created["type"] == "response.created"
            target = created["response"]["id"]
            conn.response.steer(previous_response_id=target, input="Turn left instead.")
            first: list[dict[str, Any]] = [created]
            accepted = None
            for event in conn:
                data = plain_event(event)
                if data["type"] == "response.steer.accepted":
                    accepted = data
                    continue
                first.append(data)
                if data["type"] in TERMINAL:
                    break
            assert accepted is not None and accepted["steer"]["previous_response_id"] == target
            steered = check_stream(first)
            assert steered["status"] == "incomplete"
            assert steered["incomplete_details"]["reason"] == "steered"
            # Stopped at a message boundary: every item whole, no filler text started.
            assert all(item["status"] == "completed" for item in steered["output"])
            successor = check_stream(until_terminal(conn))
            assert successor["previous_response_id"] == target
            assert successor["output"][-1]["content"][0]["text"] == "Turn left instead."


def test_steering_failures(paced: RunningServer) -> None:
    with openai.OpenAI(base_url=paced.base_url + "/v1", api_key="unused", max_retries=0) as client:
        with client.responses.connect() as conn:
            conn.response.steer(previous_response_id="resp_none", input="hi")
            failed = plain_event(conn.recv())
            assert failed["type"] == "response.steer.failed"
            assert failed["error"]["code"] == "response_not_found" and failed["steer"]["input"] == "hi"
            conn.response.create(model="m", input="short", store=False)
            done = check_stream(until_terminal(conn))
            conn.response.steer(previous_response_id=done["id"], input="late")
            assert plain_event(conn.recv())["error"]["code"] == "response_already_completed"
            conn.response.create(model="m", input="#lorem 200", store=False)
            created = plain_event(conn.recv())
            bad = [{"type": "message", "role": "assistant", "content": "no"}]
            conn.response.steer(previous_response_id=created["response"]["id"], input=bad)  # type: ignore[arg-type]
            events = []
            for event in conn:
                events.append(plain_event(event))
                if events[-1]["type"] in TERMINAL:
                    break
            failed = next(e for e in events if e["type"] == "response.steer.failed")
            assert failed["error"]["code"] == "invalid_input"
            assert events[-1]["type"] == "response.completed"  # not steered


def test_steering_held_while_a_client_tool_call_waits(paced: RunningServer) -> None:
    # One message only (a call with long arguments), so the steer arrives inside it: no boundary before the end.
    arguments = json.dumps({"city": "Lisbon", "note": " ".join(["slow"] * 40)})
    completion = f"#harmony\n<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{arguments}<|call|>"
    with openai.OpenAI(base_url=paced.base_url + "/v1", api_key="unused", max_retries=0) as client:
        with client.responses.connect() as conn:
            conn.response.create(model="m", input=completion, tools=[WEATHER], store=True)  # type: ignore[list-item]
            created = plain_event(conn.recv())
            target = created["response"]["id"]
            conn.response.steer(previous_response_id=target, input="Use Celsius.")
            events = [created]
            while events[-1]["type"] != "response.completed":
                events.append(plain_event(conn.recv()))
            completed = check_stream([e for e in events if not e["type"].startswith("response.steer")])
            assert any(e["type"] == "response.steer.accepted" for e in events)
            pending = plain_event(conn.recv())
            assert pending["type"] == "response.steer.pending"
            assert pending["reason"] == "waiting_for_required_input"
            call = next(i for i in completed["output"] if i["type"] == "function_call")
            assert pending["required_input"] == [
                {"type": "function_call_output", "call_id": call["call_id"], "name": "get_weather"}
            ]
            output = [{"type": "function_call_output", "call_id": call["call_id"], "output": "20C"}]
            conn.response.create(model="m", previous_response_id=target, input=output, tools=[WEATHER])  # type: ignore[arg-type, list-item]
            after = check_stream(until_terminal(conn))
        items = client.responses.input_items.list(after["id"], order="asc")
        kinds = [(i.type, getattr(i, "role", None)) for i in items.data]
        assert kinds == [("message", "user"), ("function_call_output", None)]  # the steer came first


# -- the Agents SDK -----------------------------------------------------------------------------


async def test_agents_sdk_websocket_transport_runs_a_tool_using_agent(echo_server) -> None:  # type: ignore[no-untyped-def]
    agents = pytest.importorskip("agents")
    from agents import Agent, function_tool
    from agents.responses_websocket_session import responses_websocket_session

    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Weather now in a city."""
        calls.append(city)
        return f"sunny in {city}"

    agent = Agent(name="weather", instructions="Use the tool.", tools=[get_weather], model="gpt-oss")
    agents.set_tracing_disabled(True)
    async with responses_websocket_session(
        api_key="unused", base_url=echo_server.base_url + "/v1"
    ) as session:
        result = await session.run(agent, "Paris")
    # The echo calls the first declared function with the user text, then answers with its output.
    assert calls == ["Paris"]
    assert result.final_output == "get_weather returned: sunny in Paris"


# -- limits -------------------------------------------------------------------------------------


def test_lane_and_queue_limits(paced: RunningServer) -> None:
    from trtllm_responses.server.websocket import MAX_LANES, MAX_QUEUED

    with ws_connect(ws_url(paced)) as ws:
        for lane in range(MAX_LANES + 1):
            ws.send(json.dumps({"type": "response.create", "input": "#lorem 2000", "stream_id": f"l{lane}"}))
        error = None
        while error is None:
            event = _recv(ws)
            if event["type"] == "error":
                error = event
        assert error["stream_id"] == f"l{MAX_LANES}" and error["error"]["param"] == "stream_id"
    with ws_connect(ws_url(paced)) as ws:
        for _ in range(MAX_QUEUED + 2):  # one runs, MAX_QUEUED wait, the last is refused
            ws.send(json.dumps({"type": "response.create", "input": "#lorem 2000", "store": False}))
        error = None
        while error is None:
            event = _recv(ws)
            if event["type"] == "error":
                error = event
        assert error["error"]["code"] == "too_many_requests"


def test_too_many_pending_steers(paced: RunningServer) -> None:
    from trtllm_responses.responses.steering import MAX_PENDING_STEERS

    with ws_connect(ws_url(paced)) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "#lorem 2000", "store": False}))
        created = _recv(ws)
        target = created["response"]["id"]
        for i in range(MAX_PENDING_STEERS + 1):
            ws.send(json.dumps({"type": "response.steer", "previous_response_id": target, "input": f"s{i}"}))
        verdicts = []
        while len(verdicts) < MAX_PENDING_STEERS + 1:
            event = _recv(ws)
            if event["type"].startswith("response.steer"):
                verdicts.append(event)
        assert [v["type"] for v in verdicts[:-1]] == ["response.steer.accepted"] * MAX_PENDING_STEERS
        assert verdicts[-1]["type"] == "response.steer.failed"
        assert verdicts[-1]["error"]["code"] == "too_many_pending_steers"
        assert verdicts[-1]["steer"]["input"] == f"s{MAX_PENDING_STEERS}"


def test_steering_during_the_last_message_lets_it_complete_then_starts_the_successor(
    paced: RunningServer,
) -> None:
    with ws_connect(ws_url(paced)) as ws:
        ws.send(json.dumps({"type": "response.create", "input": "#lorem 40", "store": False}))
        events = [_recv(ws)]
        target = events[0]["response"]["id"]
        while events[-1]["type"] != "response.output_text.delta":  # the final message is under way
            events.append(_recv(ws))
        ws.send(json.dumps({"type": "response.steer", "previous_response_id": target, "input": "Next."}))
        while events[-1]["type"] not in TERMINAL:
            events.append(_recv(ws))
        first = check_stream([e for e in events if not e["type"].startswith("response.steer")])
        assert any(e["type"] == "response.steer.accepted" for e in events)
        assert first["status"] == "completed"  # no boundary before the end: the answer is whole
        successor_events = [_recv(ws)]
        while successor_events[-1]["type"] not in TERMINAL:
            successor_events.append(_recv(ws))
        successor = check_stream(successor_events)
        assert successor["previous_response_id"] == target
        assert successor["output"][-1]["content"][0]["text"] == "Next."


def test_held_steering_comes_back_when_its_continuation_fails(paced: RunningServer) -> None:
    arguments = json.dumps({"city": "Lisbon", "note": " ".join(["slow"] * 30)})
    completion = (
        "#harmony\n<|channel|>commentary to=functions.get_weather <|constrain|>json"
        f"<|message|>{arguments}<|call|>"
    )
    with ws_connect(ws_url(paced)) as ws:
        ws.send(
            json.dumps({"type": "response.create", "input": completion, "tools": [WEATHER], "store": False})
        )
        target = _recv(ws)["response"]["id"]
        ws.send(json.dumps({"type": "response.steer", "previous_response_id": target, "input": "Celsius."}))
        kinds = []
        while not kinds or kinds[-1] != "response.steer.pending":
            kinds.append(_recv(ws)["type"])
        assert "response.steer.accepted" in kinds and "response.completed" in kinds
        bad = [{"type": "function_call_output", "call_id": "call_unknown", "output": "x"}]
        ws.send(
            json.dumps(
                {"type": "response.create", "previous_response_id": target, "input": bad, "store": False}
            )
        )
        error = _recv(ws)
        assert error["type"] == "error" and error["error"]["param"] == "input[1].call_id"  # after the steer
        failed = _recv(ws)
        assert failed["type"] == "response.steer.failed"
        assert (
            failed["error"]["code"] == "successor_creation_failed" and failed["steer"]["input"] == "Celsius."
        )


def test_responses_with_automatic_compaction_are_not_steered(paced: RunningServer) -> None:
    with ws_connect(ws_url(paced)) as ws:
        body = {
            "type": "response.create",
            "input": "#lorem 100",
            "store": False,
            "context_management": [{"type": "compaction", "compact_threshold": 100000}],
        }
        ws.send(json.dumps(body))
        target = _recv(ws)["response"]["id"]
        ws.send(json.dumps({"type": "response.steer", "previous_response_id": target, "input": "no"}))
        event = _recv(ws)
        while not event["type"].startswith("response.steer"):
            event = _recv(ws)
        assert event["type"] == "response.steer.failed" and event["error"]["code"] == "steering_not_supported"
