"""Replayed histories render only what is new (adapter/item_renders.py), token for token as a full render.

A property test over seeded random sessions: each turn replays every earlier item (as Codex does:
``store: false``, the whole history, the model's own output items with encrypted reasoning among them)
plus new ones of every kind, through two services, one with the item cache and the replay's bytes
decoded by what is new (``request/replay_prefix.py``: its items, typed, opened and keyed once, are
the last turn's objects) and one with neither. Their
prompts must be equal token for token, and so must their errors. ``TRTLLM_RESPONSES_RENDER_SEEDS``
raises the number of sessions (default 150).
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import orjson
import pytest

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.core import APIError
from trtllm_responses.executors import EchoExecutor
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request import ReplayPrefixes
from trtllm_responses.responses import ContentSealer, ResponsesService
from trtllm_responses.store import ConversationHistoryStore

SEEDS = int(os.environ.get("TRTLLM_RESPONSES_RENDER_SEEDS", "150"))
SEALER = ContentSealer(b"r" * 32)
TOOLS = [
    {
        "type": "function",
        "name": "shell",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
    {"type": "function", "name": "read_file", "parameters": {"type": "object"}},
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch"},
    {
        "type": "namespace",
        "name": "agents",
        "description": "Agents",
        "tools": [{"type": "function", "name": "spawn"}],
    },
]
WORDS = "the parser reads tokens while the agent edits files and runs commands on the repository".split()


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Session:
    """One random session's items, and the calls it has made that wait for output."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items: list[dict[str, Any]] = []
        self.open_calls: list[tuple[str, str]] = []  # (call_id, "function" | "custom")
        self.calls = 0

    def new_items(self) -> list[dict[str, Any]]:
        rng = self.rng
        out: list[dict[str, Any]] = []
        while self.open_calls and rng.random() < 0.8:  # outputs of the calls made so far
            call_id, kind = self.open_calls.pop(0)
            output: Any = text(rng, rng.randint(0, 300))
            if rng.random() < 0.3:
                output = [{"type": "input_text", "text": output}]
            out.append(
                {
                    "type": f"{kind}_call_output" if kind == "custom_tool" else "function_call_output",
                    "call_id": call_id,
                    "output": output,
                }
            )
        for _ in range(rng.randint(1, 4)):
            out.append(self.random_item())
        return out

    def random_item(self) -> dict[str, Any]:
        rng = self.rng
        kind = rng.choice(
            ["user", "user", "assistant", "developer", "call", "custom", "reasoning", "web", "code"]
        )
        if kind == "user":
            content: Any = text(rng, rng.randint(1, 40))
            if rng.random() < 0.5:
                content = [
                    {"type": "input_text", "text": content},
                    {"type": "input_text", "text": text(rng, 3)},
                ]
            return (
                {"role": "user", "content": content}
                if rng.random() < 0.5
                else {"type": "message", "role": "user", "content": content}
            )
        if kind == "assistant":
            item = {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": text(rng, rng.randint(1, 30)), "annotations": []}
                ],
            }
            if rng.random() < 0.3:
                item["phase"] = "commentary"
            return item
        if kind == "developer":
            return {"type": "message", "role": rng.choice(["developer", "system"]), "content": text(rng, 8)}
        if kind in ("call", "custom"):
            self.calls += 1
            call_id = f"call_{self.calls}_{rng.randint(0, 9)}"
            if kind == "custom":
                self.open_calls.append((call_id, "custom_tool"))
                return {
                    "type": "custom_tool_call",
                    "call_id": call_id,
                    "name": "apply_patch",
                    "input": text(rng, 12),
                }
            self.open_calls.append((call_id, "function"))
            item = {
                "type": "function_call",
                "call_id": call_id,
                "name": rng.choice(["shell", "read_file"]),
                "arguments": orjson.dumps({"cmd": text(rng, 4)}).decode(),
            }
            if rng.random() < 0.15:
                item.update(name="spawn", namespace="agents")
            return item
        if kind == "reasoning":
            shape = rng.choice(["content", "summary", "empty", "encrypted"])
            if shape == "content":
                return {
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": text(rng, 20)}],
                }
            if shape == "summary":
                return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text(rng, 10)}]}
            if shape == "encrypted":
                return {
                    "type": "reasoning",
                    "summary": [],
                    "encrypted_content": SEALER.seal_reasoning(text(rng, 15)),
                }
            return {"type": "reasoning", "summary": []}
        if kind == "web":
            return {
                "type": "web_search_call",
                "id": f"ws_{rng.randint(0, 10**6)}",
                "status": "completed",
                "action": {"type": "search", "query": text(rng, 3)},
            }
        return {
            "type": "code_interpreter_call",
            "id": f"ci_{rng.randint(0, 10**6)}",
            "status": "completed",
            "code": "print(1)",
            "container_id": "c",
            "outputs": [{"type": "logs", "logs": "1"}],
        }


def service(encoding: HarmonyEncoding, cache_bytes: int) -> ResponsesService:
    """A service with the item cache of ``cache_bytes`` and, when it has one, replays decoded from their
    last turn's bytes (``request/replay_prefix.py``, from 1 KB bodies on): neither when 0."""
    svc = ResponsesService(
        executor=EchoExecutor(encoding),
        store=ConversationHistoryStore(10, 1 << 20),
        adapter=HarmonyAdapter(encoding, today=lambda: "2026-11-26", render_cache_bytes=cache_bytes),
        model_name="m",
        sealer=SEALER,
        replay_prefix_bytes=0,
    )
    if cache_bytes:
        svc.decoder.prefixes = ReplayPrefixes(cache_bytes, min_bytes=1024)
    return svc


async def prompt_or_error(svc: ResponsesService, body: dict[str, Any]) -> Any:
    try:
        prepared = await svc.prepare(await svc.decode(orjson.dumps(body)))
    except APIError as exc:
        return ("error", exc.message, exc.param)
    return prepared


async def run_session(seed: int, cached: ResponsesService, full: ResponsesService) -> int:
    rng = random.Random(seed)
    session = Session(rng)
    compared = 0
    for turn in range(rng.randint(2, 7)):
        session.items += session.new_items()
        if rng.random() < 0.5:  # the model answers: a command the echo follows
            session.items.append(
                {"role": "user", "content": rng.choice(["#lorem 12", 'call shell {"cmd": "ls"}', "hi"])}
            )
        body = {
            "model": "m",
            "store": False,
            "input": session.items,
            "tools": TOOLS,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": f"s{seed}",
        }
        a = await prompt_or_error(cached, body)
        b = await prompt_or_error(full, body)
        if isinstance(a, tuple) or isinstance(b, tuple):
            assert a == b, (seed, turn)
            session.items = session.items[:-1]  # drop what made it invalid and go on
            continue
        assert a.prompt.token_ids == b.prompt.token_ids, (seed, turn)
        assert dict(a.prompt.history.calls) == dict(b.prompt.history.calls), (seed, turn)
        compared += 1
        final = orjson.loads(await cached.run(a).drive())  # the model's output, replayed next turn
        session.items += final["output"]
        for item in final["output"]:
            if item["type"] == "function_call":
                session.open_calls.append((item["call_id"], "function"))
    return compared


def test_incremental_render_equals_full_render(encoding: HarmonyEncoding) -> None:
    cached = service(encoding, 64 << 20)
    full = service(encoding, 0)
    assert full.adapter.item_renders is None

    async def main() -> int:
        return sum([await run_session(seed, cached, full) for seed in range(SEEDS)])

    compared = asyncio.run(main())
    renders = cached.adapter.item_renders
    assert renders is not None
    assert compared >= SEEDS  # most turns were compared, not refused
    assert renders.hits > renders.misses  # replays found their earlier items
    prefixes = cached.decoder.prefixes
    assert prefixes is not None and prefixes.hits >= SEEDS  # and were decoded from their last turn's bytes


@pytest.mark.parametrize("budget", [64 << 10, 256 << 10])
def test_the_cache_stays_within_its_budget_over_a_thousand_sessions(
    encoding: HarmonyEncoding, budget: int
) -> None:
    """1,000 distinct sessions each replaying ~4 KB of items: far more than the budget, which holds."""
    adapter = HarmonyAdapter(encoding, render_cache_bytes=budget)
    svc = ResponsesService(
        executor=EchoExecutor(encoding),
        store=ConversationHistoryStore(10, 1 << 20),
        adapter=adapter,
        model_name="m",
    )
    renders = adapter.item_renders
    assert renders is not None and renders.max_bytes == budget

    async def main() -> int:
        most = 0
        for s in range(1000):
            rng = random.Random(s)
            items = [{"role": "user", "content": f"session {s}: " + text(rng, 200)} for _ in range(3)]
            await svc.prepare(await svc.decode(orjson.dumps({"input": items, "store": False})))
            most = max(most, renders.nbytes)
        return most

    most = asyncio.run(main())
    assert 0 < most <= budget
    assert len(renders) < 3000  # it evicted: 3,000 items were admitted in all


def test_a_tool_output_is_found_again_only_for_the_same_call(encoding: HarmonyEncoding) -> None:
    """The same output item answers ``shell`` in one session and ``read_file`` in another (call ids are the
    client's): its render names its call's tool, so the cache keys it by that too."""
    cached = service(encoding, 64 << 20)
    full = service(encoding, 0)
    output = {"type": "function_call_output", "call_id": "call_1", "output": "done"}

    async def prompts(name: str) -> tuple[list[int], list[int]]:
        call = {"type": "function_call", "call_id": "call_1", "name": name, "arguments": "{}"}
        body = orjson.dumps({"input": [{"role": "user", "content": "go"}, call, output], "tools": TOOLS})
        first = await cached.prepare(await cached.decode(body))
        return first.prompt.token_ids, (await full.prepare(await full.decode(body))).prompt.token_ids

    async def main() -> None:
        shell, shell_full = await prompts("shell")
        read, read_full = await prompts("read_file")
        assert shell == shell_full and read == read_full and shell != read

    asyncio.run(main())


def test_an_items_kept_json_holds_no_more_than_its_size() -> None:
    """The cache's keys are the items' JSON, counted by their size: each is in an allocation of its own size
    (orjson's output keeps its 32 KiB working buffer: a 3 KB item's key held 32 KiB, uncounted)."""
    import sys
    import tracemalloc

    from trtllm_responses.request import parse_item

    items = [parse_item({"role": "user", "content": "x" * 3000 + str(i)}, "input[0]") for i in range(50)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keys = [item.json() for item in items]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(item.json() is key for item, key in zip(items, keys, strict=True))  # made once
    assert held <= sum(sys.getsizeof(k) for k in keys) + 64 * len(keys) + 4096
