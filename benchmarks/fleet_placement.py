"""Placement over a pool of gRPC engines (docs/a-fleet-of-engines.md#a-pool-of-engines): balance and prefix hits.

Three fake TensorRT-LLM gRPC engines (``tests/fake_trtllm/grpc_server.py``, processes, each with its own KV
pool) behind the gRPC executor (``executors/trtllm_grpc/``, its ``EnginePool``). ``--sessions`` sessions
(64, 256) run at once, ``--turns`` turns each (a turn's prompt is the session's conversation so far: its own
instructions, every earlier question and answer, the new question), each session's turns one after another
with a short random pause. Per policy:

- ``rendezvous, c=1.25``: this server's placement (the session key, rendezvous order, the load bound);
- ``rendezvous, no bound``: the same order without the bound (``c`` huge);
- ``least loaded, no key``: no affinity (each turn to the engine with the fewest in flight).

Reported: the busiest engine's in-flight generations over the mean across the three (sampled every 5 ms
while any runs: the mean of the samples and the worst), sessions per engine (by the engine of their first
turn; max/mean), turns not on their session's first engine, and prefix hits (cached prompt tokens over
prompt tokens, as the engines' KV models report them). Each policy's sessions have their own text, so no
policy reuses another's blocks.

    PYTHONPATH=$PWD python benchmarks/fleet_placement.py [--sessions 64,256] [--turns 4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import random
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # support.trtllm_grpc_harness: the fake engines as processes

from support.trtllm_grpc_harness import GrpcEngine, grpc_engines  # noqa: E402

from trtllm_responses.executors.base import GenerationRequest, SamplingSettings  # noqa: E402
from trtllm_responses.executors.trtllm_grpc.executor import TrtllmGrpcExecutor  # noqa: E402
from trtllm_responses.harmony import HarmonyEncoding, load_encoding  # noqa: E402

WORDS = "tide harbour lantern copper meadow signal orbit quartz ember willow basalt cipher".split()
#: The request id of the turn choosing its engine (each session is a task of its own: set before it generates).
_current: contextvars.ContextVar[str] = contextvars.ContextVar("current")
POLICIES = {"rendezvous, c=1.25": 1.25, "rendezvous, no bound": 1e9, "least loaded, no key": None}


def words(seed: str, count: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(count))


@dataclass
class Tally:
    """What one policy's run saw."""

    prompt: int = 0
    cached: int = 0
    ratios: list[float] = field(default_factory=list)
    first: dict[str, str] = field(default_factory=dict)  # session -> its first turn's engine
    moved: int = 0
    turns: int = 0


async def session(
    executor: TrtllmGrpcExecutor,
    encoding: HarmonyEncoding,
    name: str,
    turns: int,
    keyed: bool,
    placed: dict[str, str],
    tally: Tally,
) -> None:
    """One session's turns, each prompt the conversation so far."""
    rng = random.Random(name)
    prompt = encoding.encode(
        f"<|start|>system<|message|>You are a careful agent. {words(name, 300)}<|end|>"
        f"<|start|>developer<|message|># Instructions\n{words(name + 'i', 200)}<|end|>"
    )
    for turn in range(turns):
        prompt += encoding.encode(
            f"<|start|>user<|message|>{words(f'{name}-{turn}', 12)}<|end|><|start|>assistant"
        )
        request_id = f"{name}-t{turn}"
        _current.set(request_id)
        settings = SamplingSettings(max_tokens=64, stop_token_ids=encoding.assistant_action_stops)
        request = GenerationRequest(request_id, list(prompt), settings, session_key=name if keyed else None)
        output: list[int] = []
        cached = 0
        async for delta in executor.generate(request):
            output += delta.token_ids
            cached = max(cached, delta.cached_tokens or 0)
        engine = placed.pop(request_id)
        tally.first.setdefault(name, engine)
        tally.moved += engine != tally.first[name]
        tally.turns += 1
        tally.prompt += len(prompt)
        tally.cached += cached
        prompt += output + encoding.encode("<|end|>")
        await asyncio.sleep(rng.uniform(0, 0.02))


async def run_policy(
    urls: list[str], encoding: HarmonyEncoding, policy: str, sessions: int, turns: int
) -> dict[str, Any]:
    factor = POLICIES[policy]
    # Health checks off for the run: on a CPU-starved machine the fake engines answer them late and leave placement.
    executor = TrtllmGrpcExecutor(urls, encoding=encoding, health_interval=3600)
    await executor.start()
    pool = executor.pool
    if factor is not None:
        pool._factor = factor
    placed: dict[str, str] = {}
    choose = pool.choose

    def recording(key: str | None, *, avoid: Any = ()) -> Any:
        engine = choose(key, avoid=avoid)
        placed[_current.get()] = engine.url
        return engine

    pool.choose = recording  # type: ignore[method-assign]
    tally = Tally()
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            loads = list(pool.loads().values())
            if sum(loads):
                tally.ratios.append(max(loads) / statistics.mean(loads))
            await asyncio.sleep(0.005)

    sampler = asyncio.ensure_future(sample())
    tag = "".join(ch for ch in policy if ch.isalnum())  # each policy's own text: no reuse of another's blocks
    await asyncio.gather(
        *(
            session(executor, encoding, f"{tag}-{sessions}-{i}", turns, factor is not None, placed, tally)
            for i in range(sessions)
        )
    )
    done.set()
    await sampler
    await executor.shutdown()
    per_engine = Counter(tally.first.values())
    counts = [per_engine.get(url, 0) for url in urls]
    return {
        "policy": policy,
        "sessions": sessions,
        "turns": tally.turns,
        "inflight_max_over_mean": round(statistics.mean(tally.ratios), 2) if tally.ratios else None,
        "inflight_max_over_mean_worst": round(max(tally.ratios), 2) if tally.ratios else None,
        "sessions_per_engine": counts,
        "sessions_max_over_mean": round(max(counts) / statistics.mean(counts), 2),
        "turns_moved": tally.moved,
        "prefix_hits": round(tally.cached / tally.prompt, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", default="64,256")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    encoding = load_encoding()
    engines = [GrpcEngine(env={"FAKE_TRTLLM_STEP_DELAY": "0.001"}) for _ in range(3)]
    rows = []
    with grpc_engines(*engines):
        urls = [f"grpc://{e.target}" for e in engines]
        for count in [int(n) for n in args.sessions.split(",")]:
            for policy in POLICIES:
                rows.append(asyncio.run(run_policy(urls, encoding, policy, count, args.turns)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        "| sessions | policy | in flight, max/mean (mean of samples; worst) | sessions per engine (max/mean) "
        "| turns moved | prefix hits |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['sessions']} | {r['policy']} | {r['inflight_max_over_mean']}; {r['inflight_max_over_mean_worst']} "
            f"| {r['sessions_per_engine']} ({r['sessions_max_over_mean']}) | {r['turns_moved']} of {r['turns']} "
            f"| {r['prefix_hits']:.1%} |"
        )


if __name__ == "__main__":
    main()
