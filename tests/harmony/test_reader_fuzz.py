"""A seeded fuzzer of adversarial completions: the reader and the stream state machine never break.

Completions are random splices of real Harmony (the corpus's completions and fragments of it),
with control tokens at random places, truncations, long runs and random engine steps (1-8
tokens per step); and mutations of the corpus's real completions, token by token as an engine
would get them wrong: deletions, swaps, duplications and truncations (issue 31, Build 7). Each
drives :class:`TokenStreamProcessor` (parser + ResponseStream) directly, calls to tools nobody
runs held as the tool loop holds them:

- no exception escapes; exactly one terminal event, last; sequence numbers 0, 1, 2…;
- every event validates as the SDK's ``ResponseStreamEvent`` and passes the event grammar
  (``stream_grammar.check_stream``, for a sample: it also checks the spec's schemas);
- the items are the same whatever the engine steps (one step with every token = "non-streaming");
- the same seed gives the same events (ids and timestamps aside);
- no call is invented: a function or custom tool call names a declared tool, any other call item a
  recipient the model wrote with ``to=`` (answered as unavailable, never ``completed``);
- a cut completion (finish ``length``) is never ``failed``;
- no U+FFFD the model did not write (a character cut off is dropped, not replaced).

A sample also goes through a real server (echo ``#harmony``), streamed and not. Default
:data:`CASES` cases (a few seconds); more with ``TRTLLM_RESPONSES_READER_FUZZ_CASES=100000``,
another seed with ``TRTLLM_RESPONSES_READER_FUZZ_SEED``.
"""

from __future__ import annotations

import codecs
import json
import os
import random
import re
from functools import cache
from typing import Annotated, Any, get_args, get_origin

import httpx
import pytest
from openai.types.responses import ResponseStreamEvent
from support.reader_corpus import CORPUS
from support.server_harness import stream_events
from support.stream_grammar import check_stream

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.core.wire import to_dict
from trtllm_responses.executors.base import TokenDelta
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.responses.prepared import initial_response
from trtllm_responses.stream import ResponseStream, TokenStreamProcessor
from trtllm_responses.tools import UNAVAILABLE_KINDS

CASES = int(os.environ.get("TRTLLM_RESPONSES_READER_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("TRTLLM_RESPONSES_READER_FUZZ_SEED", "17"))
SERVER_CASES = max(20, CASES // 50)
MUTATION_CASES = max(100, CASES // 4)
GRAMMAR_EVERY = 50  # every Nth case also passes the full event grammar (spec schemas: slower)

CONTROL = [
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|channel|>",
    "<|constrain|>",
    "<|return|>",
    "<|call|>",
    "<|endoftext|>",
]
PIECES = [
    "assistant",
    "assistantassistant",
    "user",
    "functions.get_weather",
    " to=functions.get_weather",
    " to=",
    "to=repo_browser.open_file",
    " to=browser.search",
    " to=python",
    "analysis",
    "commentary",
    "final",
    "final ",
    "??",
    " json",
    " code",
    "JSON",
    "json",
    '{"city":"Paris"}',
    '{"a": [1, {"b": "}"}]}',
    "{",
    "}",
    '"',
    "\\",
    "\n",
    "  ",
    "Hello",
    " world",
    "naïve café — 你好 😀",
    "I'm sorry, I can't help with that.",
    "__HANDOFF__",
    "to=assistant",
    "<|",
    "|>",
    "<|reserved_200017|>",
]


def _event_classes() -> dict[str, Any]:
    """The SDK's event class of each event type (validating against the one class is fast)."""
    union = (
        get_args(ResponseStreamEvent)[0]
        if get_origin(ResponseStreamEvent) is Annotated
        else ResponseStreamEvent
    )
    return {get_args(c.model_fields["type"].annotation)[0]: c for c in get_args(union)}


_EVENTS = _event_classes()
_IDS = re.compile(r"\b(?:msg|rs|fc|call|mcp|ws|ci|ctc|mcpr|resp)_[0-9a-f]+\b")
_CONTROL = re.compile(r"<\|[a-z_0-9]+\|>")
_TIMES = re.compile(r'"(created_at|completed_at)":\s*[0-9.]+')


def completion(rng: random.Random) -> str:
    """One adversarial completion (Harmony text with control tokens)."""
    parts: list[str] = []
    for _ in range(rng.randint(1, 12)):
        roll = rng.random()
        if roll < 0.3:
            text = rng.choice(CORPUS).completion
            a = rng.randrange(len(text) + 1)
            b = rng.randrange(a, len(text) + 1)
            parts.append(text[a:b] if rng.random() < 0.7 else text)
        elif roll < 0.55:
            parts.append(rng.choice(CONTROL))
        elif roll < 0.95:
            parts.append(rng.choice(PIECES))
        else:  # a long run
            parts.append(rng.choice(["x", " word", "<|channel|>", "\n"]) * rng.randint(50, 700))
    return "".join(parts)


#: How a real completion is mutated, token by token (issue 31, Build 7).
MUTATIONS = ("delete", "swap", "duplicate", "truncate")


def mutate(rng: random.Random, tokens: list[int]) -> tuple[list[int], list[str]]:
    """One to three mutations of a real completion's tokens; ``truncate`` ends it (a cut: ``length``)."""
    out = list(tokens)
    kinds: list[str] = []
    for _ in range(rng.randint(1, 3)):
        if not out:
            break
        kind = rng.choice(MUTATIONS)
        i = rng.randrange(len(out))
        n = rng.randint(1, 4)
        if kind == "delete":
            del out[i : i + n]
        elif kind == "swap":
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        elif kind == "duplicate":
            out[i:i] = out[i : i + n]
        else:
            out = out[:i]
        kinds.append(kind)
    return out, kinds


def steps(rng: random.Random, tokens: list[int]) -> list[list[int]]:
    out, i = [], 0
    while i < len(tokens):
        n = rng.randint(1, 8) if rng.random() < 0.5 else 1
        out.append(tokens[i : i + n])
        i += n
    return out


@cache
def _request(adapter: HarmonyAdapter, tools: int) -> tuple[Any, Any]:
    request = parse_request({"input": "x", "tools": TOOLS[tools]})
    return request, adapter.build_prompt(request).tools


def drive(
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
    tokens: list[int],
    chunks: list[list[int]],
    finish: str,
    tools: int,
) -> list[dict[str, Any]]:
    request, declared = _request(adapter, tools)
    stream = ResponseStream(initial_response("resp_fuzz", request, "m"), tools=declared)
    stream.hold_calls(UNAVAILABLE_KINDS)  # as the tool loop holds them (nothing runs here)
    processor = TokenStreamProcessor(stream, encoding, 10)
    events = processor.start()
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        events += processor.process(TokenDelta(chunk, finish if last else None))  # type: ignore[arg-type]
        if processor.done:
            break
    if not chunks:
        events += processor.process(TokenDelta((), finish))  # type: ignore[arg-type]
    if (
        processor.awaiting_tool
    ):  # a server-run call is held: this fuzz has no tool loop; end as a client would see
        events += stream.incomplete(processor.usage())
    return [to_dict(e) for e in events]


def _check(events: list[dict[str, Any]], full: bool) -> dict[str, Any]:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    terminal = [
        e for e in events if e["type"] in ("response.completed", "response.incomplete", "response.failed")
    ]
    assert len(terminal) == 1 and events[-1] is terminal[0]
    for event in events:
        _EVENTS[event["type"]].model_validate(event)
    if full:
        check_stream(events)
    return terminal[0]["response"]


def _model_text(encoding: HarmonyEncoding, tokens: list[int]) -> str:
    """What the model wrote, decoded as it streamed (a character cut off at the end is not there yet)."""
    return codecs.getincrementaldecoder("utf-8")("replace").decode(
        b"".join(encoding.token_bytes[t] for t in tokens), False
    )


def check_meaning(response: dict[str, Any], written: str, finish: str, tools: list[Any]) -> None:
    """Issue 31's invariants: no call invented, a cut never failed, no U+FFFD the model did not write."""
    declared = {t["name"] for t in tools}
    # What the model wrote, as a body reads it (a control token inside a body is dropped, never text).
    read = _CONTROL.sub("", written)
    if finish == "length":
        assert response["status"] != "failed", "a cut completion failed"
    for item in response["output"]:
        kind = item["type"]
        if kind in ("function_call", "custom_tool_call"):
            assert item["name"] in declared, f"a call to {item['name']}, which was not declared"
        elif kind in ("mcp_call", "web_search_call", "code_interpreter_call"):
            label = {"web_search_call": "browser", "code_interpreter_call": "python"}.get(
                kind, item.get("server_label")
            )
            assert f"to={label}" in written or f"to={label}" in read, (
                f"a {kind} to {label} not written with to="
            )
            assert item["status"] != "completed", f"a {kind} nobody ran is completed"
        texts = [c.get("text", "") for c in item.get("content") or []] + [item.get("arguments") or ""]
        if any("\ufffd" in t for t in texts):
            assert "\ufffd" in written, "a U+FFFD the model did not write"


def _items(response: dict[str, Any]) -> list[Any]:
    return [
        (i["type"], i.get("status"), i.get("content"), i.get("arguments"), i.get("name"))
        for i in response["output"]
    ]


def _normal(events: list[dict[str, Any]]) -> str:
    return _TIMES.sub("", _IDS.sub("ID", json.dumps(events, sort_keys=True)))


TOOLS: list[Any] = [
    [],
    [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}],
]


def _read_as_one(
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
    tokens: list[int],
    chunks: list[list[int]],
    finish: str,
    tools: int,
    *,
    full: bool,
) -> list[dict[str, Any]]:
    """Drive ``tokens`` in ``chunks``: the stream is valid (its grammar checked ``full``y when asked), keeps
    issue 31's invariants, and reads as the whole completion in one step reads. Its events."""
    events = drive(encoding, adapter, tokens, chunks, finish, tools)
    response = _check(events, full=full)
    check_meaning(response, _model_text(encoding, tokens), finish, TOOLS[tools])
    whole = drive(encoding, adapter, tokens, [tokens] if tokens else [], finish, tools)
    assert _items(whole[-1]["response"]) == _items(response), "engine steps changed the items"
    return events


def test_fuzz_the_reader_and_the_stream_state_machine(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    rng = random.Random(SEED)
    for case in range(CASES):
        text = completion(rng)
        tokens = encoding.encode(text)
        finish = rng.choice(["stop", "stop", "length"])
        tools = rng.randrange(len(TOOLS))
        chunks = steps(rng, tokens)
        try:
            events = _read_as_one(
                encoding, adapter, tokens, chunks, finish, tools, full=case % GRAMMAR_EVERY == 0
            )
            if case % GRAMMAR_EVERY == 0:
                again = drive(encoding, adapter, tokens, chunks, finish, tools)
                assert _normal(again) == _normal(events), "the same seed gave other events"
        except Exception as exc:
            raise AssertionError(f"case {case} (seed {SEED}), finish {finish}: {text!r}") from exc


def test_fuzz_mutations_of_real_completions(encoding: HarmonyEncoding, adapter: HarmonyAdapter) -> None:
    """Real completions (the corpus's), mutated as an engine gets tokens wrong, keep issue 31's invariants."""
    rng = random.Random(SEED + 2)
    seeds = [encoding.encode(case.completion) for case in CORPUS]
    seen: dict[str, int] = {}
    for case in range(MUTATION_CASES):
        tokens, kinds = mutate(rng, rng.choice(seeds))
        for kind in kinds:
            seen[kind] = seen.get(kind, 0) + 1
        finish = "length" if "truncate" in kinds else rng.choice(["stop", "stop", "length"])
        tools = rng.randrange(len(TOOLS))
        chunks = steps(rng, tokens)
        try:
            _read_as_one(encoding, adapter, tokens, chunks, finish, tools, full=case % GRAMMAR_EVERY == 0)
        except Exception as exc:
            text = b"".join(encoding.token_bytes[t] for t in tokens).decode("utf-8", "replace")
            raise AssertionError(f"mutation {case} {kinds} (seed {SEED}), finish {finish}: {text!r}") from exc
    assert set(seen) == set(MUTATIONS), seen


def test_fuzz_through_a_server(http: httpx.Client, encoding: HarmonyEncoding) -> None:
    rng = random.Random(SEED + 1)
    seeds = [encoding.encode(case.completion) for case in CORPUS]
    for case in range(SERVER_CASES):
        if case % 2:  # a splice
            text = completion(rng)
        else:  # a mutated real completion, as its text (a character a mutation broke: U+FFFD, written)
            tokens, _ = mutate(rng, rng.choice(seeds))
            text = b"".join(encoding.token_bytes[t] for t in tokens).decode("utf-8", "replace")
        tools = rng.choice(TOOLS)
        body = {"input": "#harmony\n" + text, "tools": tools}
        try:
            streamed = check_stream(stream_events(http, body))
            plain = http.post("/v1/responses", json=body)
            assert plain.status_code == 200, plain.text
            assert _items(plain.json()) == _items(streamed)
            assert streamed["status"] == plain.json()["status"]
            # The echo ends a completion with no stop token "length": a cut.
            stopped = any(s in text for s in ("<|return|>", "<|call|>"))
            check_meaning(streamed, text, "stop" if stopped else "length", tools)
        except Exception as exc:
            raise AssertionError(f"server case {case}: {text!r}") from exc


@pytest.mark.parametrize("seed", [1, 2])
def test_the_generator_is_seeded(seed: int) -> None:
    assert completion(random.Random(seed)) == completion(random.Random(seed))
