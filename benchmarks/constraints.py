"""What constraints cost: building a Codex-sized prompt with tools, and compiling its constraint in xgrammar.

A request shaped like Codex's (a dozen function tools with nested parameters, the ``multi_agent_v1``
namespace, ``apply_patch`` as a freeform Lark-grammar tool) is built by the adapter with the
developer-message cache cold (first request of a tool set: schemas rewritten and rendered) and warm
(every later request). Then its constraint is turned into the structural tag TensorRT-LLM gets and
compiled with xgrammar as TensorRT-LLM's XGrammarMatcherFactory does (CPU work the GPU server
does once per distinct constraint; xgrammar caches compiled grammars by their text): for
``tool_choice: "required"``, a structured output, and the grammar-only case.

    python benchmarks/constraints.py [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path
from typing import Any

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.constraints.guided import structural_tag
from trtllm_responses.harmony import load_encoding
from trtllm_responses.request.protocol import parse_request

GRAMMAR_MATCHER = (
    Path(__file__).resolve().parent.parent
    / "tests/fake_trtllm/tensorrt_llm/_torch/pyexecutor/grammar_matcher.py"
)

PATCH_LARK = """
start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?
hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?
filename: /(.+)/
add_line: "+" /(.*)/ LF -> line
change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF
%import common.LF
"""


def function(name: str, n: int) -> dict[str, Any]:
    properties: dict[str, Any] = {
        f"arg{i}": {"type": "string", "description": f"Argument {i} of {name}."} for i in range(n)
    }
    properties["options"] = {
        "type": "object",
        "properties": {"timeout_ms": {"type": "integer"}, "mode": {"enum": ["fast", "safe"]}},
    }
    properties["items"] = {"type": "array", "items": {"$ref": "#/$defs/Item"}}
    return {
        "type": "function",
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": ["arg0"],
            "$defs": {
                "Item": {
                    "type": "object",
                    "properties": {"kind": {"type": "string"}, "path": {"type": "string"}},
                }
            },
        },
    }


def codex_like_tools() -> list[dict[str, Any]]:
    tools = [function(f"tool_{i}", 4) for i in range(10)]
    tools.append(
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": PATCH_LARK},
        }
    )
    tools.append(
        {
            "type": "namespace",
            "name": "multi_agent_v1",
            "description": "Sub-agents.",
            "tools": [function(f"agent_{i}", 2) for i in range(5)],
        }
    )
    tools.append({"type": "web_search"})
    return tools


def timed(fn: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    encoding = load_encoding()
    tools = codex_like_tools()
    body = {"input": "Fix the bug.", "instructions": "You are a coding agent.", "tools": tools}
    results: dict[str, Any] = {}

    def cold() -> None:
        HarmonyAdapter(encoding).build_prompt(parse_request(body))

    warm_adapter = HarmonyAdapter(encoding)
    warm_adapter.build_prompt(parse_request(body))
    results["prompt_cold_ms"] = round(timed(cold, 5), 2)
    results["prompt_warm_ms"] = round(timed(lambda: warm_adapter.build_prompt(parse_request(body)), 20), 2)
    results["prompt_tokens"] = len(warm_adapter.build_prompt(parse_request(body)).token_ids)

    schema = {
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "files": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["summary", "files"],
        "additionalProperties": False,
    }
    cases = {
        "required": {**body, "tool_choice": "required"},
        "structured_output": {
            **body,
            "text": {"format": {"type": "json_schema", "name": "out", "schema": schema, "strict": True}},
        },
        "grammar_only": body,
    }
    try:
        import xgrammar as xgr
    except ImportError:
        xgr = None
    compiler = None
    if xgr is not None:
        # The vocabulary as TensorRT-LLM hands it to xgrammar: the fake's copy of that set-up, loaded by path.
        spec = importlib.util.spec_from_file_location("fake_grammar_matcher", GRAMMAR_MATCHER)
        assert spec is not None and spec.loader is not None
        matcher = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(matcher)
        vocab = matcher.gpt_oss_encoded_vocab(encoding)
        start = time.perf_counter()
        info = xgr.TokenizerInfo(
            vocab,
            vocab_type=xgr.VocabType.BYTE_LEVEL,
            vocab_size=matcher.GPT_OSS_VOCAB_SIZE,
            stop_token_ids=[encoding.return_],
            add_prefix_space=False,
        )
        compiler = xgr.GrammarCompiler(info, cache_enabled=False)
        results["xgrammar_tokenizer_info_ms"] = round((time.perf_counter() - start) * 1000, 1)
    for name, case in cases.items():
        constraint = warm_adapter.build_prompt(parse_request(case)).constraint
        assert constraint is not None, name
        tag = structural_tag(constraint)
        results[f"{name}_tag_bytes"] = len(tag)
        results[f"{name}_tag_build_ms"] = round(timed(lambda c=constraint: structural_tag(c), 20), 3)
        if compiler is not None:
            results[f"{name}_xgrammar_compile_ms"] = round(
                timed(lambda t=tag: compiler.compile_structural_tag(t), 3), 1
            )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key:40s} {value}")


if __name__ == "__main__":
    main()
