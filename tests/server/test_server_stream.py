"""Streams over HTTP from a real uvicorn server, every one through the grammar checker."""

from __future__ import annotations

import json

import httpx
import pytest
from support.server_harness import stream_events
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def test_plain_text_stream_order_and_content(http: httpx.Client) -> None:
    events = stream_events(http, {"input": "Hello, world!"})
    response = check_stream(events)
    assert types(events)[:6] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
    ]
    assert types(events)[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [i["type"] for i in response["output"]] == ["reasoning", "message"]
    assert response["output"][1]["content"][0]["text"] == "Hello, world!"
    assert all(e["logprobs"] == [] for e in events if e["type"] == "response.output_text.delta")


def test_one_delta_per_engine_step(http: httpx.Client, encoding: HarmonyEncoding) -> None:
    events = stream_events(http, {"input": "#lorem 40"})
    check_stream(events)
    text_deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert len(text_deltas) == 40  # the echo executor delivers one token per step


def test_function_call_stream(http: httpx.Client) -> None:
    events = stream_events(http, {"input": "Weather in Paris?", "tools": [WEATHER]})
    response = check_stream(events)
    call = response["output"][-1]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Weather in Paris?"}
    added = [e for e in events if e["type"] == "response.output_item.added"][-1]["item"]
    assert added["arguments"] == "" and added["call_id"] == call["call_id"] and added["id"] == call["id"]
    assert any(e["type"] == "response.function_call_arguments.delta" for e in events)
    done = [e for e in events if e["type"] == "response.function_call_arguments.done"][0]
    assert done["arguments"] == call["arguments"] and done["item_id"] == call["id"]


def test_preamble_before_tool_call(http: httpx.Client) -> None:
    harmony = (
        "<|channel|>commentary<|message|>Let me check.<|end|>"
        '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>'
    )
    response = check_stream(stream_events(http, {"input": "#harmony\n" + harmony, "tools": [WEATHER]}))
    preamble, call = response["output"]
    assert preamble["type"] == "message" and preamble["phase"] == "commentary"
    assert preamble["content"][0]["text"] == "Let me check."
    assert call["type"] == "function_call" and call["arguments"] == '{"city":"Oslo"}'
    assert response["status"] == "completed"


@pytest.mark.parametrize("text", ["🦜🪿 and 𓀀𓁐", "Ḽơᶉëᶆ ȋṕšᶙṁ"])
def test_multibyte_characters_split_across_tokens(
    http: httpx.Client, encoding: HarmonyEncoding, text: str
) -> None:
    assert any(_splits(encoding, t) for t in encoding.encode_plain(text)), (
        "precondition: some token is a partial character"
    )
    events = stream_events(http, {"input": "#harmony\n<|channel|>final<|message|>" + text + "<|return|>"})
    response = check_stream(events)
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == text and all("\ufffd" not in d for d in deltas)
    assert response["output"][0]["content"][0]["text"] == text


def _splits(encoding: HarmonyEncoding, token: int) -> bool:
    try:
        encoding.token_bytes[token].decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def test_no_stop_token_is_incomplete(http: httpx.Client) -> None:
    events = stream_events(http, {"input": "#harmony\n<|channel|>final<|message|>never stops"})
    response = check_stream(events)
    assert events[-1]["type"] == "response.incomplete"
    assert response["output"][0]["status"] == "incomplete"
    assert response["output"][0]["content"][0]["text"] == "never stops"


def test_max_output_tokens_cut_is_incomplete_never_completed(http: httpx.Client) -> None:
    events = stream_events(http, {"input": "#lorem 100", "max_output_tokens": 20})
    response = check_stream(events)
    assert events[-1]["type"] == "response.incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["usage"]["output_tokens"] == 20 and response["max_output_tokens"] == 20
    assert response["output"][-1]["status"] == "incomplete"


def test_cut_between_messages_is_still_incomplete(http: httpx.Client) -> None:
    harmony = "<|channel|>analysis<|message|>think<|end|>"
    events = stream_events(http, {"input": "#harmony\n" + harmony})
    response = check_stream(events)
    assert response["status"] == "incomplete" and response["output"][0]["status"] == "completed"


@pytest.mark.parametrize(
    "harmony", ["<|channel|>??<|end|>", "<|start|>functions.f to=assistant<|message|>{}<|end|>"]
)
def test_output_with_nothing_readable_fails_saying_what_the_model_wrote(
    http: httpx.Client, harmony: str
) -> None:
    # The echo runs out after <|end|> (finish "length"): a cut, never a failure (issue 31, point 5).
    cut = check_stream(stream_events(http, {"input": "#harmony\n" + harmony}))
    assert cut["status"] == "incomplete" and cut["output"] == []
    # The model ends it (<|return|>, a stop token): nothing readable fails, saying what it wrote.
    events = stream_events(http, {"input": "#harmony\n" + harmony + "<|return|>"})
    response = check_stream(events)
    assert events[-1]["type"] == "response.failed" and response["output"] == []
    assert (
        response["error"]["code"] == "server_error"
        and "could not be read as Harmony" in response["error"]["message"]
    )
    assert "<|channel|>??" in response["error"]["message"] or "functions.f" in response["error"]["message"]
    # The server keeps serving.
    assert check_stream(stream_events(http, {"input": "still alive?"}))["status"] == "completed"


def test_builtin_tool_items_stream(http: httpx.Client) -> None:
    harmony = '<|channel|>analysis to=browser.search code<|message|>{"query":"gpt-oss"}<|call|>'
    response = check_stream(
        stream_events(http, {"input": "#harmony\n" + harmony, "tools": [{"type": "web_search"}]})
    )
    assert response["output"][0]["type"] == "web_search_call"
    assert response["output"][0]["action"] == {"type": "search", "query": "gpt-oss"}
    code = check_stream(
        stream_events(
            http, {"input": "#harmony\n<|channel|>analysis to=python code<|message|>print(1)<|call|>"}
        )
    )
    assert code["output"][0]["type"] == "code_interpreter_call" and code["output"][0]["code"] == "print(1)"
    mcp = check_stream(
        stream_events(
            http, {"input": '#harmony\n<|channel|>commentary to=srv.do json<|message|>{"a":1}<|call|>'}
        )
    )
    assert mcp["output"][0]["type"] == "mcp_call" and mcp["output"][0]["arguments"] == '{"a":1}'


def test_non_streaming_equals_the_stream_terminal_shape(http: httpx.Client) -> None:
    body = {"input": "Same path", "tools": [], "metadata": {"k": "v"}}
    plain = http.post("/v1/responses", json=body).json()
    streamed = check_stream(stream_events(http, body))
    from support.contract import validate_response

    validate_response(plain)

    def strip(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in ("id", "created_at", "completed_at", "output")}

    assert strip(plain) == strip(streamed)
    assert [i["type"] for i in plain["output"]] == [i["type"] for i in streamed["output"]]
    assert http.get(f"/v1/responses/{plain['id']}").json() == plain
    assert http.get(f"/v1/responses/{streamed['id']}").json() == streamed


def test_usage_counts(http: httpx.Client, encoding: HarmonyEncoding, adapter) -> None:  # type: ignore[no-untyped-def]
    from trtllm_responses.request.protocol import parse_request

    body = {"input": "#lorem 10", "instructions": "Count."}
    response = check_stream(stream_events(http, body))
    prompt = adapter.build_prompt(parse_request(body)).token_ids
    usage = response["usage"]
    assert usage["input_tokens"] == len(prompt)
    analysis = (
        encoding.encode("<|channel|>analysis<|message|>")
        + encoding.encode_plain("Writing 10 tokens.")
        + [encoding.end]
    )
    final = encoding.encode("<|start|>assistant<|channel|>final<|message|>")
    assert usage["output_tokens_details"]["reasoning_tokens"] == len(analysis)
    assert usage["output_tokens"] == len(analysis) + len(final) + 10 + 1
    assert usage["input_tokens_details"]["cached_tokens"] == 0


def test_timestamps_are_integers_on_the_wire(http: httpx.Client) -> None:
    import re

    raw = http.post("/v1/responses", json={"input": "when?"}).content
    assert re.search(rb'"created_at":\d+[,}]', raw) and re.search(rb'"completed_at":\d+[,}]', raw)
    with http.stream("POST", "/v1/responses", json={"input": "when?", "stream": True}) as response:
        body = response.read()
    assert re.search(rb'"created_at":\d+[,}]', body) and not re.search(rb'"created_at":\d+\.', body)
