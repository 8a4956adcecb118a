"""Prompts that extend each other: each turn of an agent's session starts with the previous turn's prompt
followed by what the model wrote, so an engine's KV-cache block reuse finds all of it
(docs/agents-and-long-sessions.md#long-agent-loops). Driven as Codex drives the server (replay with ``store:
false``), as the SDK continues a stored
response (``previous_response_id``) and over WebSocket; the prompts and outputs are the executor's own.

The one break Harmony forces: after a final answer, the finished turns' reasoning is dropped, so the next
prompt leaves the previous one at the first of those analysis messages, and nowhere earlier.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.server_harness import RecordingEcho, RunningServer, ServerFactory
from websockets.sync.client import connect as ws_connect

from trtllm_responses.harmony import HarmonyEncoding

SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Runs a shell command and returns its output.",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "array", "items": {"type": "string"}}},
        "required": ["command"],
    },
}
#: Each turn's steering for the echo (docs/echo-executor.md#the-echo-executor): a call, or a final answer.
STEERING = [
    *[f'call shell {{"command":["cat","src/module_{t}.py"]}}' for t in range(1, 4)],
    "#lorem 12",
    *[f'call shell {{"command":["ls","dir_{t}"]}}' for t in range(5, 8)],
]
FINAL_TURN = 3  # the index of STEERING's final answer
WAYS = ("replay", "previous_response_id", "websocket")


@pytest.fixture(scope="module")
def recording(serve: ServerFactory, encoding: HarmonyEncoding) -> Iterator[RunningServer]:
    with serve(RecordingEcho(encoding)) as running:
        yield running


def _body(turn: int, new: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "gpt-oss",
        "instructions": "You are a coding agent.",
        "tools": [SHELL],
        "reasoning": {"effort": "medium"},
        "input": new,
        "prompt_cache_key": "session-1",
    }


def _session(server: RunningServer, way: str) -> list[str]:
    """Run the session ``way``; its response ids, turn by turn."""
    history: list[dict[str, Any]] = []
    previous: str | None = None
    output: list[dict[str, Any]] = []
    ids = []
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        socket = (
            ws_connect(server.base_url.replace("http://", "ws://") + "/v1/responses")
            if way == "websocket"
            else None
        )
        try:
            for turn, steering in enumerate(STEERING):
                new = [
                    {
                        "type": "function_call_output",
                        "call_id": item["call_id"],
                        "output": f"file {turn}\n" * 40,
                    }
                    for item in output
                    if item["type"] == "function_call"
                ]
                new.append({"role": "user", "content": steering})
                history += new
                body = _body(turn, new)
                if way == "replay":
                    response = http.post(
                        "/v1/responses", json={**body, "input": history, "store": False}
                    ).json()
                elif way == "previous_response_id":
                    continued = {"previous_response_id": previous} if previous else {}
                    response = http.post("/v1/responses", json={**body, "store": True, **continued}).json()
                else:
                    assert socket is not None
                    continued = {"previous_response_id": previous} if previous else {}
                    socket.send(json.dumps({"type": "response.create", **body, "store": False, **continued}))
                    while True:
                        event = json.loads(socket.recv())
                        assert event["type"] != "error", event
                        if event["type"] == "response.completed":
                            response = event["response"]
                            break
                assert response["status"] == "completed", response
                output = response["output"]
                history += output
                previous = response["id"]
                ids.append(previous)
        finally:
            if socket is not None:
                socket.close()
    return ids


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


@pytest.mark.parametrize("way", WAYS)
def test_each_turn_extends_the_previous_prompt_and_what_the_model_wrote(
    recording: RunningServer, encoding: HarmonyEncoding, way: str
) -> None:
    executor = recording.executor
    assert isinstance(executor, RecordingEcho)
    ids = _session(recording, way)
    prompts = executor.prompts
    calls = 0
    for turn in range(1, len(ids)):
        before = prompts[ids[turn - 1]] + executor.outputs[ids[turn - 1]]
        prompt = prompts[ids[turn]]
        reused = _common_prefix(prompt, before)
        if turn - 1 == FINAL_TURN:
            # Harmony drops the finished turns' analysis: the prompt leaves the previous one at the first of
            # those messages (everything up to it is reused), and it does drop them.
            text = encoding.decode(before)
            first_analysis = text.index("<|start|>assistant<|channel|>analysis")
            assert (
                first_analysis
                <= len(encoding.decode(before[:reused]))
                < text.index("<|message|>", first_analysis)
            )
            assert "<|channel|>analysis" not in encoding.decode(prompt[reused:]).split("<|channel|>final")[0]
            continue
        assert reused == len(before), f"turn {turn}: {encoding.decode(before[reused:])[:120]!r}"
        calls += "<|call|>" in encoding.decode(executor.outputs[ids[turn - 1]])
    assert calls == len(STEERING) - 2  # every call turn's output, the call itself included, was reused
