"""Issue 30's attacks 3, 4 and 8 (orphan generations, memory per request), run by ``hostile_input.py``.

Each attack is ``url -> answer`` (one line saying what the attacker got back and what it measured).
RSS growth is ``hostile_input.py``'s own column (``rss_before_mib`` / ``rss_after_mib``).

- **hang-up**: non-streamed Responses, Chat Completions with n = 1, 4, 16 and Messages, each a
  ``#lorem 4000`` on a raw socket closed once the generations run; reported: how long after the close
  every generation was aborted (``trtllm_executor_aborts_total``), the bound being 1 s.
- **logprobs**: chat n 16 x top_logprobs 20 x 6,000 tokens (2.15 GB before: now a 400), then the
  largest request the cap allows (n 16 x 21 x 780 tokens).
- **summaries**: one response of 1,000 reasoning items with ``reasoning.summary`` (1,000 side
  generations before: now 16).
- **schema**: the echo's answer to ``minItems: 1e8`` (2 minutes before).
- **ws generate: false**: 16 lanes each remembering a ~270 KB conversation on one socket.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from collections.abc import Callable
from typing import Any

from websockets.sync.client import connect as ws_connect

__all__ = ["MEMORY_ATTACKS"]


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _post(url: str, path: str, body: dict[str, Any], timeout: float = 300) -> tuple[int, Any]:
    host, port = _host_port(url)
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, data[:200]
    finally:
        connection.close()


def _aborts(url: str) -> float:
    host, port = _host_port(url)
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    match = re.search(r"^trtllm_executor_aborts_total (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _hang_up(url: str, path: str, body: dict[str, Any], generations: int) -> str:
    """Send ``body`` non-streamed, hang up after 1 s; seconds until every generation was aborted."""
    host, port = _host_port(url)
    before = _aborts(url)
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"anthropic-version: 2023-06-01\r\ncontent-length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, port)) as sock:
        sock.sendall(head + data)
        time.sleep(1.0)
    closed = time.monotonic()
    while _aborts(url) - before < generations:
        if time.monotonic() - closed > 60:
            return "not aborted within 60 s"
        time.sleep(0.02)
    return f"{time.monotonic() - closed:.2f} s"


def hang_up(url: str) -> str:
    long = "#lorem 4000"
    cases = {"responses": ("/v1/responses", {"model": "m", "input": long}, 1)}
    for n in (1, 4, 16):
        chat = {"model": "m", "messages": [{"role": "user", "content": long}], "n": n}
        cases[f"chat n={n}"] = ("/v1/chat/completions", chat, n)
    messages = {"model": "m", "max_tokens": 8000, "messages": [{"role": "user", "content": long}]}
    cases["messages"] = ("/v1/messages", messages, 1)
    return "aborted after hang-up: " + ", ".join(
        f"{name} {_hang_up(url, path, body, n)}" for name, (path, body, n) in cases.items()
    )


def logprobs(url: str) -> str:
    def chat(max_tokens: int) -> tuple[int, Any]:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": f"#lorem {max_tokens}"}],
            "n": 16,
            "logprobs": True,
            "top_logprobs": 20,
            "max_tokens": max_tokens,
        }
        return _post(url, "/v1/chat/completions", body)

    status, answer = chat(6000)
    refused = f"{status} {answer.get('error', {}).get('code') if isinstance(answer, dict) else ''}"
    started = time.monotonic()
    status, _ = chat(780)
    return f"6000 tokens: {refused}; at the cap (780 tokens): {status} in {time.monotonic() - started:.1f} s"


def summaries(url: str) -> str:
    text = "".join(
        f"<|channel|>analysis<|message|>Thought {i}.<|end|><|start|>assistant" for i in range(1000)
    )
    body = {
        "model": "m",
        "input": "#harmony\n" + text + "<|channel|>final<|message|>Done.<|return|>",
        "reasoning": {"summary": "auto"},
        "store": False,
    }
    started = time.monotonic()
    status, answer = _post(url, "/v1/responses", body)
    if status != 200:
        return f"{status}"
    items = [i for i in answer["output"] if i["type"] == "reasoning"]
    summarized = sum(1 for i in items if i["summary"])
    return f"{len(items)} reasoning items, {summarized} summarized, {time.monotonic() - started:.1f} s"


def huge_min_items(url: str) -> str:
    schema = {"type": "object", "properties": {"x": {"type": "array", "minItems": 1e8}}, "required": ["x"]}
    body = {
        "model": "m",
        "input": "hi",
        "max_output_tokens": 2000,
        "store": False,
        "text": {"format": {"type": "json_schema", "name": "big", "schema": schema, "strict": False}},
    }
    started = time.monotonic()
    status, answer = _post(url, "/v1/responses", body)
    return f"{status} {answer.get('status') if isinstance(answer, dict) else ''} in {time.monotonic() - started:.2f} s"


def ws_generate_false(url: str) -> str:
    ws_url = url.replace("http://", "ws://") + "/v1/responses"
    text = " ".join(f"w{i}" for i in range(40_000))  # ~270 KB, within the context window
    ended = []
    with ws_connect(ws_url, max_size=None, open_timeout=30) as ws:
        for lane in range(16):
            message = {"type": "response.create", "model": "m", "input": text, "store": False}
            ws.send(json.dumps({**message, "generate": False, "stream_id": f"l{lane}"}))
            while True:
                event = json.loads(ws.recv(timeout=120))
                if event["type"] in ("response.completed", "response.failed", "error"):
                    ended.append(event["type"])
                    break
        time.sleep(1.0)
    return f"16 lanes: {', '.join(f'{ended.count(t)} {t}' for t in sorted(set(ended)))}"


MEMORY_ATTACKS: dict[str, Callable[[str], str]] = {
    "hang-up: non-streamed responses, chat n=1/4/16, messages": hang_up,
    "logprobs: chat n16 x top20 x 6000 tokens": logprobs,
    "summaries: 1000 reasoning items": summaries,
    "schema: minItems 1e8": huge_min_items,
    "ws: 16 lanes of generate:false ~270 KB": ws_generate_false,
}
