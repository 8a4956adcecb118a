"""The SDK's deferred models are built when the server starts, not in the first request of each kind."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from support.paths import ROOT

# In a process of its own: this test process has built many SDK models already.
_PROBE = textwrap.dedent(
    """
    import asyncio
    from openai.types.responses import ResponseCompletedEvent, ResponseReasoningSummaryTextDeltaEvent
    from trtllm_responses.adapter import HarmonyAdapter
    from trtllm_responses.executors import EchoExecutor
    from trtllm_responses.harmony import load_encoding
    from trtllm_responses.server import create_app
    from trtllm_responses.server.config import ServerConfig
    from trtllm_responses.store import open_store

    kinds = (ResponseCompletedEvent, ResponseReasoningSummaryTextDeltaEvent)
    encoding = load_encoding()
    config = ServerConfig(served_model_name="m", start_render_worker=False)
    app = create_app(config, EchoExecutor(encoding), open_store("memory", max_responses=100, max_bytes=1 << 20), HarmonyAdapter(encoding))
    before = [k.__pydantic_complete__ for k in kinds]

    async def start() -> list[bool]:
        async with app.api.router.lifespan_context(app.api):
            return [k.__pydantic_complete__ for k in kinds]

    print(before, asyncio.run(start()))
    """
)


def test_server_start_builds_the_sdk_models_it_writes() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[False, False] [True, True]"
