"""Codex CLI (``@openai/codex`` from npm), configured with nothing but a model provider, against the echo server.

Each run is a real ``codex exec`` subprocess talking to a test server on loopback: a plain answer,
an ``exec_command`` round trip, a ``multi_agent_v1`` namespace call, an ``apply_patch`` freeform edit
(the catalog entry offers it as freeform), ``--output-schema``, and an MCP tool reached through Codex's
``tool_search`` (over HTTP and over the WebSocket mode); each must exit 0 with the expected result. Skipped when no Codex binary is installed (``make test`` installs one under ``.codex-cli/``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from support.codex_harness import CODEX, codex, write_codex_home

pytestmark = pytest.mark.skipif(
    CODEX is None, reason="Codex CLI is not installed (make test installs it with npm)"
)


@pytest.fixture(scope="module")
def codex_home(echo_server, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("codex-home")
    write_codex_home(home, echo_server.base_url)
    return home


def test_plain_answer(codex_home: Path, tmp_path: Path) -> None:
    assert "lorem ipsum dolor" in codex(codex_home, tmp_path, "#lorem 8")


def test_exec_command_round_trip(codex_home: Path, tmp_path: Path) -> None:
    out = codex(codex_home, tmp_path, 'call exec_command {"cmd":"echo round-trip-ok"}')
    assert "exec_command returned:" in out and "round-trip-ok" in out


def test_multi_agent_namespace_call(codex_home: Path, tmp_path: Path) -> None:
    out = codex(
        codex_home,
        tmp_path,
        'call multi_agent_v1.spawn_agent {"task_name":"helper","message":"#lorem 5"}',
        transcript=True,
    )
    # The spawn's output comes back to the model; the sub-agent's later notification may start another turn.
    assert "multi_agent_v1.spawn_agent returned:" in out and "agent_id" in out


def test_apply_patch_freeform_edit(codex_home: Path, tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello from apply_patch\n*** End Patch\n"
    out = codex(codex_home, tmp_path, f"call apply_patch {patch}")
    assert "apply_patch returned:" in out
    assert (tmp_path / "hello.txt").read_text() == "hello from apply_patch\n"


def test_output_schema(codex_home: Path, tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    out = codex(codex_home, tmp_path, "--output-schema", str(tmp_path / "schema.json"), "Lyon")
    assert json.loads(out.strip().splitlines()[-1]) == {"city": "Lyon", "days": 1}


def test_goal_created_then_read(codex_home: Path, tmp_path: Path) -> None:
    """Codex's default ``goals`` feature: after ``create_goal`` Codex sends the objective back as a
    ``function_call_output`` with ``name``/``namespace`` and no ``call_id``; the model reads it from
    ``agent.goal_objective``, and a resumed session reads the goal with ``get_goal``."""
    created = codex(codex_home, tmp_path, 'call create_goal {"objective":"write a haiku about tides"}')
    assert "agent.goal_objective returned: write a haiku about tides" in created
    read = codex(codex_home, tmp_path, "resume", "--last", "call get_goal {}")
    assert "get_goal returned:" in read
    goal = json.loads(read.strip().splitlines()[-1].removeprefix("get_goal returned: "))
    assert goal["goal"]["objective"] == "write a haiku about tides" and goal["goal"]["status"] == "active"


def test_browser_call_nobody_runs_still_ends_with_the_answer(codex_home: Path, tmp_path: Path) -> None:
    """Web search off (in Codex and on the server), the model calls gpt-oss's browser anyway, then answers.

    The server answers the call to the model (a failed ``web_search_call``) and generates again in the
    same response: the turn ends with the answer instead of dead-ending on a call nobody ran.
    """
    script = (
        "#steps\n#harmony\n<|channel|>analysis<|message|>Search for tides.<|end|><|start|>assistant"
        '<|channel|>analysis to=browser.search code<|message|>{"query": "spring tides"}<|call|>\n'
        "---\nSpring tides follow the new and full moon."
    )
    out = codex(codex_home, tmp_path, "-c", 'web_search="disabled"', script)
    assert "Spring tides follow the new and full moon." in out


def test_reasoning_summaries_are_shown(echo_server, codex_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Codex asks for reasoning summaries (``reasoning.summary: auto``) by default and shows them: with
    nothing but a provider configured (fallback metadata), and with the catalog entry (it says gpt-oss
    supports them). The echo's summary of ``Writing 5 tokens.`` is ``Summary: Writing 5 tokens.``"""
    bare = tmp_path / "provider-only"
    bare.mkdir()
    (bare / "config.toml").write_text(
        f'''model = "gpt-oss"
model_provider = "trtllm"

[model_providers.trtllm]
name = "trtllm-responses"
base_url = "{echo_server.base_url}/v1"
wire_api = "responses"
'''
    )
    for home in (bare, codex_home):
        out = codex(home, tmp_path, "#lorem 5", transcript=True)
        assert "Summary: Writing 5 tokens." in out, out[-2000:]
        assert "lorem ipsum dolor sit amet" in out


# -- Codex's tool_search: MCP tools it defers, reached through a search (issue 32) -------------------


@pytest.fixture(scope="module")
def search_home(echo_server, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("codex-search-home")
    write_codex_home(home, echo_server.base_url, search=True)
    return home


def test_tool_search_reaches_an_mcp_tool(search_home: Path, tmp_path: Path) -> None:
    """With ``tool_search`` on, Codex defers its MCP tools (they are not in ``tools``) and sends a client-run
    ``tool_search``. The echo's ``#search harbour`` calls it; Codex searches its deferred tools and answers with
    a ``tool_search_output`` holding the MCP server's namespace; the echo calls the tool found; Codex runs it on
    the MCP server and the model reads its result."""
    out = codex(search_home, tmp_path, "#search harbour", transcript=True)
    assert "Calling tool_search." in out and "mcp: notes/harbour_note (completed)" in out, out[-3000:]
    assert "mcp__notes.harbour_note returned:" in out and "tides at dawn" in out


def test_tool_search_over_websocket(
    echo_server,
    search_home: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    """The same session over the Responses WebSocket mode (the provider's ``supports_websockets``)."""
    home = tmp_path / "home"
    home.mkdir()
    write_codex_home(home, echo_server.base_url, search=True, websocket=True)
    work = tmp_path / "work"
    work.mkdir()
    with caplog.at_level(logging.DEBUG, logger="trtllm_responses.server.websocket"):
        out = codex(home, work, "#search harbour", transcript=True)
    assert "mcp__notes.harbour_note returned:" in out and "tides at dawn" in out, out[-3000:]
    assert any("WebSocket connection opened" in r.getMessage() for r in caplog.records)
