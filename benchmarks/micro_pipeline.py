"""Microbenchmark: the streaming pipeline in-process (token ids → SSE bytes) beside the parser-only floor.

Both run over the same Harmony completion (the echo executor's ``#lorem N``),
fed one token per engine step (or ``--tokens-per-step`` tokens). Reports
microseconds per token, medians of ``--repeat`` runs:

- ``harmony_parser``: openai-harmony's StreamableParser.process per token (the floor);
- ``pipeline``: our parser + ResponseStream state machine + SSE encoding, one write per step.

    python benchmarks/micro_pipeline.py [--tokens 2000] [--repeat 15] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from openai_harmony import Role, StreamableParser

sys.path.insert(0, str(Path(__file__).parent))
from _server import report  # noqa: E402

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import TokenDelta  # noqa: E402
from trtllm_responses.executors.echo import EchoExecutor
from trtllm_responses.harmony import load_encoding
from trtllm_responses.request import decode_body
from trtllm_responses.request.protocol import parse_request
from trtllm_responses.responses.service import ResponsesService
from trtllm_responses.server.sse import encode_events
from trtllm_responses.store import ConversationHistoryStore
from trtllm_responses.stream import ResponseStream, TokenStreamProcessor


def completion_tokens(n: int) -> tuple[list[int], Any, HarmonyAdapter]:
    encoding = load_encoding()
    adapter = HarmonyAdapter(encoding)
    echo = EchoExecutor(encoding)
    prompt = adapter.build_prompt(parse_request({"input": f"#lorem {n}"})).token_ids
    return echo.plan(prompt), encoding, adapter


def run_parser(encoding: Any, tokens: list[int]) -> float:
    parser = StreamableParser(encoding.harmony, Role.ASSISTANT)
    start = time.perf_counter()
    for token in tokens:
        parser.process(token)
        _ = parser.last_content_delta  # what a server reads each step
    return time.perf_counter() - start


def run_pipeline(service: ResponsesService, tokens: list[int], per_step: int) -> tuple[float, int]:
    prepared = asyncio.run(service.prepare(decode_body(json.dumps({"input": "bench"}).encode())))
    processor = TokenStreamProcessor(
        ResponseStream(prepared.response), service.adapter.encoding, len(prepared.prompt.token_ids)
    )
    steps = [TokenDelta(tuple(tokens[i : i + per_step])) for i in range(0, len(tokens) - per_step, per_step)]
    steps.append(TokenDelta(tuple(tokens[len(steps) * per_step :]), "stop"))
    written = 0
    start = time.perf_counter()
    written += len(encode_events(processor.start()))
    for step in steps:
        written += len(encode_events(processor.process(step)))
    elapsed = time.perf_counter() - start
    return elapsed, written


def measure(tokens_n: int, repeat: int, per_step: int) -> dict[str, Any]:
    tokens, encoding, adapter = completion_tokens(tokens_n)
    service = ResponsesService(
        executor=EchoExecutor(encoding), store=ConversationHistoryStore(), adapter=adapter, model_name="bench"
    )
    parser_runs, pipeline_runs = [], []
    written = 0
    gc.disable()
    try:
        for _ in range(repeat):
            parser_runs.append(run_parser(encoding, tokens))
            elapsed, written = run_pipeline(service, tokens, per_step)
            pipeline_runs.append(elapsed)
    finally:
        gc.enable()
    parser_us = statistics.median(parser_runs) / len(tokens) * 1e6
    pipeline_us = statistics.median(pipeline_runs) / len(tokens) * 1e6
    return {
        "tokens": len(tokens),
        "tokens_per_step": per_step,
        "harmony_parser_us_per_token": round(parser_us, 3),
        "pipeline_us_per_token": round(pipeline_us, 3),
        "ratio": round(pipeline_us / parser_us, 2),
        "sse_bytes_per_token": round(written / len(tokens), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--tokens-per-step", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = measure(args.tokens, args.repeat, args.tokens_per_step)
    report(result, args.json)


if __name__ == "__main__":
    main()
