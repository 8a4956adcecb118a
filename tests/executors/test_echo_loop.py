"""The echo executor never holds the event loop on a large last message (issue 44, point 9).

Its plan for a 1 MB user message (decoding it, copying its tokens, finding where it stops) is work of
hundreds of milliseconds in Python: it held the loop 160-300 ms on a quiet machine, where the server's own
path takes steps of 10 ms for the same bytes. A probe task on the loop measures the longest gap between
its wake-ups while the executor plans and streams the answer's first tokens; the bound is a regression
guard with a wide margin (``benchmarks/many_items.py`` measures it, beside the server path).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import GenerationRequest, SamplingSettings
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony import HarmonyEncoding, parse_completion
from trtllm_responses.request.protocol import parse_request

#: The longest the loop may go without running the probe (before: 160-300 ms quiet, 150-480 ms loaded;
#: after: 30-70 ms on a loaded 2-core machine, most of it waiting for a core).
GAP_BOUND_S = 0.1


def _large_text(chars: int, head: str = "") -> str:
    words = " ".join(f"word{i}" for i in range(chars // 5))
    return (head + words)[:chars]


async def _gaps_while_planning(echo: EchoExecutor, prompt: list[int], first: int) -> tuple[float, list[int]]:
    """The longest gap the loop's probe saw while ``echo`` planned ``prompt`` and streamed ``first`` tokens."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    prober = asyncio.create_task(probe())
    await asyncio.sleep(0.01)
    request = GenerationRequest("r1", prompt, SamplingSettings(max_tokens=400_000, stop_token_ids=(200002,)))
    tokens: list[int] = []
    async for delta in echo.generate(request):
        tokens += delta.token_ids
        if len(tokens) >= first:
            break
    done.set()
    await prober
    return max(gaps), tokens


@pytest.mark.parametrize("head", ["", "#"], ids=["plain-echo", "decoded-for-a-rule"])
async def test_a_megabyte_last_message_does_not_hold_the_loop(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter, head: str
) -> None:
    text = _large_text(1_000_000, head)
    prompt = adapter.build_prompt(parse_request({"input": text})).token_ids
    gap, tokens = await _gaps_while_planning(EchoExecutor(encoding), prompt, first=8)
    assert gap < GAP_BOUND_S, f"the echo held the loop {gap * 1000:.0f} ms"
    assert tokens  # it answered


async def test_the_answer_planned_off_the_loop_is_the_same(
    encoding: HarmonyEncoding, adapter: HarmonyAdapter
) -> None:
    """Byte for byte what the rules say: the whole message echoed after ``Echoing the user.``."""
    text = _large_text(300_000)
    prompt = adapter.build_prompt(parse_request({"input": text})).token_ids
    echo = EchoExecutor(encoding)
    request = GenerationRequest("r1", prompt, SamplingSettings(max_tokens=400_000, stop_token_ids=(200002,)))
    tokens = [t async for d in echo.generate(request) for t in d.token_ids]
    assert tokens == echo.plan(prompt, 400_000)
    messages = [(m.header.channel, m.text) for m in parse_completion(encoding, tokens)]
    assert messages == [("analysis", "Echoing the user."), ("final", text)]
