"""`trtllm-responses render` and `parse`: the debugging door, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.contract import validate_output_item
from support.paths import ROOT

EXAMPLES = ROOT / "examples"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtllm_responses.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_render_prints_the_harmony_prompt() -> None:
    result = run("render", str(EXAMPLES / "request_tool_call.json"), "--date", "2026-11-21")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("<|start|>system<|message|>") and "Current date: 2026-11-21" in out
    assert "Reasoning: low" in out and "type get_weather = (_: {" in out
    assert (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" in out
    )
    assert out.rstrip("\n").endswith('{"temperature_c": 21}<|end|><|start|>assistant')


def test_render_tokens_prints_ids_that_decode_to_the_prompt() -> None:
    text = run("render", str(EXAMPLES / "request_tool_call.json"), "--date", "2026-11-21").stdout
    ids = json.loads(
        run("render", str(EXAMPLES / "request_tool_call.json"), "--date", "2026-11-21", "--tokens").stdout
    )
    from trtllm_responses.harmony import load_encoding

    assert load_encoding().decode(ids) == text.rstrip("\n")


def test_parse_prints_output_items() -> None:
    result = run("parse", str(EXAMPLES / "completion_tool_call.txt"))
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)
    assert [i["type"] for i in items] == ["reasoning", "message", "function_call"]
    assert items[1]["phase"] == "commentary" and items[2]["arguments"] == '{"city":"Paris"}'
    for item in items:
        validate_output_item(item)


def test_bad_request_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"input": [{"type": "function_call_output", "call_id": "x", "output": "1"}]}')
    result = run("render", str(bad))
    assert result.returncode == 2
    assert "No tool call found" in result.stderr and "Traceback" not in result.stderr
