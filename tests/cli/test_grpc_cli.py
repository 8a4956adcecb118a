"""``serve --engine trtllm-grpc --engine_url grpc://HOST:PORT``: what it refuses before starting, and an engine
that cannot be reached (the served turns: tests/executors/test_trtllm_grpc_served.py)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from test_launch import run_cli

from trtllm_responses.cli.command import _build_executor, build_parser, engine_of
from trtllm_responses.cli.launch import LaunchError
from trtllm_responses.executors.trtllm_grpc.executor import TrtllmGrpcExecutor


def _serve_args(*argv: str) -> object:
    return build_parser().parse_args(["serve", *argv])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--engine", "trtllm-grpc"], "needs an engine: --engine_url grpc://HOST:PORT"),
        (["--engine_url", "http://127.0.0.1:1"], "expected grpc://HOST:PORT"),
        (["--engine_url", "grpc://127.0.0.1:1", "--engine_url", "grpc://h"], "expected grpc://HOST:PORT"),
        (["--engine_urls_file", "/nonexistent/engines.txt"], "No such file"),
        (["--engine_url", "grpc://127.0.0.1:1", "--tp_size", "2"], "--tp_size configure the engine"),
        (["--engine_url", "grpc://127.0.0.1:1", "some/model"], "takes no MODEL"),
        (
            ["--engine", "echo", "--engine_url", "grpc://127.0.0.1:1"],
            "only apply to --engine trtllm-grpc",
        ),
        (
            ["--engine", "echo", "--grpc_protocol", "openengine"],
            "only apply to --engine trtllm-grpc",
        ),
    ],
)
def test_what_the_grpc_engine_cannot_take_is_refused_before_starting(argv: list[str], says: str) -> None:
    args = _serve_args(*argv)
    with pytest.raises(LaunchError, match=says.replace("-", r"\-").replace(".", r"\.")):
        _build_executor(args, engine_of(args))  # type: ignore[arg-type]


def test_engine_url_alone_chooses_the_grpc_executor() -> None:
    args = _serve_args("--engine_url", "grpc://10.0.0.7:8001", "--guided_decoding", "off")
    executor, encoding = _build_executor(args, engine_of(args))  # type: ignore[arg-type]
    assert isinstance(executor, TrtllmGrpcExecutor) and executor.pool.urls == ["grpc://10.0.0.7:8001"]
    assert executor.constraint_refusal is not None and encoding.return_ == 200002


def test_grpc_protocol_chooses_the_engines_wire() -> None:
    from trtllm_responses.executors.trtllm_grpc.openengine_engine import OpenEngineEngine

    args = _serve_args("--engine_url", "grpc://10.0.0.7:8001", "--grpc_protocol", "openengine")
    executor, _ = _build_executor(args, engine_of(args))  # type: ignore[arg-type]
    assert isinstance(executor, TrtllmGrpcExecutor) and executor.protocol == "openengine"
    assert executor.pool._make is OpenEngineEngine
    default, _ = _build_executor(_serve_args("--engine_url", "grpc://10.0.0.7:8001"), "trtllm-grpc")
    assert isinstance(default, TrtllmGrpcExecutor) and default.protocol == "smg"


def test_engine_urls_repeat_and_come_from_a_file_too(tmp_path: Path) -> None:
    listed = tmp_path / "engines.txt"
    listed.write_text("# the fleet\n\ngrpc://10.0.0.8:8001  # rack 2\n grpc://10.0.0.7:8001\n")
    args = _serve_args(
        "--engine_url",
        "grpc://10.0.0.7:8001",
        "--engine_url",
        "grpc://10.0.0.9:8001",
        "--engine_urls_file",
        str(listed),
    )
    executor, _ = _build_executor(args, engine_of(args))  # type: ignore[arg-type]
    assert isinstance(executor, TrtllmGrpcExecutor)
    assert executor.pool.urls == ["grpc://10.0.0.7:8001", "grpc://10.0.0.9:8001", "grpc://10.0.0.8:8001"]


def test_a_malformed_line_of_the_file_is_refused_naming_it(tmp_path: Path) -> None:
    listed = tmp_path / "engines.txt"
    listed.write_text("grpc://10.0.0.8:8001\n10.0.0.9:8001\n")
    args = _serve_args("--engine_urls_file", str(listed))
    assert engine_of(args) == "trtllm-grpc"
    with pytest.raises(LaunchError, match=r"engines\.txt, line 2: .*grpc://HOST:PORT"):
        _build_executor(args, engine_of(args))  # type: ignore[arg-type]


def test_an_unreachable_engine_stops_the_server_naming_it() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    began = time.monotonic()
    result = run_cli("serve", "--engine_url", f"grpc://127.0.0.1:{port}", "--port", "0", timeout=60)
    assert result.returncode != 0
    assert f"cannot reach the TensorRT-LLM gRPC engine at grpc://127.0.0.1:{port}" in result.stderr
    assert time.monotonic() - began < 40
