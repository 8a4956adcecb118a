"""``serve --prefill_engine_url … --decode_engine_url …``: what it refuses before starting, and what it builds
(the served turns: tests/executors/test_trtllm_grpc_disagg_served.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trtllm_responses.cli.command import _build_executor, build_parser, engine_of
from trtllm_responses.cli.launch import LaunchError
from trtllm_responses.executors.trtllm_grpc.executor import TrtllmGrpcExecutor

P1, P2, D1 = "grpc://10.0.0.1:8001", "grpc://10.0.0.2:8001", "grpc://10.0.0.3:8001"
OE = ("--grpc_protocol", "openengine")


def _args(*argv: str) -> object:
    return build_parser().parse_args(["serve", *argv])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--prefill_engine_url", P1, "--decode_engine_url", D1],
            "SMG's protocol cannot hand a context over",
        ),
        (
            ["--prefill_engine_url", P1, *OE],
            "needs --decode_engine_url grpc://HOST:PORT (or --decode_engine_urls_file) too",
        ),
        (
            ["--decode_engine_url", D1, *OE],
            "needs --prefill_engine_url grpc://HOST:PORT (or --prefill_engine_urls_file) too",
        ),
        (
            ["--prefill_engine_urls_file", "{listed}", *OE],
            "needs --decode_engine_url grpc://HOST:PORT (or --decode_engine_urls_file) too",
        ),
        (
            ["--prefill_engine_urls_file", "{listed}", "--decode_engine_urls_file", "{listed}"],
            "SMG's protocol cannot hand a context over",
        ),
        (
            [
                "--engine_urls_file",
                "{listed}",
                "--prefill_engine_url",
                P2,
                "--decode_engine_urls_file",
                "{listed}",
                *OE,
            ],
            "give either engines for whole turns or the prefill and decode engines, not both",
        ),
        (
            ["--prefill_engine_url", P1, "--decode_engine_urls_file", "{empty}", *OE],
            "{empty} lists no engine, and no --decode_engine_url is given: list one there (grpc://HOST:PORT, one a "
            "line) or pass --decode_engine_url grpc://HOST:PORT",
        ),
        (
            ["--prefill_engine_urls_file", "{missing}", "--decode_engine_url", D1, *OE],
            "No such file or directory",
        ),
        (
            ["--prefill_engine_urls_file", "{bad}", "--decode_engine_url", D1, *OE],
            "{bad}, line 1: ",  # the file's line, then engine_target's "expected grpc://HOST:PORT"
        ),
        (
            ["--engine_url", P1, "--prefill_engine_url", P2, "--decode_engine_url", D1, *OE],
            "give either engines for whole turns or the prefill and decode engines, not both",
        ),
        (
            ["--prefill_engine_url", "http://10.0.0.1:1", "--decode_engine_url", D1, *OE],
            "expected grpc://HOST:PORT",
        ),
        (
            ["--engine", "echo", "--prefill_engine_url", P1, "--decode_engine_url", D1],
            "only apply to --engine trtllm-grpc",
        ),
        (
            ["--engine", "echo", "--decode_engine_urls_file", "{listed}"],
            "only apply to --engine trtllm-grpc",
        ),
    ],
)
def test_what_disaggregated_serving_cannot_take_is_refused(
    argv: list[str], says: str, tmp_path: Path
) -> None:
    files = {"listed": tmp_path / "listed", "empty": tmp_path / "empty", "bad": tmp_path / "bad"}
    files["listed"].write_text(f"{D1}\n")
    files["empty"].write_text("# no engine yet\n")
    files["bad"].write_text("http://10.0.0.1:1\n")
    paths = {name: str(path) for name, path in files.items()} | {"missing": str(tmp_path / "missing")}
    args = _args(*(arg.format(**paths) for arg in argv))
    with pytest.raises(LaunchError, match=re.escape(says.format(**paths))):
        _build_executor(args, engine_of(args))  # type: ignore[arg-type]


def test_prefill_and_decode_urls_choose_the_grpc_executor_over_two_pools() -> None:
    args = _args("--prefill_engine_url", P1, "--prefill_engine_url", P2, "--decode_engine_url", D1, *OE)
    assert engine_of(args) == "trtllm-grpc"  # type: ignore[arg-type]
    executor, _ = _build_executor(args, engine_of(args))  # type: ignore[arg-type]
    assert isinstance(executor, TrtllmGrpcExecutor) and executor._prefill is not None
    assert (executor._prefill.urls, executor.pool.urls) == ([P1, P2], [D1])


def test_each_side_from_its_file_with_or_without_its_flag(tmp_path: Path) -> None:
    prefill, decode = tmp_path / "prefill", tmp_path / "decode"
    prefill.write_text(f"{P2}\n")
    decode.write_text(f"# the decode engines\n{D1}\n")
    # the prefill side from a flag and a file, the decode side from its file alone
    args = _args(
        "--prefill_engine_url",
        P1,
        "--prefill_engine_urls_file",
        str(prefill),
        "--decode_engine_urls_file",
        str(decode),
        *OE,
    )
    assert engine_of(args) == "trtllm-grpc"  # type: ignore[arg-type]
    executor, _ = _build_executor(args, engine_of(args))  # type: ignore[arg-type]
    assert isinstance(executor, TrtllmGrpcExecutor) and executor._prefill is not None
    assert (executor._prefill.urls, executor.pool.urls) == ([P1, P2], [D1])
    # both files are read again on SIGHUP (tests/executors/test_trtllm_grpc_disagg_files.py)
    assert [listed.path for _, listed, _ in executor._files] == [str(prefill), str(decode)]
