"""Stateless replay of server-run tool items: the tool-read carrier (sealing.py).

A client that keeps no server state (``store: false``) sends the output items back
as input. The model read more of a server-run tool item than the client is shown
(a web_search_call's page text and page stack, a code_interpreter_call's outputs not
included), so when encrypted reasoning is asked for, the server follows such an
item with a reasoning item sealing the rest. These tests drive a real server on
loopback (the echo executor records every generation's prompt) and check that a
replay, with ids (openai SDK, Agents SDK) or stripped to what Codex CLI keeps,
renders exactly the prompt of the same continuation through ``previous_response_id``;
and that real clients (the Agents SDK, a Codex CLI session) read the pages in a later turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.search_site import WEB_TOOL
from support.server_harness import (
    RecordingEcho,
    RunningServer,
    ServerFactory,
    steps,
    stream_events,
)
from support.stream_grammar import check_stream

from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.tools.settings import PythonLimits, ToolSettings

ENCRYPTED = ["reasoning.encrypted_content"]
CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
# search → open result 0 (cursor 1) → find "moon" in it (cursor 2) → answer.
FIRST = steps(
    'call browser.search {"query": "tides"}',
    'call browser.open {"id": 0}',
    'call browser.find {"pattern": "moon"}',
    "Found it.",
)
# A later turn that needs the first response's page stack: link 0 of cursor 1, then a find in cursor 1.
SECOND = steps(
    'call browser.open {"id": 0, "cursor": 1}',
    'call browser.find {"pattern": "gravity", "cursor": 1}',
    "Neap 【3†L0】.",
)


@pytest.fixture(scope="module")
def server_options(site: str, encoding: HarmonyEncoding) -> dict[str, Any]:
    settings = ToolSettings(
        browser_backend=f"searxng:{site}",
        fetch_allow_private=("127.0.0.1",),
        python_tool="local",
        python_limits=PythonLimits(timeout=3.0, cpu_seconds=1, memory_bytes=256 << 20, output_bytes=2000),
        tool_timeout=20.0,
    )
    return {"executor": RecordingEcho(encoding), "tools": settings}


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def streamed(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    return check_stream(stream_events(http, body))


def prompts_of(
    server: RunningServer, http: httpx.Client, body: dict[str, Any]
) -> tuple[list[list[int]], dict[str, Any]]:
    """Every generation's prompt token ids for one (streamed) response, and the response."""
    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    executor.requests.clear()
    response = streamed(http, body)
    return [list(r.prompt_token_ids) for r in executor.requests], response


def is_carrier(item: dict[str, Any]) -> bool:
    return item["type"] == "reasoning" and str(item.get("encrypted_content", "")).startswith("v1z.")


def codex_view(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as Codex CLI sends it back: no ids, only the fields its ResponseItem types know."""
    keep = {
        "message": ("type", "role", "content"),
        "reasoning": ("type", "summary", "content", "encrypted_content"),
        "web_search_call": ("type", "status", "action"),
    }[item["type"]]
    out = {k: item[k] for k in keep if k in item}
    if "action" in out:
        out["action"] = {k: v for k, v in out["action"].items() if k != "sources"}
    return out


def test_browser_stateless_replay_equals_the_stored_continuation(
    server: RunningServer, http: httpx.Client, site: str
) -> None:
    user = {"role": "user", "content": FIRST}
    first = streamed(http, {"input": [user], "tools": [WEB_TOOL], "include": ENCRYPTED})
    output = first["output"]
    kinds = [i["type"] for i in output]
    calls = [i for i, item in enumerate(output) if item["type"] == "web_search_call"]
    assert len(calls) == 3 and all(output[i]["status"] == "completed" for i in calls)
    for i in calls:  # each run call is followed by its carrier, which carries no readable text
        assert is_carrier(output[i + 1]), kinds
        assert output[i + 1]["summary"] == [] and not output[i + 1].get("content")
        assert "model_read" not in output[i] and "browser_page" not in output[i]
    assert "Tides are the rise" not in str(output), "the page text is sealed, not shown"

    follow = {"role": "user", "content": SECOND}
    stored, via_id = prompts_of(
        server,
        http,
        {"input": [follow], "previous_response_id": first["id"], "tools": [WEB_TOOL], "include": ENCRYPTED},
    )
    opened = [i for i in via_id["output"] if i["type"] == "web_search_call"]
    assert [c["status"] for c in opened] == ["completed", "completed"]
    assert opened[0]["action"]["url"] == f"{site}/neap", "link 0 of cursor 1, a page of the first response"
    assert opened[1]["action"] == {"type": "find_in_page", "url": f"{site}/tides", "pattern": "gravity"}
    assert len(stored) == 3

    stateless = {"tools": [WEB_TOOL], "include": ENCRYPTED, "store": False}
    sdk, replayed = prompts_of(server, http, {**stateless, "input": [user, *output, follow]})
    assert sdk == stored, (
        "the openai / Agents SDK replay (ids kept) renders the stored prompts, token for token"
    )
    assert [i.get("action") for i in replayed["output"] if i["type"] == "web_search_call"] == [
        c["action"] for c in opened
    ]
    assert replayed["output"][-1]["content"][0]["text"] == via_id["output"][-1]["content"][0]["text"]

    codex_input = [codex_view(user | {"type": "message"}), *map(codex_view, output), follow]
    assert not any("id" in item for item in codex_input)
    codex, _ = prompts_of(server, http, {**stateless, "input": codex_input})
    assert codex == stored, "the Codex replay (no ids, unknown fields dropped) renders the same prompts"

    # Without the carriers the replay reads less: the test can tell the difference.
    bare, _ = prompts_of(
        server, http, {**stateless, "input": [user, *(i for i in output if not is_carrier(i)), follow]}
    )
    assert bare[0] != stored[0] and len(bare[0]) < len(stored[0])


def test_python_outputs_not_included_replay_equals_the_stored_continuation(
    server: RunningServer, http: httpx.Client
) -> None:
    user = {"role": "user", "content": "call python print(6 * 7)"}
    first = streamed(http, {"input": [user], "tools": [CODE_TOOL], "include": ENCRYPTED})
    output = first["output"]
    call = next(i for i, item in enumerate(output) if item["type"] == "code_interpreter_call")
    assert output[call]["outputs"] is None, "outputs are not shown unless included"
    assert is_carrier(output[call + 1])
    assert output[-1]["content"][0]["text"] == "python returned: 42\n"
    follow = {"role": "user", "content": "#prompt"}
    stored, _ = prompts_of(
        server,
        http,
        {"input": [follow], "previous_response_id": first["id"], "tools": [CODE_TOOL], "include": ENCRYPTED},
    )
    replay = {"input": [user, *output, follow], "tools": [CODE_TOOL], "include": ENCRYPTED, "store": False}
    stateless, response = prompts_of(server, http, replay)
    assert stateless == stored
    assert "42" in response["output"][-1]["content"][0]["text"], "the model read python's answer"


def test_python_outputs_included_need_no_carrier(http: httpx.Client) -> None:
    include = [*ENCRYPTED, "code_interpreter_call.outputs"]
    body = {"input": "call python print(1)", "tools": [CODE_TOOL], "include": include}
    output = streamed(http, body)["output"]
    assert output[1]["type"] == "code_interpreter_call" and output[1]["outputs"]
    assert not any(is_carrier(item) for item in output), "the client sees everything the model read"


def test_no_carrier_without_encrypted_reasoning(http: httpx.Client) -> None:
    output = streamed(http, {"input": FIRST, "tools": [WEB_TOOL]})["output"]
    assert [i["type"] for i in output] == ["reasoning", "web_search_call"] * 3 + ["reasoning", "message"]
    assert not any("encrypted_content" in item for item in output)
    output = streamed(http, {"input": "call python print(1)", "tools": [CODE_TOOL], "store": False})["output"]
    assert [i["type"] for i in output] == ["reasoning", "code_interpreter_call", "reasoning", "message"]
    assert not any("encrypted_content" in item for item in output)


def _tampered(blob: str) -> str:
    return blob[:-6] + ("AAAAAA" if not blob.endswith("AAAAAA") else "BBBBBB")


def test_tampered_carrier_is_refused_and_a_misplaced_one_is_ignored(
    server: RunningServer, http: httpx.Client
) -> None:
    user = {"role": "user", "content": steps('call browser.search {"query": "tides"}', "ok")}
    output = streamed(http, {"input": [user], "tools": [WEB_TOOL], "include": ENCRYPTED, "store": False})[
        "output"
    ]
    assert [i["type"] for i in output] == [
        "reasoning",
        "web_search_call",
        "reasoning",
        "reasoning",
        "message",
    ]
    carrier = output[2]
    assert is_carrier(carrier)
    follow = {"role": "user", "content": "#prompt"}
    base = {"tools": [WEB_TOOL], "include": ENCRYPTED, "store": False}

    bad = [
        user,
        *output[:2],
        {**carrier, "encrypted_content": _tampered(carrier["encrypted_content"])},
        follow,
    ]
    refused = http.post("/v1/responses", json={**base, "input": bad})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid_encrypted_content" and error["param"] == "input[3].encrypted_content"

    # A carrier relabelled as ordinary reasoning (or the reverse) does not open either: the kind is sealed.
    relabelled = {**carrier, "encrypted_content": "v1." + carrier["encrypted_content"][4:]}
    refused = http.post("/v1/responses", json={**base, "input": [user, *output[:2], relabelled, follow]})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "input[3].encrypted_content"

    # After another item type (the client dropped the call), it is read as nothing.
    misplaced, _ = prompts_of(server, http, {**base, "input": [user, output[0], carrier, follow]})
    without, _ = prompts_of(server, http, {**base, "input": [user, output[0], follow]})
    assert misplaced == without


async def test_agents_sdk_stateless_loop_reads_the_first_turns_page(server: RunningServer) -> None:
    import openai
    from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, Runner, WebSearchTool

    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="unused", max_retries=0
    ) as client:
        agent = Agent(
            name="searcher",
            instructions="Search the web.",
            model=OpenAIResponsesModel(model="gpt-oss", openai_client=client),
            model_settings=ModelSettings(store=False, response_include=["reasoning.encrypted_content"]),
            tools=[WebSearchTool()],
        )
        config = RunConfig(tracing_disabled=True)
        script = steps('call browser.search {"query": "tides"}', 'call browser.open {"id": 0}', "Read it.")
        first = await Runner.run(agent, script, run_config=config)
        assert first.final_output == "Read it."
        carriers = [
            item.raw_item
            for item in first.new_items
            if getattr(item.raw_item, "type", None) == "reasoning"
            and str(getattr(item.raw_item, "encrypted_content", "")).startswith("v1z.")
        ]
        assert len(carriers) == 2, "one per web_search_call the server ran"
        second = await Runner.run(
            agent, [*first.to_input_list(), {"role": "user", "content": "#prompt"}], run_config=config
        )
    prompt = str(second.final_output)
    assert "Tides are the rise and fall of sea levels." in prompt, (
        "the second turn reads the first turn's page"
    )
    assert "browser.open" in prompt


def test_websocket_store_false_continues_with_what_the_model_read(
    server: RunningServer, http: httpx.Client
) -> None:
    import openai
    from support.server_harness import until_terminal

    executor: RecordingEcho = server.executor  # type: ignore[assignment]
    first = streamed(http, {"input": FIRST, "tools": [WEB_TOOL]})
    stored, _ = prompts_of(
        server, http, {"input": SECOND, "previous_response_id": first["id"], "tools": [WEB_TOOL]}
    )
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
        with client.responses.connect() as conn:
            tools: Any = [WEB_TOOL]
            conn.response.create(model="m", input=FIRST, tools=tools, store=False)
            local = check_stream(until_terminal(conn))
            assert not any(is_carrier(item) for item in local["output"])
            executor.requests.clear()
            conn.response.create(
                model="m",
                input=SECOND,
                tools=tools,
                previous_response_id=local["id"],
                store=False,
            )
            second = check_stream(until_terminal(conn))
    assert [list(r.prompt_token_ids) for r in executor.requests] == stored
    assert [c["status"] for c in second["output"] if c["type"] == "web_search_call"] == ["completed"] * 2


def test_redacting_server_emits_carriers_unasked_and_both_paths_agree(
    site: str, encoding: HarmonyEncoding, serve: ServerFactory
) -> None:
    settings = ToolSettings(browser_backend=f"searxng:{site}", fetch_allow_private=("127.0.0.1",))
    running = serve(RecordingEcho(encoding), tools=settings, redact_reasoning=True)
    try:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            user = {"role": "user", "content": FIRST}
            first = streamed(client, {"input": [user], "tools": [WEB_TOOL]})
            output = first["output"]
            assert sum(map(is_carrier, output)) == 3, "redacting seals reasoning, so carriers come unasked"
            follow = {"role": "user", "content": SECOND}
            body = {"input": [follow], "previous_response_id": first["id"], "tools": [WEB_TOOL]}
            stored, _ = prompts_of(running, client, body)
            replay = {"input": [user, *output, follow], "tools": [WEB_TOOL], "store": False}
            stateless, _ = prompts_of(running, client, replay)
        assert stateless == stored
    finally:
        running.stop()


def test_codex_cli_second_turn_reads_the_first_turns_pages(
    server: RunningServer, site: str, tmp_path: Path
) -> None:
    """Codex CLI (store:false, encrypted reasoning, no ids sent back) resumes a session whose first turn
    browsed: its second turn opens a link of a first-turn page by cursor, and reads the pages."""
    from support.codex_harness import CODEX, codex, write_codex_home

    if CODEX is None:
        pytest.skip("Codex CLI is not installed (make test installs it with npm)")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    write_codex_home(home, server.base_url)
    first = steps('call browser.search {"query": "tides"}', 'call browser.open {"id": 0}', "Read it.")
    assert "Read it." in codex(home, work, first)
    second = steps('call browser.open {"id": 0, "cursor": 1}', "Neap 【2†L0】.")
    assert f"Neap ([127.0.0.1]({site}/neap))." in codex(home, work, "resume", "--last", second)
    prompt = codex(home, work, "resume", "--last", "#prompt")
    assert "Tides are the rise and fall of sea levels." in prompt, "the first turn's page, replayed"
    assert "Neap tides are weaker." in prompt, "the second turn's page, opened from a first-turn cursor"
