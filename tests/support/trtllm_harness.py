"""The fake TensorRT-LLM (``tests/fake_trtllm/``) for tests: importable as ``tensorrt_llm`` in this process,
the TensorRT-LLM executor over it, and ``serve --engine trtllm`` as a subprocess that imports it."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from support.paths import FAKE_TRTLLM
from support.process_harness import with_test_flags
from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import GenerationRequest, SamplingSettings, TokenDelta
from trtllm_responses.executors.trtllm import TrtllmExecutor
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request


def _trtllm_modules() -> list[str]:
    return [m for m in sys.modules if m == "tensorrt_llm" or m.startswith("tensorrt_llm.")]


@contextlib.contextmanager
def fake_trtllm_importable() -> Iterator[ModuleType]:
    """The fake TensorRT-LLM importable as ``tensorrt_llm`` while the block runs; other tests never find it."""
    patch = pytest.MonkeyPatch()
    patch.syspath_prepend(FAKE_TRTLLM)
    for name in _trtllm_modules():
        patch.delitem(sys.modules, name)
    try:
        yield importlib.import_module("tensorrt_llm")
    finally:
        for name in _trtllm_modules():
            sys.modules.pop(name, None)
        patch.undo()


def executor_for(encoding: HarmonyEncoding, **kwargs: Any) -> TrtllmExecutor:
    llm_kwargs = {
        "model": "/ckpt/gpt-oss-tiny",
        "kv_cache_config": {"enable_block_reuse": True, "free_gpu_memory_fraction": 0.9},
        **kwargs,
    }
    return TrtllmExecutor(llm_kwargs, end_id=encoding.return_)


def request(
    adapter: HarmonyAdapter, text: str, max_tokens: int = 4096, request_id: str = "r1"
) -> GenerationRequest:
    prompt = adapter.build_prompt(parse_request({"input": text})).token_ids
    return GenerationRequest(request_id, prompt, SamplingSettings(max_tokens, adapter.stop_token_ids))


async def collect(executor: TrtllmExecutor, req: GenerationRequest) -> list[TokenDelta]:
    return [d async for d in executor.generate(req)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, args: list[str], log: Path, env_extra: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.log = log
        env = {**os.environ, "PYTHONPATH": FAKE_TRTLLM, "FAKE_TRTLLM_LOG": str(log), **(env_extra or {})}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trtllm_responses.cli",
                "serve",
                *with_test_flags(args),
                "--port",
                str(self.port),
                "--log_level",
                "warning",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"server exited: {self.process.stdout.read() if self.process.stdout else ''}"
                )
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not come up")
            time.sleep(0.1)

    def records(self, event: str) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [r for r in map(json.loads, self.log.read_text().splitlines()) if r["event"] == event]

    def stop(self) -> str:
        self.process.terminate()
        out, _ = self.process.communicate(timeout=30)
        return out
