"""Agent sessions against an engine's KV cache, in simulated time: what a turn finds of its prefix.

The workload is the shape of ``_codex_session.py`` in tokens: a session's first prompt is ~4.3k tokens
(instructions, tools, Codex's first user messages); each turn the model writes ~150 tokens (reasoning and a
``shell`` call, or a final answer every ANSWER_EVERY-th turn) and the next turn brings the call's output
(``output_tokens_target``: ~2.4k tokens early to ~3.5k late) or a new user request (~60 tokens); 40 turns end
near 120k tokens. Every session's first SHARED_PREFIX tokens are the same (the instructions and tools); every
later token id is the session's own, so what a turn reuses past that is its own session's prefix.

Time is simulated (no sleeping): each session's next turn arrives after the engine ran this one and the
pause that follows it. Pauses are drawn (seeded) from the shape of a Codex session's trace:

- after a tool call, the tool runs and Codex sends its output: log-normal, median 2 s, 90% under ~10 s,
  capped at 120 s (``shell`` commands: reading files, ``rg``, a test run now and then);
- after a final answer, the user reads it and writes the next request: log-normal, median 45 s, 90% under
  ~3 min, capped at 15 min;
- the engine's time for a turn: 0.2 s + 0.05 ms per prefill token recomputed + 8 ms per output token (a
  gpt-oss-120b-like shape; it only orders events, no figure depends on it being exact).

Sessions start spread over the first ``start_spread`` seconds. After its last turn a session ends.
"""

from __future__ import annotations

import heapq
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from _codex_session import output_tokens_target

__all__ = [
    "POLICIES",
    "FakePoolEngine",
    "KvEngine",
    "Outcome",
    "SessionPlan",
    "TurnResult",
    "plan_sessions",
    "run",
    "simulate",
]

FIRST_PROMPT = 4300
#: Of the first prompt, what every session starts with: Codex's instructions and tools (the system and developer
#: messages), the same tokens in every session.
SHARED_PREFIX = 3000
OUTPUT_TOKENS = 150
NEW_REQUEST_TOKENS = 60
TOOL_PAUSE = (2.0, 1.25, 120.0)  # median s, sigma of log, cap s
USER_PAUSE = (45.0, 1.1, 900.0)


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """One turn: the tokens it adds to the prompt, how many the model writes, whether it ends in a tool call,
    and the pause after it (seconds)."""

    added: int
    output: int
    tool_call: bool
    pause: float


@dataclass(frozen=True, slots=True)
class SessionPlan:
    index: int
    start: float
    turns: tuple[TurnPlan, ...]
    shared: int  # its first tokens, the same in every session


def _pause(rng: random.Random, shape: tuple[float, float, float]) -> float:
    median, sigma, cap = shape
    return min(cap, math.exp(math.log(median) + sigma * rng.gauss(0.0, 1.0)))


def plan_sessions(
    count: int,
    turns: int = 40,
    answer_every: int = 10,
    seed: int = 41,
    start_spread: float = 60.0,
    scale: int = 1,
) -> list[SessionPlan]:
    """``count`` sessions of ``turns`` turns, their token counts divided by ``scale`` (a smaller simulation of
    the same shape: every figure reported is a ratio or a count of turns)."""
    rng = random.Random(seed)
    plans = []
    for s in range(count):
        steps = []
        for t in range(1, turns + 1):
            if t == 1:
                added = FIRST_PROMPT
            elif steps[-1].tool_call:
                added = output_tokens_target(s, t) + 10
            else:
                added = NEW_REQUEST_TOKENS
            tool_call = not (answer_every > 0 and t % answer_every == 0)
            pause = _pause(rng, TOOL_PAUSE if tool_call else USER_PAUSE)
            steps.append(TurnPlan(max(1, added // scale), max(1, OUTPUT_TOKENS // scale), tool_call, pause))
        plans.append(SessionPlan(s, rng.uniform(0.0, start_spread), tuple(steps), SHARED_PREFIX // scale))
    return plans


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What one turn found: its prompt's length and how many of its tokens were reused (not recomputed)."""

    session: int
    turn: int
    prompt: int
    reused: int
    previous_prompt: int  # the prompt + output the previous turn left (0 on the first turn)


class KvEngine(Protocol):
    """An engine's KV cache as the simulation drives it (benchmarks/agent_session.py --kv adapts the fake
    TensorRT-LLM's pool to it)."""

    def start(self, session: int, turn: TurnPlan, number: int, prompt: list[int], now: float) -> int:
        """A turn's prompt arrives: the tokens reused from the cache (``prompt``: read it, do not keep it)."""

    def finish(self, session: int, turn: TurnPlan, number: int, tokens: list[int], now: float) -> None:
        """The turn ended: ``tokens`` (prompt and output) are released to the cache."""

    def end(self, session: int, tokens: list[int], now: float) -> None:
        """The session ended (its client said so)."""


@dataclass
class Outcome:
    results: list[TurnResult] = field(default_factory=list)

    def recomputed(self) -> int:
        return sum(r.prompt - r.reused for r in self.results)

    def prompt_tokens(self) -> int:
        return sum(r.prompt for r in self.results)

    def missed(self, block: int) -> int:
        """Turns after the first whose reuse fell short of the previous turn's tokens by a block or more."""
        return sum(1 for r in self.results if r.turn > 1 and r.reused < r.previous_prompt - block)

    def later_turns(self) -> int:
        return sum(1 for r in self.results if r.turn > 1)


def _engine_seconds(recomputed: int, output: int) -> float:
    return 0.2 + 0.00005 * recomputed + 0.008 * output


def grow(history: list[int], session: int, count: int, prefix: int) -> None:
    """Add ``count`` tokens to ``session``'s sequence: position i is token i in the first ``prefix`` (shared by
    every session), else an id of the session's own (sessions share no block past the prefix)."""
    start = len(history)
    shared = max(0, min(count, prefix - start))
    history.extend(range(start, start + shared))
    own = 1_000_000 + session * 10_000_000
    history.extend(range(own + start + shared, own + start + count))


def simulate(plans: list[SessionPlan], engine: KvEngine) -> Outcome:
    """Run every session's turns in simulated time against ``engine``: a turn starts (its prompt looks up the
    cache), ends after the engine's time (its tokens go back to the cache), and the session's next turn starts
    after the pause."""
    outcome = Outcome()
    tokens: dict[int, list[int]] = {p.index: [] for p in plans}
    by_index = {p.index: p for p in plans}
    # (time, order, session, turn index, ends): order keeps ties in the order they were made.
    events: list[tuple[float, int, int, int, bool]] = []
    order = 0

    def push(at: float, session: int, turn: int, ends: bool) -> None:
        nonlocal order
        heapq.heappush(events, (at, order, session, turn, ends))
        order += 1

    for p in plans:
        push(p.start, p.index, 0, False)
    while events:
        now, _, s, t, ends = heapq.heappop(events)
        plan, history = by_index[s], tokens[s]
        turn = plan.turns[t]
        if ends:
            grow(history, s, turn.output, plan.shared)
            engine.finish(s, turn, t + 1, history, now)
            if t + 1 < len(plan.turns):
                push(now + turn.pause, s, t + 1, False)
            else:
                engine.end(s, history, now)
            continue
        previous = len(history)
        grow(history, s, turn.added, plan.shared)
        reused = engine.start(s, turn, t + 1, history, now)
        outcome.results.append(TurnResult(s, t + 1, len(history), reused, previous))
        push(now + _engine_seconds(len(history) - reused, turn.output), s, t, True)
    return outcome


# -- the fake TensorRT-LLM's pool, driven as the executor drives the engine ---------------------------------

#: What the server sends, per policy: ``main`` (before issue 41: nothing, every block at the default priority),
#: ``paused`` (issue 41: a session turn with client tools kept raised for the tool pause, set back to the default
#: when it ends with a final answer), ``ended`` (also released when the client says the session ended, as
#: Dynamo's ``x-dynamo-session-final`` does; Codex does not say).
POLICIES = ("main", "paused", "ended")


class FakePoolEngine:
    """:class:`KvEngine` over the fake TensorRT-LLM's ``KvPool`` (``tests/fake_trtllm/tensorrt_llm/_kv_pool.py``),
    with the retention the TensorRT-LLM executor builds (``executors/trtllm_kv.py``: ``turn_config`` for each
    turn, ``release_config`` for the one-token request that re-stamps a session's blocks), on a simulated clock."""

    def __init__(self, policy: str, device_tokens: int, host_bytes: int, tool_pause: int, keep: int) -> None:
        from tensorrt_llm._kv_pool import KvPool  # the fake's, on sys.path (main below)
        from tensorrt_llm.llmapi import KvCacheRetentionConfig

        from trtllm_responses.executors import GenerationRequest, SamplingSettings
        from trtllm_responses.executors.trtllm_kv import release_config, turn_config

        self.now = 0.0
        self.pool = KvPool(device_tokens=device_tokens, host_bytes=host_bytes, clock=lambda: self.now)
        self.policy, self.tool_pause = policy, tool_pause
        self._config, self._turn, self._release = KvCacheRetentionConfig, turn_config, release_config
        self._request, self._sampling = GenerationRequest, SamplingSettings(max_tokens=1, stop_token_ids=())
        self._retention: dict[int, Any] = {}
        self.released = 0
        self.keep = keep

    def _turn_retention(self, session: int, prompt: list[int]) -> Any:
        if self.policy == "main":
            return None
        request = self._request(
            f"s{session}", prompt, self._sampling, session_key=f"s{session}", client_tools=True
        )
        return self._turn(self._config, request, self.tool_pause)

    def start(self, session: int, turn: TurnPlan, number: int, prompt: list[int], now: float) -> int:
        self.now = now
        retention = self._retention[session] = self._turn_retention(session, prompt)
        return self.pool.reuse(prompt, retention=retention).tokens

    def finish(self, session: int, turn: TurnPlan, number: int, tokens: list[int], now: float) -> None:
        self.now = now
        prompt_len = len(tokens) - turn.output
        self.pool.store(tokens, retention=self._retention.pop(session), prompt_len=prompt_len)
        if self.policy != "main" and not turn.tool_call:
            self._restamp(tokens, ended=False)

    def end(self, session: int, tokens: list[int], now: float) -> None:
        self.now = now
        if self.policy == "ended":
            self._restamp(tokens, ended=True)

    def _restamp(self, tokens: list[int], ended: bool) -> None:
        """The executor's release: a one-token request over the session's tokens past the shared prefix."""
        config = self._release(self._config, self.keep, ended)
        self.pool.reuse(tokens, retention=config)
        self.pool.store([*tokens, 0], retention=config, prompt_len=len(tokens))
        self.released += 1


class _Ideal:
    """An engine with room for everything: every turn reuses all its session left; it measures the working set,
    the most tokens the live sessions hold at once (a session's tokens are live from its first turn to its end)."""

    def __init__(self) -> None:
        self.live: dict[int, int] = {}
        self.total = self.peak = 0

    def start(self, session: int, turn: TurnPlan, number: int, prompt: list[int], now: float) -> int:
        return len(prompt) - turn.added

    def finish(self, session: int, turn: TurnPlan, number: int, tokens: list[int], now: float) -> None:
        self.total += len(tokens) - self.live.get(session, 0)
        self.live[session] = len(tokens)
        self.peak = max(self.peak, self.total)

    def end(self, session: int, tokens: list[int], now: float) -> None:
        self.total -= self.live.pop(session, 0)


def working_set(plans: list[SessionPlan]) -> int:
    """The most tokens the sessions' KV cache holds at once when nothing is evicted (:class:`_Ideal`)."""
    ideal = _Ideal()
    simulate(plans, ideal)
    return ideal.peak


def run(
    sessions: int,
    policy: str,
    *,
    pool_share: float,
    host_share: float,
    seed: int,
    tool_pause: int,
    scale: int,
) -> dict[str, Any]:
    """One simulation: ``sessions`` sessions (token counts divided by ``scale``), a device pool of
    ``pool_share`` of their working set (:func:`working_set`) and a host tier of ``host_share`` of it."""
    from tensorrt_llm._kv_pool import KV_BYTES_PER_TOKEN

    plans = plan_sessions(sessions, seed=seed, scale=scale)
    working = working_set(plans)
    host_bytes = int(working * host_share) * KV_BYTES_PER_TOKEN
    engine = FakePoolEngine(policy, int(working * pool_share), host_bytes, tool_pause, plans[0].shared)
    started = time.perf_counter()
    outcome = simulate(plans, engine)
    later = outcome.later_turns()
    return {
        "sessions": sessions,
        "policy": policy,
        "host_share": host_share,
        "working_set_tokens": working,
        "scale": scale,
        "prompt_tokens": outcome.prompt_tokens(),
        "recomputed_tokens": outcome.recomputed(),
        "recomputed_per_turn": outcome.recomputed() * scale / len(outcome.results),  # in real tokens
        "missed_turns": outcome.missed(engine.pool.block),
        "later_turns": later,
        "evicted_blocks": engine.pool.counts["evicted"],
        "offloaded_blocks": engine.pool.counts["offloaded"],
        "onboarded_blocks": engine.pool.counts["onboarded"],
        "releases": engine.released,
        "seconds": time.perf_counter() - started,
    }


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of :func:`run`'s rows."""
    lines = [
        "| sessions | host tier | policy | prefill recomputed a turn (tokens) | share of prompt tokens recomputed "
        "| turns that missed their prefix | blocks evicted / offloaded / onboarded |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['sessions']} | {r['host_share']:g}x | {r['policy']} | {r['recomputed_per_turn']:,.0f} "
            f"| {r['recomputed_tokens'] / r['prompt_tokens']:.1%} "
            f"| {r['missed_turns']} of {r['later_turns']} ({r['missed_turns'] / r['later_turns']:.1%}) "
            f"| {r['evicted_blocks']:,} / {r['offloaded_blocks']:,} / {r['onboarded_blocks']:,} |"
        )
    return lines


def kv_main(
    sessions: list[int], hosts: list[float], *, pool_share: float, seed: int, tool_pause: int, scale: int
) -> list[dict[str, Any]]:
    """Every policy at every session count and host tier (``agent_session.py --kv``)."""
    root = Path(__file__).resolve().parent.parent
    for path in (root / "tests" / "fake_trtllm", root):
        if str(path) not in sys.path:
            sys.path.append(str(path))
    rows = []
    for count in sessions:
        for host in hosts:
            for policy in POLICIES:
                row = run(
                    count,
                    policy,
                    pool_share=pool_share,
                    host_share=host,
                    seed=seed,
                    tool_pause=tool_pause,
                    scale=scale,
                )
                print(
                    f"{count} sessions, host {host:g}x, {policy}: {row['recomputed_per_turn']:,.0f} tokens a turn "
                    f"recomputed, {row['missed_turns']} turns missed ({row['seconds']:.0f} s)",
                    file=sys.stderr,
                )
                rows.append(row)
    return rows
