"""CPU time per token of ``ResponsesService.drive`` in-process (echo, unpaced, no transport): one line of JSON.

    python benchmarks/_drive_cpu.py [--tokens 20000] [--repeat 5] [--summary]

Run by ``summaries.py --parts cpu`` under each tree (PYTHONPATH) in turn; the minimum over repeats of the
process's CPU time is steady on a shared machine where wall-clock throughput is not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony.encoding import load_encoding
from trtllm_responses.responses.service import ResponsesService
from trtllm_responses.store import ConversationHistoryStore


async def main(tokens: int, repeat: int, summary: bool) -> dict[str, float]:
    encoding = load_encoding()
    adapter = HarmonyAdapter(encoding)
    service = ResponsesService(
        executor=EchoExecutor(encoding),
        store=ConversationHistoryStore(10, 1 << 24),
        adapter=adapter,
        model_name="m",
    )
    body: dict[str, object] = {"input": f"#lorem {tokens}", "store": False}
    if summary:
        body["reasoning"] = {"summary": "auto"}
    delivered = 0

    async def deliver(events: list[object]) -> None:
        nonlocal delivered
        delivered += len(events)

    best = float("inf")
    for _ in range(repeat):
        prepared = await service.prepare(await service.decode(json.dumps(body).encode()))
        start = time.process_time()
        await service.run(prepared).drive(deliver)
        best = min(best, time.process_time() - start)
    return {"us_per_token": round(best / tokens * 1e6, 3)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.tokens, args.repeat, args.summary))))
