"""What the history costs a replayed turn, in-process: ``ResponsesService.prepare`` of a Codex-shaped
session's replay (``_codex_session.py``) at turns 2, 10, 20, 30 and 40, when every item is cached.

Each measured turn's body is prepared ``--repeat`` times (the previous turn's body decoded first each
time, untimed, so that the body is found as the turn after it, as a server sees it), the minimum kept:
on this noisy VM the minimum is what the code costs. Then the turn is answered by the echo executor
and its output replayed next turn, as the session benchmark does over HTTP. The slope from turn 10 to
40 is what each 100k tokens of history add to a turn.

    python benchmarks/replay_prepare.py [--repeat 40] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))

from _codex_session import Session, request_body  # noqa: E402

from trtllm_responses.adapter import HarmonyAdapter  # noqa: E402
from trtllm_responses.executors import EchoExecutor  # noqa: E402
from trtllm_responses.harmony import load_encoding  # noqa: E402
from trtllm_responses.responses import ContentSealer, ResponsesService  # noqa: E402
from trtllm_responses.store import ConversationHistoryStore  # noqa: E402

MEASURED = (2, 10, 20, 30, 40)


def dumps(body: dict[str, Any]) -> bytes:
    """As the clients write a body: compact, non-ASCII as is (the openai SDK's ``openapi_dumps``)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def measure(repeat: int) -> list[dict[str, Any]]:
    encoding = load_encoding()
    service = ResponsesService(
        executor=EchoExecutor(encoding),
        store=ConversationHistoryStore(10, 1 << 20),
        adapter=HarmonyAdapter(encoding),
        model_name="gpt-oss",
        sealer=ContentSealer(b"k" * 32),
    )
    session = Session(index=0, key="replay-prepare", answer_every=10)
    previous: bytes | None = None
    rows = []
    for turn in range(1, max(MEASURED) + 1):
        session.begin_turn(turn)
        body = dumps(request_body("replay", session))
        prepared = await service.prepare(await service.decode(body))
        service.adapter.admit(prepared.prompt)
        if turn in MEASURED:
            times = []
            for _ in range(repeat):
                if previous is not None:
                    await service.decode(previous)
                start = time.perf_counter()
                again = await service.prepare(await service.decode(body))  # decoding timed too, as before
                times.append(time.perf_counter() - start)
                service.adapter.admit(again.prompt)
            rows.append(
                {
                    "turn": turn,
                    "prompt_tokens": len(prepared.prompt.token_ids),
                    "body_bytes": len(body),
                    "prepare_ms_min": round(min(times) * 1e3, 3),
                    "prepare_ms_p50": round(sorted(times)[len(times) // 2] * 1e3, 3),
                }
            )
        final = orjson.loads(await service.run(prepared).drive())
        session.end_turn(final["id"], final["output"])
        previous = body
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(measure(args.repeat))
    first, last = next(r for r in rows if r["turn"] == 10), rows[-1]
    slope = (last["prepare_ms_min"] - first["prepare_ms_min"]) / (
        last["prompt_tokens"] - first["prompt_tokens"]
    )
    if args.json:
        print(json.dumps({"rows": rows, "ms_per_100k_tokens": round(slope * 1e5, 3)}))
        return
    print("  turn  prompt tokens  body bytes  prepare min / p50 ms (every item cached)")
    for r in rows:
        print(
            f"  {r['turn']:4d}  {r['prompt_tokens']:13,d}  {r['body_bytes']:10,d}  "
            f"{r['prepare_ms_min']:.3f} / {r['prepare_ms_p50']:.3f}"
        )
    print(f"history's cost, turns 10-40: {slope * 1e5:.2f} ms per 100k tokens")


if __name__ == "__main__":
    main()
