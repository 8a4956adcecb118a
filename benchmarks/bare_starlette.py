"""Calibration floor for the HTTP benchmark: a bare Starlette app streaming pre-built SSE frames.

The issue's reference point ("a bare Starlette app streaming pre-built frames").
One pre-built delta frame per step (with a yield to the loop between steps, as
any engine-driven stream has), then a terminal event: the fixed cost of
uvicorn + Starlette + the socket per streamed token, with no Responses work.

    python benchmarks/bare_starlette.py PORT [TOKENS]
"""

from __future__ import annotations

import asyncio
import json
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

FRAME = (
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_0","output_index":1,'
    b'"content_index":0,"delta":" lorem","logprobs":[],"sequence_number":7}\n\n'
)


def main() -> None:
    port = int(sys.argv[1])
    tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    end = (
        b"event: response.completed\ndata: "
        + json.dumps(
            {
                "type": "response.completed",
                "response": {"status": "completed", "usage": {"output_tokens": tokens}},
            }
        ).encode()
        + b"\n\n"
    )

    async def frames():  # type: ignore[no-untyped-def]
        for _ in range(tokens):
            await asyncio.sleep(0)
            yield FRAME
        yield end

    async def endpoint(request: Request) -> StreamingResponse:
        await request.body()
        return StreamingResponse(frames(), media_type="text/event-stream")

    async def health(request: Request) -> StreamingResponse:
        return StreamingResponse(iter([b"ok"]))

    app = Starlette(routes=[Route("/v1/responses", endpoint, methods=["POST"]), Route("/health", health)])
    uvicorn.run(app, port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
