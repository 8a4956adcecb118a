"""HTTP benchmark: Chat Completions and Anthropic Messages streams beside Responses streams, on one server, interleaved.

One ``trtllm-responses serve`` process (echo executor, unpaced); the load generator
(``trtllm-responses bench``) runs N concurrent streams of ``#lorem N`` against
``/v1/responses``, ``/v1/chat/completions`` and ``/v1/messages`` (thinking shown) in
alternation (``--runs`` of each, so the machine's load drifts over all alike) and reports, per
API, the medians of the server's CPU time per streamed token and the streamed tokens/s, and the
chat/Responses and Messages/Responses ratios of CPU per token (the target: within 10%).

Beside it, the same comparison in-process, where a shared machine's noise is smaller: the
echo executor's completion through the parser and the stream state machine, each step's
events written as Responses SSE frames (``server/sse.py``), as chat chunks
(``server/chat_chunks.py``) or as Messages events (``server/messages_events.py``), alternately,
``--repeat`` times (median microseconds per token).

    python benchmarks/chat_stream.py [--concurrency 64] [--lorem 2000] [--duration 10] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _server import pin_this_process, report, start_server, stop  # noqa: E402
from micro_pipeline import completion_tokens  # noqa: E402

from trtllm_responses.cli.bench import BenchConfig, run_bench  # noqa: E402
from trtllm_responses.executors.base import TokenDelta  # noqa: E402
from trtllm_responses.request.protocol import parse_request  # noqa: E402
from trtllm_responses.server.dialects.chat_chunks import ChatChoice, ChunkFrames  # noqa: E402
from trtllm_responses.server.dialects.messages_events import MessageWriter  # noqa: E402
from trtllm_responses.server.sse import encode_events  # noqa: E402
from trtllm_responses.stream import ResponseStream, TokenStreamProcessor  # noqa: E402

#: Chat's (and Messages') server CPU per token may exceed the Responses path's by at most this much.
TARGET_RATIO = 1.10
APIS = ("responses", "chat", "messages")


def in_process(tokens_n: int, repeat: int) -> dict[str, float]:
    """Median µs per token of parser + stream state machine + each writer, alternated."""
    tokens, encoding, adapter = completion_tokens(tokens_n)
    prompt = adapter.build_prompt(parse_request({"input": "bench"}))
    steps = [TokenDelta((t,)) for t in tokens[:-1]] + [TokenDelta((tokens[-1],), "stop")]
    frames = ChunkFrames("chatcmpl-bench", 0, "bench")

    def run(api: str) -> float:
        from trtllm_responses.responses.prepared import initial_response

        response = initial_response("resp_bench", parse_request({"input": "bench"}), "bench")
        processor = TokenStreamProcessor(ResponseStream(response), encoding, len(prompt.token_ids))
        choice = ChatChoice(0, frames)
        message = MessageWriter("msg_bench", "bench", len(prompt.token_ids), stream=True, thinking="shown")
        write = {"responses": encode_events, "chat": choice.feed, "messages": message.feed}[api]
        start = time.process_time()  # CPU time: a shared machine's preemptions do not count
        written = len(write(processor.start()))
        for step in steps:
            written += len(write(processor.process(step)))
        assert written > 0
        return (time.process_time() - start) / len(tokens) * 1e6

    times: dict[str, list[float]] = {api: [] for api in APIS}
    gc.disable()
    try:
        for _ in range(repeat):
            for api in APIS:
                times[api].append(run(api))
    finally:
        gc.enable()
    return {api: round(statistics.median(values), 3) for api, values in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--lorem", type=int, default=2000)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=31, help="in-process runs of each writer")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    pinned = pin_this_process()
    writers = in_process(args.lorem, args.repeat)
    server, url = start_server()
    runs: dict[str, list[dict[str, Any]]] = {api: [] for api in APIS}
    try:
        for _ in range(args.runs):
            for api in APIS:
                config = BenchConfig(
                    base_url=url,
                    concurrency=args.concurrency,
                    lorem=args.lorem,
                    duration=args.duration,
                    warmup=args.concurrency,
                    server_pid=server.pid,
                    progress=False,
                    api=api,
                )
                runs[api].append(run_bench(config).summary)
    finally:
        stop(server)

    def median(api: str, key: str, sub: str | None = None) -> float:
        values = [s[key][sub] if sub else s[key] for s in runs[api]]
        return round(statistics.median(v for v in values if v is not None), 3)

    result: dict[str, Any] = {
        "concurrency": args.concurrency,
        "lorem": args.lorem,
        "runs": args.runs,
        "pinned": pinned,
    }
    for api in APIS:
        result[api] = {
            "errors": sum(s["errors"] for s in runs[api]),
            "output_tokens_per_s": median(api, "output_tokens_per_s"),
            "server_us_per_token": median(api, "server_us_per_token"),
            "server_us_per_token_runs": [s["server_us_per_token"] for s in runs[api]],
            "server_cpu_utilization": median(api, "server_cpu_utilization"),
            "ttft_ms_p50": median(api, "ttft_ms", "p50"),
            "itl_ms_p50": median(api, "itl_ms", "p50"),
            "itl_ms_p99": median(api, "itl_ms", "p99"),
        }
    ratio = result["chat"]["server_us_per_token"] / result["responses"]["server_us_per_token"]
    messages = result["messages"]["server_us_per_token"] / result["responses"]["server_us_per_token"]
    result["chat_over_responses_cpu_per_token"] = round(ratio, 3)
    result["messages_over_responses_cpu_per_token"] = round(messages, 3)
    result["target"] = f"<= {TARGET_RATIO}"
    result["met"] = ratio <= TARGET_RATIO and messages <= TARGET_RATIO
    result["in_process_us_per_token"] = writers
    result["in_process_chat_over_responses"] = round(writers["chat"] / writers["responses"], 3)
    result["in_process_messages_over_responses"] = round(writers["messages"] / writers["responses"], 3)
    report(result, args.json)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
