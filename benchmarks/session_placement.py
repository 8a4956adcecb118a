"""Thread or tree: which session key places an agent's sub-agents better (docs/sessions-and-kv-cache.md#thread-or-tree).

Agent trees (a parent agent and its sub-agents, Codex's ``session-id``/``thread-id`` headers) run on the fake
TensorRT-LLM (``tests/fake_trtllm/``) with attention data parallelism: every attention-DP rank has a KV cache
of its own, and the TensorRT-LLM executor pins each session to the rank its key hashes to
(``scheduling_params``, not relaxed). The key is what ``request/affinity.py`` reads from the headers
(``thread``: one thread, the server's choice) or the tree's id (``tree``: Codex's ``session-id``, Claude Code's
``x-claude-code-session-id``). Two kinds of sub-agent:

- ``sharing``: a sub-agent's prompt extends its parent's conversation (a forked context);
- ``own``: a sub-agent starts from a prompt of its own (its own instructions and task: Claude Code's Task
  tool, a Codex ``spawn_agent`` without the parent's history).

Each tree: the parent runs ``--parent_turns`` turns, spawns ``--subagents`` sub-agents that run
``--subagent_turns`` turns each, then runs 2 more; the trees' turns interleave. Reported per policy and kind,
summed over ``--seeds`` sets of ids: prompt tokens, those read from the KV cache, the prefill the ranks did,
and the busiest rank's prefill over the mean (1.0: balanced; strict pinning makes a rank's queue wait on it).

    PYTHONPATH=$PWD python benchmarks/session_placement.py [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fake_trtllm"))  # the fake, importable as tensorrt_llm

from trtllm_responses.adapter import HarmonyAdapter  # noqa: E402
from trtllm_responses.executors.base import GenerationRequest, SamplingSettings  # noqa: E402
from trtllm_responses.executors.trtllm import TrtllmExecutor  # noqa: E402
from trtllm_responses.harmony import load_encoding  # noqa: E402
from trtllm_responses.request import session_identity  # noqa: E402
from trtllm_responses.request.protocol import parse_request  # noqa: E402

WORDS = "tide harbour lantern copper meadow signal orbit quartz ember willow basalt cipher".split()


def text(seed: str, words: int) -> str:
    """``words`` words that depend on ``seed`` (distinct prompts never share a block by chance)."""
    start = sum(map(ord, seed))
    return seed + ": " + " ".join(WORDS[(start + i * 7 + i // len(WORDS)) % len(WORDS)] for i in range(words))


@dataclass
class Thread:
    """One agent thread: its headers, instructions and conversation so far."""

    tree: str
    thread: str
    instructions: str
    history: list[dict[str, Any]] = field(default_factory=list)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """What Codex 0.171 sends: the tree's ``session-id``, the thread's ``thread-id``."""
        return [(b"session-id", self.tree.encode()), (b"thread-id", self.thread.encode())]


@dataclass
class Tally:
    prompt: int = 0
    cached: int = 0
    per_rank: dict[int, int] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        prefill = self.prompt - self.cached
        loads = list(self.per_rank.values())
        return {
            "prompt_tokens": self.prompt,
            "cached_tokens": self.cached,
            "hit_ratio": round(self.cached / self.prompt, 3),
            "prefill_tokens": prefill,
            "busiest_rank_over_mean": round(max(loads) / (sum(loads) / len(loads)), 2),
        }


class Run:
    """One policy and sub-agent kind over fresh ranks (a new fake LLM)."""

    def __init__(self, adapter: HarmonyAdapter, ranks: int, pool_tokens: int, policy: str) -> None:
        llm = {
            "model": "/ckpt/gpt-oss-tiny",
            "tensor_parallel_size": ranks,
            "enable_attention_dp": True,
            "kv_cache_config": {"enable_block_reuse": True, "max_tokens": pool_tokens},
        }
        self.executor = TrtllmExecutor(llm, end_id=adapter.encoding.return_)
        self.adapter = adapter
        self.policy = policy
        self.tally = Tally(per_rank={r: 0 for r in range(ranks)})
        self._n = 0

    async def turn(self, thread: Thread, words: int) -> None:
        thread.history.append(
            {"role": "user", "content": text(f"{thread.thread}-u{len(thread.history)}", words)}
        )
        body = {"instructions": thread.instructions, "input": thread.history}
        prompt = self.adapter.build_prompt(parse_request(body)).token_ids
        key = session_identity(thread.headers()).key if self.policy == "thread" else thread.tree
        self._n += 1
        request = GenerationRequest(
            f"g{self._n}", prompt, SamplingSettings(1, self.adapter.stop_token_ids), session_key=key
        )
        cached = 0
        async for delta in self.executor.generate(request):
            cached = delta.cached_tokens or cached
        rank = self.executor._llm.ranks[-1]
        self.tally.prompt += len(prompt)
        self.tally.cached += cached
        self.tally.per_rank[rank] += len(prompt) - cached
        reply = text(f"{thread.thread}-a{len(thread.history)}", 60)
        thread.history.append({"role": "assistant", "content": reply})


async def simulate(args: argparse.Namespace, adapter: HarmonyAdapter, policy: str, kind: str) -> Tally:
    total = Tally(per_rank={})
    for seed in range(args.seeds):
        run = Run(adapter, args.ranks, args.pool_tokens, policy)
        await run.executor.start()
        parents = [
            Thread(f"tree-{seed}-{t}", f"tree-{seed}-{t}", text(f"system-{seed}-{t}", args.instruction_words))
            for t in range(args.trees)
        ]
        for _ in range(args.parent_turns):
            for parent in parents:
                await run.turn(parent, args.turn_words)
        children = []
        for parent in parents:
            for s in range(args.subagents):
                child = Thread(parent.tree, f"{parent.tree}-sub{s}", parent.instructions)
                if kind == "sharing":
                    child.history = list(parent.history)
                else:
                    child.instructions = text(f"{child.thread}-system", args.instruction_words)
                children.append(child)
        for _ in range(args.subagent_turns):
            for child in children:
                await run.turn(child, args.turn_words)
        for _ in range(2):
            for parent in parents:
                await run.turn(parent, args.turn_words)
        await run.executor.shutdown()
        total.prompt += run.tally.prompt
        total.cached += run.tally.cached
        for rank, load in run.tally.per_rank.items():
            total.per_rank[(seed, rank)] = load
    return total


def busiest(tally: Tally, seeds: int, ranks: int) -> float:
    """The busiest rank's prefill over the mean, averaged over the seeds (each seed's ranks are one engine)."""
    ratios = []
    for seed in range(seeds):
        loads = [tally.per_rank[(seed, r)] for r in range(ranks)]
        ratios.append(max(loads) / (sum(loads) / ranks))
    return round(sum(ratios) / seeds, 2)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--trees", type=int, default=8)
    parser.add_argument("--subagents", type=int, default=3)
    parser.add_argument("--parent_turns", type=int, default=3)
    parser.add_argument("--subagent_turns", type=int, default=3)
    parser.add_argument("--instruction_words", type=int, default=600)
    parser.add_argument("--turn_words", type=int, default=150)
    parser.add_argument("--pool_tokens", type=int, default=1 << 20, help="KV pool of each rank, in tokens")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the executor's start-up notes, once per run
    adapter = HarmonyAdapter(load_encoding())
    rows = []
    for kind in ("sharing", "own"):
        for policy in ("tree", "thread"):
            tally = await simulate(args, adapter, policy, kind)
            row = {"subagents": kind, "key": policy, **tally.row()}
            row["busiest_rank_over_mean"] = busiest(tally, args.seeds, args.ranks)
            rows.append(row)
    if args.json:
        print(json.dumps({"args": vars(args), "rows": rows}, indent=1))
        return
    head = f"{'sub-agents':10} {'key':6} {'prompt':>9} {'cached':>9} {'hit':>6} {'prefill':>9} {'busiest/mean':>12}"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['subagents']:10} {r['key']:6} {r['prompt_tokens']:9} {r['cached_tokens']:9} {r['hit_ratio']:6} "
            f"{r['prefill_tokens']:9} {r['busiest_rank_over_mean']:12}"
        )
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
