"""Property: every constrained response `serve --engine trtllm` gives on the fake TensorRT-LLM parses,
obeys its constraint and finishes, over many seeds.

The fake compiles the structural tag with xgrammar exactly as TensorRT-LLM's XGrammarMatcherFactory
does for gpt-oss (special tokens given to xgrammar as text) and samples as an adversary from the
grammar's full mask (``FAKE_TRTLLM_NOISE``, tests/fake_trtllm/tensorrt_llm/_fake_model.py): at that rate
per step any allowed token (stop tokens and spelled control tokens included), the model's control tokens
spelled in ordinary tokens where the grammar allows it, nothing taken back, ending wherever a stop token
is allowed. So whatever the constraint lets through, a real model could write, and the server must read:
0 responses the reader rejects (``completed``, no control-token text left in the output), 0 JSON failing
its schema, 0 tool inputs cut (outside their grammar) or holding a control token.

Constraint kinds: a JSON-schema text format, ``tool_choice: required``, a named function, an MCP
server's tools, a built-in tool (python), and custom tools with a Lark grammar and with a regex.
``GUIDED_PROPERTY_SEEDS`` (default 20) sets the seeds per kind; ``make test`` runs the default and
``make guided-matrix`` 40 (``GUIDED_MATRIX_SEEDS``) on the other xgrammar releases TensorRT-LLM pins.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from support.checkpoints import make_checkpoint
from support.custom_tools import APPLY_PATCH, PATCH_LARK, TICKET
from support.lazy import lazy_import
from support.mcp_server import MCPTestServer
from support.trtllm_harness import Served

xgr = lazy_import("xgrammar")  # support/lazy.py: not at collection (torch)

SEEDS = int(os.environ.get("GUIDED_PROPERTY_SEEDS", "20"))
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "code": {"type": "string", "maxLength": 6},
        "days": {"type": "integer", "minimum": 0},
        "mode": {"enum": ["train", "bus"]},
        "stops": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "code", "days", "mode", "stops"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather now",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
OTHER = {"type": "function", "name": "other", "parameters": {"type": "object", "properties": {}}}
PATCH = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"

KINDS: dict[str, dict[str, Any]] = {
    "json_format": {
        "input": "Plan a trip",
        "text": {"format": {"type": "json_schema", "name": "trip", "schema": SCHEMA, "strict": True}},
    },
    "required": {"input": "Paris", "tools": [WEATHER, OTHER], "tool_choice": "required"},
    "named_function": {
        "input": "Paris",
        "tools": [WEATHER, OTHER],
        "tool_choice": {"type": "function", "name": "get_weather"},
    },
    "mcp_choice": {
        "input": "hi",
        "tools": [
            {"type": "mcp", "server_label": "demo", "require_approval": "never", "allowed_tools": ["add"]}
        ],
        "tool_choice": {"type": "mcp", "server_label": "demo"},
    },
    "builtin_choice": {
        "input": "call python print(6 * 7)",
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
        "tool_choice": {"type": "code_interpreter"},
    },
    "lark_tool": {
        "input": f"call apply_patch {PATCH}",
        "tools": [APPLY_PATCH],
        "tool_choice": {"type": "custom", "name": "apply_patch"},
    },
    "regex_tool": {
        "input": "call ticket ABC-123",
        "tools": [TICKET],
        "tool_choice": {"type": "custom", "name": "ticket"},
    },
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mcp: MCPTestServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("guided")
    ckpt = make_checkpoint(tmp)
    server = Served(
        [
            str(ckpt),
            "--engine",
            "trtllm",
            "--python_tool",
            "local",
            "--tool_server",
            f"demo={mcp.url}",
            "--tool_timeout",
            "30",
        ],
        tmp / "trtllm.log",
        # A release whose sampler applies a request's seed (1.3.0rc29 on; on 1.1-1.2.x the server refuses it).
        {"FAKE_TRTLLM_NOISE": "0.3", "FAKE_TRTLLM_VERSION": "1.4.0rc1"},
    )
    yield server
    out = server.stop()
    assert "Traceback" not in out, out


def _matches_lark(text: str) -> bool:
    """Whether ``text`` is in the Lark grammar's language, by xgrammar over our Lark → EBNF conversion."""
    from xgrammar.testing import _is_grammar_accept_string

    from trtllm_responses.constraints.grammars import lark_to_ebnf

    return bool(_is_grammar_accept_string(lark_to_ebnf(PATCH_LARK), text))


def _check(kind: str, response: dict[str, Any]) -> None:
    assert response["status"] == "completed", response.get("error") or response.get("incomplete_details")
    output = response["output"]
    dumped = json.dumps(output, ensure_ascii=False)
    assert "<|" not in dumped, f"a control token's text stands in the output: {dumped[:400]}"
    calls = [item for item in output if item["type"] not in ("reasoning", "message")]
    if kind == "json_format":  # only reasoning precedes the answer: output_text is the JSON
        assert [item["type"] for item in output if item["type"] != "reasoning"] == ["message"], output
        jsonschema.validate(json.loads(response["output"][-1]["content"][0]["text"]), SCHEMA)
    elif kind in ("required", "named_function"):
        call = next(item for item in calls if item["type"] == "function_call")
        arguments = json.loads(call["arguments"])
        if call["name"] == "get_weather":
            jsonschema.validate(arguments, WEATHER["parameters"])
        else:
            assert kind == "required" and call["name"] == "other" and isinstance(arguments, dict)
    elif kind == "mcp_choice":
        call = next(item for item in calls if item["type"] == "mcp_call")
        assert call["server_label"] == "demo" and call["name"] == "add"
        assert isinstance(json.loads(call["arguments"]), dict)
    elif kind == "builtin_choice":
        assert any(item["type"] == "code_interpreter_call" for item in calls)
    elif kind == "regex_tool":
        call = next(item for item in calls if item["type"] == "custom_tool_call")
        assert re.fullmatch(TICKET["format"]["definition"], call["input"]), call["input"]
    elif kind == "lark_tool":
        call = next(item for item in calls if item["type"] == "custom_tool_call")
        assert _matches_lark(call["input"]), call["input"]


@pytest.mark.parametrize("seed", range(SEEDS))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_constrained_responses_parse_obey_and_finish(served: Served, kind: str, seed: int) -> None:
    body = {**KINDS[kind], "seed": seed, "max_output_tokens": 2000}
    with httpx.Client(base_url=served.url, timeout=120) as client:
        response = client.post("/v1/responses", json=body).json()
    sampled = served.records("sampled")
    try:
        _check(kind, response)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe engine wrote: {sampled[-1] if sampled else None!r}") from None


def test_the_sampler_explores(served: Served) -> None:
    """The adversary is real: across the seeds the fake drew from the mask, spelled control tokens the grammar
    let it spell, and re-planned after what it drew. Its own requests (every kind, a few seeds): under ``-n``
    this test is a unit of its own, its server not the one the other tests of the module sent theirs to."""
    with httpx.Client(base_url=served.url, timeout=120) as client:
        for kind in sorted(KINDS):
            for seed in range(3):
                body = {**KINDS[kind], "seed": 1000 + seed, "max_output_tokens": 2000}
                assert client.post("/v1/responses", json=body).status_code == 200
    plans = [r["text"] for r in served.records("plan")]
    generated = served.records("generate")
    assert generated and all(not r["sampling"]["greedy"] for r in generated)
    assert len(set(plans)) > 1
    sampled = served.records("sampled")
    assert sum(r["drawn"] for r in sampled) > len(sampled)
    assert sum(r["spelled"] for r in sampled) > 0 and sum(r["replanned"] for r in sampled) > 0
