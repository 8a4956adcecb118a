"""The GPU path's constraint, proven on CPU with the library TensorRT-LLM uses: xgrammar.

The structural tag the TensorRT-LLM executor hands to ``SamplingParams(guided_decoding=...)``
is compiled exactly as TensorRT-LLM's ``XGrammarMatcherFactory`` compiles it
(``_torch/pyexecutor/grammar_matcher.py``): ``xgrammar.TokenizerInfo(encoded_vocab,
vocab_type, vocab_size=vocab_size_padded, stop_token_ids=...)`` then
``GrammarCompiler.compile_structural_tag(guide)``. The vocabulary is set up as
``_xgrammar_tokenizer_info`` (``llmapi/tokenizer.py``) does for gpt-oss's Hugging Face
tokenizer: ``get_vocab()`` sorted by id (byte-level BPE strings: each byte through GPT-2's
byte-to-unicode table; special tokens as their literal text), ``stop_token_ids =
[tokenizer.eos_token_id]`` (gpt-oss: ``<|return|>``), vocab type BYTE_LEVEL as
``_detect_metadata_from_hf`` reads from gpt-oss's ByteLevel decoder, and the model's
padded vocabulary size, 201088.

Then the echo executor's completion for the same request is fed token by token: it must
be accepted (and, where it ends with ``<|return|>``, terminate the grammar), while
completions that break the constraint are rejected.
"""

from __future__ import annotations

import json
from typing import Any

from support.custom_tools import APPLY_PATCH, TICKET
from support.lazy import lazy_import

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.constraints.base import Constraint
from trtllm_responses.constraints.guided import structural_tag
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request

xgr = lazy_import("xgrammar")  # support/lazy.py: not at collection (torch)


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
OTHER = {"type": "function", "name": "other", "parameters": {"type": "object", "properties": {}}}
TRIP_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "stops": {
            "type": "array",
            "minItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "mode": {"enum": ["train", "bus"]},
                    "nights": {"type": ["integer", "null"]},
                },
                "required": ["city", "mode", "nights"],
                "additionalProperties": False,
            },
        },
        "budget": {"anyOf": [{"type": "number", "minimum": 10}, {"type": "null"}]},
        "notes": {"type": "string"},  # optional: not in required (so the format is not strict)
    },
    "required": ["name", "stops", "budget"],
    "additionalProperties": False,
}
TRIP_FORMAT = {"format": {"type": "json_schema", "name": "trip", "schema": TRIP_SCHEMA}}


def _constraint(adapter: HarmonyAdapter, body: dict[str, Any]) -> tuple[list[int], Constraint]:
    prompt = adapter.build_prompt(parse_request(body))
    assert prompt.constraint is not None
    return prompt.token_ids, prompt.constraint


def _run(compiler: Any, constraint: Constraint, tokens: list[int], stop: int) -> str:
    """``accepted`` (and ``terminated`` when it ended at the stop token), or where it was rejected."""
    matcher = xgr.GrammarMatcher(compiler.compile_structural_tag(structural_tag(constraint)))
    for i, token in enumerate(tokens):
        if not matcher.accept_token(token):
            return f"rejected at {i}"
    return "terminated" if tokens[-1] == stop and matcher.is_terminated() else "accepted"


def _harmony(encoding: HarmonyEncoding, text: str) -> list[int]:
    return encoding.encode(text)


def test_structured_output_nested_schema(
    compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    prompt, constraint = _constraint(adapter, {"input": "Plan it", "text": TRIP_FORMAT, "tools": [WEATHER]})
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    final = encoding.decode(completion).split("<|channel|>final<|message|>")[1].removesuffix("<|return|>")
    assert json.loads(final) == {
        "name": "Plan it",
        "stops": [{"city": "Plan it", "mode": "train", "nights": 0}] * 2,
        "budget": 10,
    }
    assert _run(compiler, constraint, completion, encoding.return_) == "terminated"
    analysis = "<|channel|>analysis<|message|>Thinking.<|end|><|start|>assistant"
    bad = {
        "prose": "<|channel|>final<|message|>Here is your trip.<|return|>",
        "missing field": '<|channel|>final<|message|>{"name":"a","stops":[]}<|return|>',
        "enum": '<|channel|>final<|message|>{"name":"a","stops":[{"city":"x","mode":"car","nights":1}',
        "too few items": '<|channel|>final<|message|>{"name":"a","stops":[{"city":"x","mode":"bus","nights":1}],',
        "text after the JSON": '<|channel|>final<|message|>{"name":"a","stops":[],"budget":null} ok',
    }
    for name, text in bad.items():
        assert _run(compiler, constraint, _harmony(encoding, analysis + text), encoding.return_).startswith(
            "rejected"
        ), name
    with_notes = analysis + (
        '<|channel|>final<|message|>{"name":"a","stops":[{"city":"x","mode":"bus","nights":null},'
        '{"city":"y","mode":"train","nights":2}],"budget":null,"notes":"window seat"}<|return|>'
    )
    assert _run(compiler, constraint, _harmony(encoding, with_notes), encoding.return_) == "terminated"
    # A call to a declared tool is still allowed under structured output (auto tool choice).
    call = (
        analysis
        + '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"x"}<|call|>'
    )
    assert _run(compiler, constraint, _harmony(encoding, call), encoding.return_) == "accepted"


def test_required_call(compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    prompt, constraint = _constraint(
        adapter, {"input": "Paris", "tools": [WEATHER, OTHER], "tool_choice": "required"}
    )
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    assert "to=functions.get_weather" in encoding.decode(completion)
    assert _run(compiler, constraint, completion, encoding.return_) == "accepted"
    answer = "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>"
    assert _run(compiler, constraint, _harmony(encoding, answer), encoding.return_).startswith("rejected")
    ended = "<|channel|>analysis<|message|>Easy.<|end|><|return|>"
    assert _run(compiler, constraint, _harmony(encoding, ended), encoding.return_).startswith("rejected")


def test_named_tool(compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    body = {"input": "Paris", "tools": [WEATHER, OTHER], "tool_choice": {"type": "function", "name": "other"}}
    prompt, constraint = _constraint(adapter, body)
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    assert "to=functions.other" in encoding.decode(completion)
    assert _run(compiler, constraint, completion, encoding.return_) == "accepted"
    wrong = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"x"}<|call|>'
    assert _run(compiler, constraint, _harmony(encoding, wrong), encoding.return_).startswith("rejected")


def test_lark_grammar(compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"
    prompt, constraint = _constraint(
        adapter, {"input": f"call apply_patch {patch}", "tools": [APPLY_PATCH, WEATHER]}
    )
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    assert _run(compiler, constraint, completion, encoding.return_) == "accepted"
    # Free answers stay free when only a custom tool's grammar constrains.
    _, echo = _constraint(adapter, {"input": "Hi", "tools": [APPLY_PATCH]})
    plain = EchoExecutor(encoding).plan(adapter.build_prompt(parse_request({"input": "Hi"})).token_ids)
    assert _run(compiler, echo, plain, encoding.return_) == "terminated"
    broken = "<|channel|>commentary to=functions.apply_patch<|message|>*** Begin Patch\nrm -rf /\n<|call|>"
    assert _run(compiler, constraint, _harmony(encoding, broken), encoding.return_).startswith("rejected")
    # Functions without a strict schema share one tag: any declared recipient, any JSON object.
    _, several = _constraint(adapter, {"input": "Hi", "tools": [APPLY_PATCH, WEATHER, OTHER]})
    other = "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.other <|constrain|>json<|message|>{}<|call|>"
    assert _run(compiler, several, _harmony(encoding, other), encoding.return_) == "accepted"
    nope = other.replace("functions.other", "functions.nope")
    assert _run(compiler, several, _harmony(encoding, nope), encoding.return_).startswith("rejected")


def test_regex_grammar(compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    prompt, constraint = _constraint(adapter, {"input": "call ticket ABC-123", "tools": [TICKET]})
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    assert "ABC-123<|call|>" in encoding.decode(completion)
    assert _run(compiler, constraint, completion, encoding.return_) == "accepted"
    wrong = "<|channel|>commentary to=functions.ticket<|message|>abc-1<|call|>"
    assert _run(compiler, constraint, _harmony(encoding, wrong), encoding.return_).startswith("rejected")


CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
MCP_NAMESPACE = {
    "name": "demo",
    "description": "A demo server",
    "tools": [
        {
            "name": "relay",
            "description": "Echo",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    ],
}
BUILTIN = {"python": "Run python.", "browser": "Browse."}
ANSWER = (
    "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>"
)
THINK = "<|channel|>analysis<|message|>Let me run it.<|end|><|start|>assistant"


def _server_constraint(
    adapter: HarmonyAdapter, body: dict[str, Any], namespaces: Any = ()
) -> tuple[list[int], Constraint]:
    prompt = adapter.build_prompt(parse_request(body), namespaces=namespaces, builtin=BUILTIN)
    assert prompt.constraint is not None
    return prompt.token_ids, prompt.constraint


def test_forced_python_call(compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    body = {
        "input": "print(6 * 7)",
        "tools": [CODE_TOOL, WEATHER],
        "tool_choice": {"type": "code_interpreter"},
    }
    prompt, constraint = _server_constraint(adapter, body)
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    assert encoding.decode(completion).endswith(
        "<|channel|>analysis to=python code<|message|>print(6 * 7)<|call|>"
    )
    assert _run(compiler, constraint, completion, encoding.return_) == "accepted"
    # gpt-oss also writes the recipient first (as Harmony renders a call in history).
    first = THINK + " to=python<|channel|>analysis code<|message|>import math\nprint(math.pi)<|call|>"
    assert _run(compiler, constraint, _harmony(encoding, first), encoding.return_) == "accepted"
    refused = {
        "an answer": ANSWER,
        "a function call": THINK
        + '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"x"}<|call|>',
        "another built-in tool": THINK
        + '<|channel|>analysis to=browser.search code<|message|>{"query":"x"}<|call|>',
        "python in the wrong channel": THINK
        + "<|channel|>commentary to=python code<|message|>print(1)<|call|>",
    }
    for name, text in refused.items():
        assert _run(compiler, constraint, _harmony(encoding, text), encoding.return_).startswith(
            "rejected"
        ), name


def test_forced_browser_call(compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    body = {
        "input": "spring tides",
        "tools": [{"type": "web_search"}, CODE_TOOL],
        "tool_choice": {"type": "web_search"},
    }
    prompt, constraint = _server_constraint(adapter, body)
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    assert encoding.decode(completion).endswith(
        '<|channel|>analysis to=browser.search code<|message|>{"query":"spring tides"}<|call|>'
    )
    assert _run(compiler, constraint, completion, encoding.return_) == "accepted"
    opened = THINK + '<|channel|>analysis to=browser.open code<|message|>{"id": 3, "cursor": 1}<|call|>'
    assert _run(compiler, constraint, _harmony(encoding, opened), encoding.return_) == "accepted"
    for text in (
        ANSWER,
        THINK + "<|channel|>analysis to=python code<|message|>print(1)<|call|>",
        THINK + "<|channel|>analysis to=browser.search code<|message|>not json<|call|>",
    ):
        assert _run(compiler, constraint, _harmony(encoding, text), encoding.return_).startswith(
            "rejected"
        ), text


def test_forced_mcp_call(compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding) -> None:
    body = {"input": "hi", "tools": [WEATHER], "tool_choice": {"type": "mcp", "server_label": "demo"}}
    prompt, constraint = _server_constraint(adapter, body, namespaces=[MCP_NAMESPACE])
    completion = EchoExecutor(encoding).plan(prompt, constraint=constraint)
    assert "to=demo.relay" in encoding.decode(completion)
    assert _run(compiler, constraint, completion, encoding.return_) == "accepted"
    wrong = (
        THINK
        + '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"x"}<|call|>'
    )
    assert _run(compiler, constraint, _harmony(encoding, wrong), encoding.return_).startswith("rejected")


def test_structured_output_lets_server_run_tools_be_called(
    compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """A format constrains the answer, not the way to it: python, the browser and MCP tools stay callable."""
    body = {"input": "Plan it", "tools": [CODE_TOOL, {"type": "web_search"}], "text": TRIP_FORMAT}
    _, constraint = _server_constraint(adapter, body, namespaces=[MCP_NAMESPACE])
    calls = {
        "python": "<|channel|>analysis to=python code<|message|>print(1)<|call|>",
        "browser": '<|channel|>analysis to=browser.find code<|message|>{"pattern":"tide"}<|call|>',
        "mcp": '<|channel|>commentary to=demo.relay <|constrain|>json<|message|>{"text":"x"}<|call|>',
    }
    for name, call in calls.items():
        assert _run(compiler, constraint, _harmony(encoding, THINK + call), encoding.return_) == "accepted", (
            name
        )
    unknown = THINK + "<|channel|>analysis to=container.exec code<|message|>ls<|call|>"
    assert _run(compiler, constraint, _harmony(encoding, unknown), encoding.return_).startswith("rejected")


def test_custom_grammar_with_built_in_tools(
    compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """Triggered tags (only a custom tool's grammar constrains) must not block the built-in tools' calls."""
    _, constraint = _server_constraint(adapter, {"input": "Hi", "tools": [TICKET, CODE_TOOL]})
    assert constraint.final == "text"
    for call in (
        "<|channel|>analysis to=python code<|message|>print(1)<|call|>",
        " to=python<|channel|>analysis code<|message|>print(1)<|call|>",
        "<|channel|>commentary to=functions.ticket<|message|>ABC-12<|call|>",
    ):
        assert _run(compiler, constraint, _harmony(encoding, THINK + call), encoding.return_) == "accepted", (
            call
        )
    wrong = THINK + "<|channel|>commentary to=functions.ticket<|message|>nope<|call|>"
    assert _run(compiler, constraint, _harmony(encoding, wrong), encoding.return_).startswith("rejected")


def test_required_call_is_required_once(adapter: HarmonyAdapter) -> None:
    body = {"input": "x", "tools": [CODE_TOOL], "tool_choice": "required", "text": TRIP_FORMAT}
    _, constraint = _server_constraint(adapter, body)
    assert constraint.call_required and [c.recipient for c in constraint.calls] == ["python"]
    after = constraint.after_call()
    assert after is not None and after.final == "json" and after.schema == TRIP_SCHEMA
    _, free = _server_constraint(adapter, {"input": "x", "tools": [CODE_TOOL], "tool_choice": "required"})
    assert free.after_call() is None


def test_text_that_says_to_equals_is_not_taken_for_a_call(
    compiler: Any, adapter: HarmonyAdapter, encoding: HarmonyEncoding
) -> None:
    """With only a custom tool's grammar (Codex's apply_patch on every request), prose and code stay free.

    gpt-oss's recipient-first header begins `` to=``; ordinary text holds it too. A constraint that
    watched for it anywhere (xgrammar's triggered tags) would force a call header into the middle of
    ``send(msg, to=addr)``.
    """
    _, constraint = _constraint(adapter, {"input": "Hi", "tools": [TICKET]})
    assert constraint.final == "text"
    free = (
        "<|channel|>analysis<|message|>Call send(msg, to=addr) first.<|end|><|start|>assistant"
        "<|channel|>final<|message|>Use send(msg, to=addr), then redirect to=home.<|return|>"
    )
    assert _run(compiler, constraint, _harmony(encoding, free), encoding.return_) == "terminated"
    first = " to=functions.ticket<|channel|>commentary<|message|>ABC-12<|call|>"
    assert _run(compiler, constraint, _harmony(encoding, first), encoding.return_) == "accepted"
    for wrong in (
        " to=functions.nope<|channel|>commentary<|message|>ABC-12<|call|>",  # not a declared tool
        THINK + " to=functions.ticket<|channel|>commentary<|message|>nope<|call|>",  # its grammar
        "<|channel|>final<|message|>Done.<|end|><|start|>assistant<|channel|>final<|message|>again",
    ):
        assert _run(compiler, constraint, _harmony(encoding, wrong), encoding.return_).startswith(
            "rejected"
        ), wrong
