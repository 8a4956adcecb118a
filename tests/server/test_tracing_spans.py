"""The request-level spans of a real ``serve`` process, received by a real OTLP receiver
(docs/tracing-and-dashboards.md#spans).

With one client trace: a streamed Responses turn ending in a function call, its continuation with the
function's output (``previous_response_id``), a Chat completion of two choices and a Messages call (the
anthropic SDK) are each one trace continuing the client's ``traceparent``, with the stage spans and their
attributes; no text the client sent or got is in any span unless the operator opted in; a background
response's spans continue the request that started it; a WebSocket connection's turns are children of it
when the handshake carried a ``traceparent``, else traces of their own linked to it; each generation's
``trace_headers`` name the trace and its ``chat`` span.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.lazy import lazy_import
from support.otlp_receiver import OtlpReceiver, ReceivedSpan
from support.process_harness import ServeProcess
from support.server_harness import RecordingEcho, start_server
from websockets.sync.client import connect as ws_connect

from trtllm_responses.ops import trace_attrs

anthropic = lazy_import("anthropic")  # the clients extra

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CITY = "Zanzibarcity7"  # each marker is text the client sent or got, never to be in a span by default
INSTRUCTIONS = "Instructionmarker3 answer briefly"
TOOL_OUTPUT = "Sunnymarker5 and warm"
CHAT_TEXT = "Chatmarker9 hello there"
MESSAGES_TEXT = "Messagesmarker4 hello"
WS_TEXT = "Socketmarker6 hi"
MARKERS = (
    "Zanzibarcity7",
    "Instructionmarker3",
    "Sunnymarker5",
    "Chatmarker9",
    "Messagesmarker4",
    "Socketmarker6",
)
CHAT = "chat gpt-oss"  # the chat span of the served model (serve's default name)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def parent(n: int) -> str:
    """The client's span id of its ``n``-th request (one ``traceparent`` per request, one trace)."""
    return f"{n:016x}"


def traceparent(n: int, trace: str = CLIENT_TRACE) -> dict[str, str]:
    return {"traceparent": f"00-{trace}-{parent(n)}-01"}


class Spans:
    """What the receiver got, as a tree."""

    def __init__(self, spans: list[ReceivedSpan]) -> None:
        self.all = spans
        self.by_id = {s.span_id: s for s in spans}

    def children(self, of: ReceivedSpan, name: str | None = None) -> list[ReceivedSpan]:
        kids = [s for s in self.all if s.parent_span_id == of.span_id and s.trace_id == of.trace_id]
        return sorted((s for s in kids if name is None or s.name == name), key=lambda s: s.start_ns)

    def child(self, of: ReceivedSpan, name: str) -> ReceivedSpan:
        (one,) = self.children(of, name)
        return one

    def below(self, of: ReceivedSpan) -> list[ReceivedSpan]:
        found = []
        for kid in self.children(of):
            found += [kid, *self.below(kid)]
        return found

    def server(self, client_span: str) -> ReceivedSpan:
        """The one span continuing the client's span ``client_span``: the request's server span."""
        (one,) = [s for s in self.all if s.parent_span_id == client_span]
        assert one.kind == "server" and one.trace_id == CLIENT_TRACE
        return one


def _got_server_spans(*client_spans: str) -> Any:
    return lambda spans: all(any(s.parent_span_id == p for s in spans) for p in client_spans)


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture(scope="module")
def served(receiver: OtlpReceiver) -> Iterator[ServeProcess]:
    process = ServeProcess(env=receiver.env()).start()
    try:
        yield process
    finally:
        process.kill()


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    return []


def _text_in(spans: list[ReceivedSpan]) -> list[tuple[str, str, str]]:
    """(span, attribute, marker) of every marker found in any attribute or event attribute."""
    found = []
    for s in spans:
        pairs = [*s.attributes.items(), *((k, v) for _, a in s.events for k, v in a.items())]
        pairs += list(s.resource.items())
        for key, value in pairs:
            for text in _texts(value):
                found += [(s.name, key, m) for m in MARKERS if m in text]
    return found


def test_each_request_is_one_trace_continuing_the_client_with_its_stage_spans(
    served: ServeProcess, receiver: OtlpReceiver
) -> None:
    client = served.sdk()
    # 1. A streamed Responses turn that ends in a function call.
    with client.responses.stream(
        model="gpt-oss-test",
        input=f'call get_weather {{"city": "{CITY}"}}',
        instructions=INSTRUCTIONS,
        tools=[WEATHER],  # type: ignore[list-item]
        extra_headers=traceparent(1),
    ) as stream:
        first = stream.get_final_response()
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert CITY in call.arguments
    # 2. Its continuation with the function's output.
    second = client.responses.create(
        model="gpt-oss-test",
        previous_response_id=first.id,
        tools=[WEATHER],  # type: ignore[list-item]
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": TOOL_OUTPUT}],
        extra_headers=traceparent(2),
    )
    assert TOOL_OUTPUT in second.output_text
    # 3. A Chat completion of two choices; 4. a Messages call through Anthropic's SDK.
    chat = client.chat.completions.create(
        model="gpt-oss-test",
        n=2,
        messages=[{"role": "user", "content": CHAT_TEXT}],
        extra_headers=traceparent(3),
    )
    assert [c.message.content for c in chat.choices] == [CHAT_TEXT, CHAT_TEXT]
    with anthropic.Anthropic(base_url=served.base_url, api_key="unused", max_retries=0) as claude:
        message = claude.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=256,
            messages=[{"role": "user", "content": MESSAGES_TEXT}],
            extra_headers=traceparent(4),
        )
    assert MESSAGES_TEXT in message.content[-1].text  # type: ignore[union-attr]

    spans = Spans(receiver.wait_for(_got_server_spans(*(parent(n) for n in (1, 2, 3, 4)))))
    turn = spans.server(parent(1))
    assert turn.name == "POST /v1/responses"
    assert turn.attributes[trace_attrs.HTTP_ROUTE] == "/v1/responses"
    assert turn.attributes[trace_attrs.HTTP_STATUS] == 200
    assert turn.attributes[trace_attrs.TRANSPORT] == "sse"
    assert turn.attributes[trace_attrs.API] == "responses"
    assert turn.attributes[trace_attrs.TENANT] == "default"
    assert turn.attributes[trace_attrs.REQUEST_ID].startswith("req_")
    assert turn.attributes[trace_attrs.SESSION_ID] == first.id  # a chain's first response is its own key
    assert all(s.trace_id == CLIENT_TRACE for s in spans.below(turn))
    assert [s.name for s in spans.children(turn)] == [
        "request.read_body",
        "request.parse",
        "prepare",
        "queue",
        "response",
    ]
    assert spans.child(turn, "request.read_body").attributes[trace_attrs.BYTES] > 0
    prepare = spans.child(turn, "prepare")
    assert prepare.attributes[trace_attrs.RESPONSE_ID] == first.id
    render = spans.child(prepare, "prepare.render_prompt")
    assert render.attributes[trace_attrs.STAGE] == "render_prompt"
    assert render.attributes[trace_attrs.RENDER_WORKER] is False
    assert render.attributes[trace_attrs.PROMPT_TOKENS] == first.usage.input_tokens  # type: ignore[union-attr]
    queue = spans.child(turn, "queue")
    assert queue.attributes[trace_attrs.QUEUE_OUTCOME] == "admitted"
    assert trace_attrs.QUEUE_WAIT_S in queue.attributes
    response = spans.child(turn, "response")
    assert response.attributes[trace_attrs.RESPONSE_ID] == first.id
    assert [s.name for s in spans.children(response)] == [CHAT, "store.put"]
    generation = spans.child(response, CHAT)
    assert generation.kind == "client"
    attributes = generation.attributes
    assert attributes[trace_attrs.OPERATION] == "chat"
    assert attributes[trace_attrs.PROVIDER] == "trtllm-responses"
    assert attributes[trace_attrs.REQUEST_MODEL] == first.model == "gpt-oss"
    assert attributes[trace_attrs.RESPONSE_ID] == first.id
    assert attributes[trace_attrs.FINISH_REASONS] == ("tool_call",)
    assert attributes[trace_attrs.INPUT_TOKENS] == first.usage.input_tokens  # type: ignore[union-attr]
    assert attributes[trace_attrs.OUTPUT_TOKENS] == first.usage.output_tokens  # type: ignore[union-attr]
    assert attributes[trace_attrs.REQUEST_STREAM] is True
    assert [name for name, _ in generation.events] == ["gen_ai.first_token"]
    assert 0 < attributes[trace_attrs.TIME_TO_FIRST_CHUNK] < 30
    assert spans.child(response, "store.put").attributes[trace_attrs.STORE_BACKEND] == "memory"

    continued = spans.server(parent(2))
    assert continued.attributes[trace_attrs.TRANSPORT] == "json"
    assert continued.attributes[trace_attrs.SESSION_ID] == first.id  # the chain's key, inherited
    chain = spans.child(spans.child(continued, "prepare"), "prepare.continue_chain")
    assert chain.attributes[trace_attrs.CACHE_HIT] is True  # stored here: its history remembered
    assert chain.attributes[trace_attrs.CHAIN_SOURCE] == "cache"
    answer = spans.child(spans.child(continued, "response"), CHAT)
    assert answer.attributes[trace_attrs.FINISH_REASONS] == ("stop",)
    assert answer.attributes[trace_attrs.RESPONSE_ID] == second.id

    completion = spans.server(parent(3))
    assert completion.name == "POST /v1/chat/completions"
    assert completion.attributes[trace_attrs.API] == "chat.completions"
    assert completion.attributes[trace_attrs.RESPONSE_ID] == chat.id
    choices = spans.children(completion, "response")
    assert len(choices) == 2  # one run, one chat span, per choice
    for choice in choices:
        (inference,) = spans.children(choice, CHAT)
        assert inference.attributes[trace_attrs.FINISH_REASONS] == ("stop",)
    assert spans.children(completion, "prepare") and spans.children(completion, "queue")

    messages = spans.server(parent(4))
    assert messages.name == "POST /v1/messages" and messages.attributes[trace_attrs.API] == "messages"
    (inference,) = spans.children(spans.child(messages, "response"), CHAT)
    assert inference.attributes[trace_attrs.OUTPUT_TOKENS] == message.usage.output_tokens

    assert _text_in(spans.all) == []  # no text content by default


def test_count_tokens_and_a_refusal_are_spans_too(served: ServeProcess, receiver: OtlpReceiver) -> None:
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        counted = http.post(
            "/v1/messages/count_tokens",
            json={"model": "m", "messages": [{"role": "user", "content": MESSAGES_TEXT}]},
            headers={**traceparent(5), "anthropic-version": "2023-06-01"},
        )
        missing = http.get("/v1/responses/resp_nothere", headers=traceparent(6))
    assert counted.status_code == 200 and missing.status_code == 404
    spans = Spans(receiver.wait_for(_got_server_spans(parent(5), parent(6))))
    count = spans.server(parent(5))
    assert count.name == "POST /v1/messages/count_tokens"
    assert (
        spans.child(spans.child(count, "prepare"), "prepare.render_prompt").attributes[
            trace_attrs.PROMPT_TOKENS
        ]
        == counted.json()["input_tokens"]
    )
    unknown = spans.server(parent(6))
    assert unknown.name == "GET /v1/responses/{response_id}"  # the route's template, not the path
    assert unknown.attributes[trace_attrs.HTTP_STATUS] == 404
    assert unknown.attributes[trace_attrs.ERROR_TYPE] == "404"
    assert unknown.status == 0  # a 4xx is the client's error: the server span's status stays unset


def test_probes_and_scrapes_are_not_traced_unless_the_caller_traces_them(
    served: ServeProcess, receiver: OtlpReceiver
) -> None:
    """/health, /metrics, /stats are polled every few seconds by probes and Prometheus: a span each would be
    most of the traces; one that carries a ``traceparent`` (someone tracing the probe) is traced."""
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        for path in ("/health", "/metrics", "/stats"):
            assert http.get(path).status_code == 200
        assert http.get("/health", headers=traceparent(20)).status_code == 200
        marker = http.get("/v1/models", headers=traceparent(21))  # sent after the probes: exported after them
    assert marker.status_code == 200
    spans = Spans(receiver.wait_for(_got_server_spans(parent(20), parent(21))))
    assert spans.server(parent(20)).name == "GET /health"
    probes = [s for s in spans.all if s.name in ("GET /health", "GET /metrics", "GET /stats")]
    assert [s.parent_span_id for s in probes] == [parent(20)]


def test_a_background_response_continues_the_request_that_started_it(
    served: ServeProcess, receiver: OtlpReceiver
) -> None:
    client = served.sdk()
    queued = client.responses.create(
        model="m", input="#lorem 20", background=True, extra_headers=traceparent(7)
    )
    for _ in range(200):
        if client.responses.retrieve(queued.id).status == "completed":
            break
    spans = Spans(
        receiver.wait_for(
            lambda got: any(
                s.name == "response" and s.attributes.get(trace_attrs.RESPONSE_ID) == queued.id for s in got
            )
        )
    )
    started = spans.server(parent(7))
    response = spans.child(started, "response")
    assert response.attributes[trace_attrs.BACKGROUND] is True
    assert response.attributes[trace_attrs.RESPONSE_STATUS] == "completed"
    assert spans.child(response, CHAT).trace_id == CLIENT_TRACE


def _turn(ws: Any, text: str, previous: str | None = None) -> str:
    body: dict[str, Any] = {"type": "response.create", "model": "m", "input": text}
    if previous is not None:
        body["previous_response_id"] = previous
    ws.send(json.dumps(body))
    while True:
        event = json.loads(ws.recv(timeout=30))
        if event["type"] in ("response.completed", "response.failed", "error"):
            assert event["type"] == "response.completed", event
            return str(event["response"]["id"])


def test_websocket_turns_are_traces_of_their_own_linked_to_the_connection(
    served: ServeProcess, receiver: OtlpReceiver
) -> None:
    url = served.base_url.replace("http://", "ws://") + "/v1/responses"
    before = {s.span_id for s in receiver.spans()}
    with ws_connect(url) as ws:
        one = _turn(ws, WS_TEXT)
        two = _turn(ws, WS_TEXT, one)
    spans = Spans(
        receiver.wait_for(
            lambda got: (
                any(s.name == "GET /v1/responses" and s.span_id not in before for s in got)
                and {one, two}
                <= {s.attributes.get(trace_attrs.RESPONSE_ID) for s in got if s.name == "response"}
            )
        )
    )
    (connection,) = [s for s in spans.all if s.name == "GET /v1/responses" and s.span_id not in before]
    assert connection.parent_span_id == "" and connection.kind == "server"
    assert connection.attributes[trace_attrs.TRANSPORT] == "websocket"
    turns = [s for s in spans.all if s.name == "response.create" and s.span_id not in before]
    assert len(turns) == 2
    for turn, response_id in zip(sorted(turns, key=lambda s: s.start_ns), (one, two), strict=True):
        assert turn.parent_span_id == ""  # a root: each turn is a trace of its own
        assert turn.trace_id != connection.trace_id
        assert turn.links == (f"{connection.trace_id}/{connection.span_id}",)
        response = spans.child(turn, "response")
        assert response.attributes[trace_attrs.RESPONSE_ID] == response_id
        assert spans.children(turn, "prepare") and spans.children(response, CHAT)
    assert turns[0].trace_id != turns[1].trace_id
    second_prepare = spans.child(sorted(turns, key=lambda s: s.start_ns)[1], "prepare")
    assert (
        spans.child(second_prepare, "prepare.continue_chain").attributes[trace_attrs.CHAIN_SOURCE]
        == "connection"
    )
    assert _text_in(spans.all) == []


def test_websocket_turns_are_children_of_a_connection_the_client_traced(
    served: ServeProcess, receiver: OtlpReceiver
) -> None:
    url = served.base_url.replace("http://", "ws://") + "/v1/responses"
    with ws_connect(url, additional_headers=traceparent(8)) as ws:
        one = _turn(ws, WS_TEXT)
        two = _turn(ws, WS_TEXT, one)
    spans = Spans(
        receiver.wait_for(
            lambda got: (
                any(s.parent_span_id == parent(8) for s in got)
                and {one, two}
                <= {s.attributes.get(trace_attrs.RESPONSE_ID) for s in got if s.name == "response"}
            )
        )
    )
    connection = spans.server(parent(8))
    assert connection.name == "GET /v1/responses"
    turns = spans.children(connection, "response.create")
    assert len(turns) == 2 and all(t.trace_id == CLIENT_TRACE and not t.links for t in turns)
    assert [spans.child(t, "response").attributes[trace_attrs.RESPONSE_ID] for t in turns] == [one, two]


def test_content_only_when_the_operator_opted_in() -> None:
    with OtlpReceiver() as receiver:
        env = {**receiver.env(), "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
        process = ServeProcess(env=env).start()
        try:
            answer = process.sdk().responses.create(
                model="m", input=CHAT_TEXT, instructions=INSTRUCTIONS, extra_headers=traceparent(9)
            )
            spans = Spans(receiver.wait_for(_got_server_spans(parent(9))))
        finally:
            process.kill()
        assert answer.output_text == CHAT_TEXT
    generation = spans.child(spans.child(spans.server(parent(9)), "response"), CHAT)
    given = json.loads(generation.attributes[trace_attrs.INPUT_MESSAGES_CONTENT])
    assert given == [{"role": "user", "parts": [{"type": "text", "content": CHAT_TEXT}]}]
    system = json.loads(generation.attributes[trace_attrs.SYSTEM_INSTRUCTIONS_CONTENT])
    assert system == [{"type": "text", "content": INSTRUCTIONS}]
    (written,) = json.loads(generation.attributes[trace_attrs.OUTPUT_MESSAGES_CONTENT])
    assert written["role"] == "assistant" and written["finish_reason"] == "stop"
    assert {"type": "text", "content": CHAT_TEXT} in written["parts"]
    assert written["parts"][0]["type"] == "reasoning"


def test_each_generation_carries_its_chat_span_as_trace_headers(
    encoding: Any, adapter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor is handed ``trace_headers`` naming the client's trace and the ``chat`` span (in-process,
    so that the executor's requests can be read)."""
    with OtlpReceiver() as receiver:
        for name, value in receiver.env().items():
            monkeypatch.setenv(name, value)
        executor = RecordingEcho(encoding)
        with start_server(executor, adapter) as running:
            with openai.OpenAI(base_url=running.base_url + "/v1", api_key="unused", max_retries=0) as sdk:
                tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER["parameters"]}]
                sdk.responses.create(
                    model="m",
                    input='call get_weather {"city": "x"}',
                    tools=tools,
                    extra_headers=traceparent(10),  # type: ignore[arg-type]
                )
        spans = Spans(receiver.wait_for(_got_server_spans(parent(10))))
    generation = spans.child(spans.child(spans.server(parent(10)), "response"), "chat gpt-oss-test")
    (request,) = executor.requests
    assert request.trace_headers == {"traceparent": f"00-{CLIENT_TRACE}-{generation.span_id}-01"}
