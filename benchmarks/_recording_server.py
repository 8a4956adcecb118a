"""``trtllm-responses serve`` whose echo executor also writes every generation to a tape, for benchmarks.

    python benchmarks/_recording_server.py PORT TAPE [serve flags...]     (_server.start_server(command=...))

Each generation appends one JSON line to TAPE: ``{"id": request id, "prompt": [token ids],
"output": [token ids]}`` (a response's main generation has the response's id). Writing costs the
server time, so timed runs use the plain server; this one answers what the prompts were.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator
from typing import IO

import trtllm_responses.executors as executors
from trtllm_responses.cli import main as cli_main
from trtllm_responses.executors import EchoExecutor, GenerationRequest, TokenDelta


def recording_echo(tape: IO[str]) -> type[EchoExecutor]:
    """An EchoExecutor class that writes each generation's prompt and output to ``tape``."""

    class RecordingEcho(EchoExecutor):
        async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
            prompt = list(request.prompt_token_ids)
            output: list[int] = []
            try:
                async for delta in super().generate(request):
                    output.extend(delta.token_ids)
                    yield delta
            finally:  # also when the server stops iterating at the finishing delta
                tape.write(json.dumps({"id": request.request_id, "prompt": prompt, "output": output}) + "\n")
                tape.flush()

    return RecordingEcho


def main() -> int:
    port, tape_path, *flags = sys.argv[1:]
    with open(tape_path, "a", encoding="utf-8") as tape:
        executors.EchoExecutor = recording_echo(tape)  # type: ignore[misc]  # serve builds it from here
        return cli_main(["serve", "--port", port, "--log_level", "warning", *flags])


if __name__ == "__main__":
    sys.exit(main())
