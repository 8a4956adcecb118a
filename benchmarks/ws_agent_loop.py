"""An agent loop of N turns over a growing conversation: WebSocket mode beside HTTP previous_response_id.

Each turn sends ~TURN_TOKENS new tokens (a context message, e.g. a file the agent
read, plus a short command ``#lorem 16`` so the echo executor answers briefly);
after 50 turns the conversation holds ~100k tokens. Per turn it reports the time
from sending the request to ``response.created`` (the server's work before
generating: parse, continue the conversation, render the new input) and to the
terminal event, for:

- ``ws``:   one WebSocket, ``store: false``, continuing from connection-local state;
- ``http``: streaming ``POST /v1/responses`` with ``previous_response_id`` (``store: true``).

Flat per-turn times as the conversation grows mean each turn costs O(new input).

    .venv/bin/python benchmarks/ws_agent_loop.py [--turns 50] [--turn-tokens 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import pin_this_process, start_server  # noqa: E402

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
WORDS = "def parse(self, tokens): return [t for t in tokens if t.kind != 'space'] # the parser".split()


def turn_input(turn: int, words: int) -> list[dict[str, Any]]:
    text = f"File {turn}:\n" + " ".join(WORDS[i % len(WORDS)] for i in range(words))
    return [{"role": "user", "content": text}, {"role": "user", "content": "#lorem 16"}]


def ws_loop(base_url: str, turns: int, words: int) -> list[dict[str, float]]:
    out = []
    previous = None
    with connect(base_url.replace("http://", "ws://") + "/v1/responses", max_size=None) as ws:
        for turn in range(turns):
            body: dict[str, Any] = {
                "type": "response.create",
                "input": turn_input(turn, words),
                "store": False,
            }
            if previous:
                body["previous_response_id"] = previous
            started = time.perf_counter()
            ws.send(json.dumps(body))
            created = None
            while True:
                event = json.loads(ws.recv())
                if event["type"] == "response.created":
                    created = time.perf_counter()
                elif event["type"] in TERMINAL:
                    break
                elif event["type"] == "error":
                    raise RuntimeError(event)
            assert created is not None and event["type"] == "response.completed", event
            previous = event["response"]["id"]
            out.append(
                {
                    "prompt_tokens": event["response"]["usage"]["input_tokens"],
                    "created_ms": (created - started) * 1e3,
                    "total_ms": (time.perf_counter() - started) * 1e3,
                }
            )
    return out


def http_loop(base_url: str, turns: int, words: int) -> list[dict[str, float]]:
    out = []
    previous = None
    with httpx.Client(base_url=base_url, timeout=120) as client:
        for turn in range(turns):
            body: dict[str, Any] = {"input": turn_input(turn, words), "stream": True}
            if previous:
                body["previous_response_id"] = previous
            started = time.perf_counter()
            created = None
            final = None
            with client.stream("POST", "/v1/responses", json=body) as response:
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if event["type"] == "response.created":
                        created = time.perf_counter()
                    elif event["type"] in TERMINAL:
                        final = event
            assert created is not None and final is not None and final["type"] == "response.completed"
            previous = final["response"]["id"]
            out.append(
                {
                    "id": previous,
                    "prompt_tokens": final["response"]["usage"]["input_tokens"],
                    "created_ms": (created - started) * 1e3,
                    "total_ms": (time.perf_counter() - started) * 1e3,
                }
            )
    return out


def coding_conversation(files: int, words: int) -> list[dict[str, Any]]:
    """A coding agent's conversation as stateless input: a task, then tool calls reading files, then an answer."""
    items: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "Refactor the tokenizer so parse() skips whitespace; keep the tests green.",
        }
    ]
    for i in range(files):
        call_id = f"call_{i}"
        items.append(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": "read_file",
                "arguments": json.dumps({"path": f"src/m{i}.py"}),
            }
        )
        code = " ".join(WORDS[j % len(WORDS)] for j in range(words))
        items.append({"type": "function_call_output", "call_id": call_id, "output": code})
    items.append({"role": "assistant", "content": "I read the modules; parse() is in src/m0.py."})
    items.append({"role": "user", "content": "Go ahead."})
    return items


def compact(base_url: str, files: int, words: int) -> dict[str, Any]:
    """Compact a ~100k-token coding conversation; the next turn's prompt tokens before and after."""
    tools = [
        {
            "type": "function",
            "name": "read_file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    conversation = coding_conversation(files, words)
    nxt = [{"role": "user", "content": "#lorem 16"}]
    with httpx.Client(base_url=base_url, timeout=300) as client:
        before = client.post(
            "/v1/responses/input_tokens", json={"input": [*conversation, *nxt], "tools": tools}
        )
        started = time.perf_counter()
        compacted = client.post(
            "/v1/responses/compact", json={"model": "gpt-oss", "input": conversation, "tools": tools}
        ).json()
        ms = (time.perf_counter() - started) * 1e3
        after = client.post(
            "/v1/responses/input_tokens", json={"input": [*compacted["output"], *nxt], "tools": tools}
        )
    return {
        "before": before.json()["input_tokens"],
        "after": after.json()["input_tokens"],
        "ms": ms,
        "usage": {k: compacted["usage"][k] for k in ("input_tokens", "output_tokens")},
    }


def summary(rows: list[dict[str, float]], key: str) -> tuple[float, float]:
    """Median of the first five turns and of the last five."""
    return statistics.median(r[key] for r in rows[:5]), statistics.median(r[key] for r in rows[-5:])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--turn-tokens", type=int, default=2000, help="new tokens per turn (approximate)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pinned = pin_this_process()
    words = int(args.turn_tokens / 1.48)  # the filler words average ~1.48 tokens each
    process, base_url = start_server()
    try:
        ws_loop(base_url, 3, words)  # warm-up
        ws = ws_loop(base_url, args.turns, words)
        http = http_loop(base_url, args.turns, words)
        compaction = compact(base_url, args.turns, words)
    finally:
        process.terminate()
        process.wait()
    if args.json:
        print(json.dumps({"pinned": pinned, "ws": ws, "http": http, "compaction": compaction}))
        return 0
    print(f"pinned: {pinned}")
    print("turn  prompt tokens  ws created ms  ws total ms  http created ms  http total ms")
    for i, (w, h) in enumerate(zip(ws, http, strict=True)):
        if i < 3 or i % 10 == 9 or i >= len(ws) - 2:
            print(
                f"{i + 1:4}  {w['prompt_tokens']:13}  {w['created_ms']:13.2f}  {w['total_ms']:11.2f}"
                f"  {h['created_ms']:15.2f}  {h['total_ms']:13.2f}"
            )
    for name, rows in (("ws", ws), ("http", http)):
        first, last = summary(rows, "created_ms")
        first_total, last_total = summary(rows, "total_ms")
        print(
            f"{name:5} to response.created: first 5 turns {first:.2f} ms, last 5 {last:.2f} ms; "
            f"to completed: {first_total:.2f} -> {last_total:.2f} ms "
            f"(prompt {rows[0]['prompt_tokens']} -> {rows[-1]['prompt_tokens']} tokens)"
        )
    print(
        f"compacting a coding conversation ({args.turns} files read): {compaction['before']} -> {compaction['after']} prompt tokens "
        f"for the next turn ({compaction['ms']:.0f} ms, summary run {compaction['usage']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
