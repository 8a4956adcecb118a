"""Issue 30's attacks 1, 2 and 6, run by ``hostile_input.py`` beside its normal streams.

1. 20 WebSocket connections each queue 4 ``response.create`` messages of 1.9 MB of ``"x":[{},{},…]``,
   1.9 KB each on the wire with permessage-deflate.
2. ``item_reference`` amplification: a 13.6 KB request of 150 references to one stored 100 KB message.
6. Prompt templates: a template using one variable 51 times, given a 1.9 MB value (97 MB expanded),
   with a 20 KB request sent right behind it; and a 300-character ``prompt.id``.

Each is ``url -> answer`` (one line saying what the attacker got back). ``prepare_prompts`` writes the
template the server is started with (``--prompts``).
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from hostile_surfaces import _request, _tally
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

#: The template of attack 6: one variable used 51 times.
TEMPLATE_ID = "pmpt_many"


def prepare_prompts(folder: Path) -> Path:
    """Write attack 6's template under ``folder`` (the server's ``--prompts``); return ``folder``."""
    (folder / TEMPLATE_ID).mkdir(parents=True, exist_ok=True)
    text = " ".join(["{{v}}"] * 51)
    (folder / TEMPLATE_ID / "1.json").write_text(json.dumps({"input": [{"role": "user", "content": text}]}))
    return folder


def _answer(status: int, body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    return f"{status} {error.get('code') or error.get('type')}" if isinstance(error, dict) else f"{status} ok"


def ws_object_heavy(url: str, connections: int = 20, messages: int = 4) -> str:
    """``connections`` sockets each send ``messages`` creates of 1.9 MB of ``[{},…]``, compressed."""
    message = '{"type":"response.create","input":"#lorem 20","x":[' + ",".join(["{}"] * 633_000) + "]}"
    wire = len(zlib.compress(message.encode(), 9))
    ws_url = url.replace("http://", "ws://") + "/v1/responses"
    answers: list[str] = []
    lock = threading.Lock()

    def one() -> None:
        got: list[str] = []
        try:
            with ws_connect(ws_url, compression="deflate", max_size=None, open_timeout=60) as ws:
                for _ in range(messages):
                    ws.send(message)
                while len(got) < messages:
                    event = json.loads(ws.recv(timeout=300))
                    if event["type"] == "error":
                        got.append(str(event["error"].get("code")))
                    elif event["type"] in ("response.completed", "response.incomplete", "response.failed"):
                        got.append(event["type"])
        except (TimeoutError, ConnectionClosed, OSError) as exc:
            got.append(type(exc).__name__)
        with lock:
            answers.extend(got)

    threads = [threading.Thread(target=one) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return f"{_tally(answers)} ({len(message)} bytes a message, {wire} on the wire)"


def item_reference_amplification(url: str) -> str:
    """150 references to one stored 100 KB message, in one ~13.6 KB request."""
    status, stored = _request(url, "POST", "/v1/responses", {"input": "y" * 100_000, "max_output_tokens": 1})
    if status != 200:
        return f"setup: {_answer(status, stored)}"
    _, items = _request(url, "GET", f"/v1/responses/{stored['id']}/input_items")
    ref = {"type": "item_reference", "id": items["data"][0]["id"]}
    body = {"previous_response_id": stored["id"], "input": [ref] * 150, "max_output_tokens": 16}
    started = time.monotonic()
    status, answer = _request(url, "POST", "/v1/responses", body)
    took = time.monotonic() - started
    return f"{_answer(status, answer)} in {took:.2f} s ({len(json.dumps(body))} bytes sent)"


def template_expansion(url: str) -> str:
    """A 1.9 MB value for a variable the template uses 51 times, then a 20 KB request right behind it."""
    attack: dict[str, str] = {}

    def send() -> None:
        started = time.monotonic()
        body = {"prompt": {"id": TEMPLATE_ID, "variables": {"v": "v" * 1_900_000}}, "max_output_tokens": 16}
        status, answer = _request(url, "POST", "/v1/responses", body)
        attack["answer"] = f"{_answer(status, answer)} in {time.monotonic() - started:.2f} s"

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(0.2)  # the attack is being read or expanded
    started = time.monotonic()
    status, answer = _request(url, "POST", "/v1/responses", {"input": "z " * 10_000, "max_output_tokens": 16})
    behind = time.monotonic() - started
    sender.join()
    return f"{attack.get('answer')}; a 20 KB request behind it: {_answer(status, answer)} in {behind:.2f} s"


def long_prompt_id(url: str) -> str:
    status, answer = _request(url, "POST", "/v1/responses", {"prompt": {"id": "p" * 300}})
    param = answer.get("error", {}).get("param") if isinstance(answer, dict) else None
    return f"{_answer(status, answer)} (param {param})"


EXPANSION_ATTACKS = {
    "issue 30.1 ws: 20 x 4 compressed 1.9 MB [{},...] creates": ws_object_heavy,
    "issue 30.2 item_reference: 150 x one 100 KB message": item_reference_amplification,
    "issue 30.6 prompt: a variable used 51 times, 1.9 MB": template_expansion,
    "issue 30.6 prompt: a 300-character id": long_prompt_id,
}
