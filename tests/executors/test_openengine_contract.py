"""Contract test of prefill/decode disaggregation over TensorRT-LLM's OpenEngine wire, for users on GPU machines.
Skipped where it cannot run (no ``trtllm-serve`` of a real TensorRT-LLM 1.3.0rc28+, no GPU, no model).

    TRTLLM_RESPONSES_TEST_MODEL=/models/gpt-oss-20b pytest tests/executors/test_openengine_contract.py

It starts three real engines, ``trtllm-serve MODEL --grpc --grpc-protocol openengine``: a context engine and a
generation engine configured for KV transfer (``cache_transceiver_config``, what TensorRT-LLM's disaggregated
examples use), and a third for aggregated serving; then ``serve`` in front of the split pair and another in front
of the third. What only real engines can show, and the fake (``tests/fake_trtllm/``, whose decode engine
recomputes the prompt) cannot: the KV cache really moves (a greedy turn split over the two engines writes what
the aggregated engine writes), the prefill engine's prefix is reused by the session's next turn, and a cancel
during the generation leg stops it. Where one fails, the fake or ``disagg.py`` is wrong there.

``TRTLLM_RESPONSES_TEST_GPU_FRACTION`` (default 0.25): each engine's ``free_gpu_memory_fraction`` (three share the
GPU). ``TRTLLM_RESPONSES_TEST_KV_BACKEND`` (default ``DEFAULT``): the cache transceiver's backend (``NIXL``,
``UCX``, …).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.process_harness import ServeProcess
from support.redis_harness import free_port

MODEL = os.environ.get("TRTLLM_RESPONSES_TEST_MODEL")
SERVED = "gpt-oss-contract"
FRACTION = float(os.environ.get("TRTLLM_RESPONSES_TEST_GPU_FRACTION", "0.25"))
KV_BACKEND = os.environ.get("TRTLLM_RESPONSES_TEST_KV_BACKEND", "DEFAULT")
#: A real engine loads in minutes.
ENGINE_START_S = 1800


def _real_tensorrt_llm() -> bool:
    spec = importlib.util.find_spec("tensorrt_llm")
    return spec is not None and "fake_trtllm" not in str(spec.origin)


def _gpu_visible() -> bool:
    return shutil.which("nvidia-smi") is not None or os.path.exists("/dev/nvidia0")


pytestmark = pytest.mark.skipif(
    not (MODEL and _real_tensorrt_llm() and _gpu_visible() and shutil.which("trtllm-serve")),
    reason="needs TensorRT-LLM 1.3.0rc28+ (trtllm-serve), a GPU and TRTLLM_RESPONSES_TEST_MODEL",
)


def _options(path: Path, transfer: bool) -> Path:
    lines = [f"kv_cache_config:\n  free_gpu_memory_fraction: {FRACTION}\n  enable_block_reuse: true\n"]
    if transfer:
        lines.append(f"cache_transceiver_config:\n  backend: {KV_BACKEND}\n")
    path.write_text("".join(lines))
    return path


def _engine(tmp: Path, name: str, transfer: bool) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    command = ["trtllm-serve", MODEL or "", "--grpc", "--grpc-protocol", "openengine"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    command += ["--extra_llm_api_options", str(_options(tmp / f"{name}.yml", transfer))]
    log = (tmp / f"{name}.log").open("wb")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), port


def _listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + ENGINE_START_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"trtllm-serve on {port} exited with {process.returncode}"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(2)
    raise AssertionError(f"trtllm-serve on {port} did not listen within {ENGINE_START_S} s")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    tmp = tmp_path_factory.mktemp("openengine")
    engines = [
        _engine(tmp, "context", True),
        _engine(tmp, "generation", True),
        _engine(tmp, "aggregated", False),
    ]
    try:
        for process, port in engines:
            _listening(port, process)
        (_, ctx), (_, gen), (_, agg) = engines
        common = ("--engine", "trtllm-grpc", "--grpc_protocol", "openengine", "--served_model_name", SERVED)
        split = ServeProcess(
            *common,
            "--prefill_engine_url",
            f"grpc://127.0.0.1:{ctx}",
            "--decode_engine_url",
            f"grpc://127.0.0.1:{gen}",
        ).start(timeout=600)
        whole = ServeProcess(*common, "--engine_url", f"grpc://127.0.0.1:{agg}").start(timeout=600)
        yield split, whole
        split.terminate()
        whole.terminate()
    finally:
        for process, _ in engines:
            process.terminate()
        for process, _ in engines:
            process.wait(timeout=120)


def test_a_greedy_split_turn_writes_what_the_aggregated_engine_writes(
    servers: tuple[ServeProcess, ServeProcess],
) -> None:
    split, whole = servers
    asked = {
        "model": SERVED,
        "input": "Name three prime numbers.",
        "temperature": 0.0,
        "max_output_tokens": 96,
    }
    with split.sdk() as on_split, whole.sdk() as on_whole:
        apart = on_split.responses.create(**asked)
        together = on_whole.responses.create(**asked)
    assert apart.status == together.status
    assert apart.output_text == together.output_text  # the context's KV really reached the decode engine


def test_the_sessions_next_turn_reuses_the_prefill_engines_prefix(
    servers: tuple[ServeProcess, ServeProcess],
) -> None:
    split, _ = servers
    with split.sdk() as client:
        first = client.responses.create(model=SERVED, input="Remember the number 42.", max_output_tokens=64)
        second = client.responses.create(
            model=SERVED, input="Which number?", previous_response_id=first.id, max_output_tokens=64
        )
    assert second.usage is not None and second.usage.input_tokens_details.cached_tokens > 0


def test_a_cancel_during_the_generation_leg_stops_it(servers: tuple[ServeProcess, ServeProcess]) -> None:
    split, _ = servers
    with split.sdk() as client:
        started = client.responses.create(
            model=SERVED, input="Write a very long story.", background=True, max_output_tokens=4000
        )
        deadline = time.monotonic() + 120
        while client.responses.retrieve(started.id).status == "queued" and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the generation leg runs
        cancelled = client.responses.cancel(started.id)
        assert cancelled.status == "cancelled"
        again = client.responses.create(model=SERVED, input="Say hi.", max_output_tokens=16)
    assert again.status in ("completed", "incomplete")  # the engines are free again
