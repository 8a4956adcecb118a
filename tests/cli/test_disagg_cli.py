"""``serve --prefill_engine_url … --decode_engine_url …``: what it refuses before starting, and what it builds
(the served turns: tests/executors/test_trtllm_grpc_disagg_served.py)."""

from __future__ import annotations

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
        (["--prefill_engine_url", P1, *OE], "needs --decode_engine_url too"),
        (["--decode_engine_url", D1, *OE], "needs --prefill_engine_url too"),
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
    ],
)
def test_what_disaggregated_serving_cannot_take_is_refused(argv: list[str], says: str) -> None:
    args = _args(*argv)
    with pytest.raises(LaunchError, match=says.replace("-", r"\-").replace(".", r"\.")):
        _build_executor(args, engine_of(args))  # type: ignore[arg-type]


def test_prefill_and_decode_urls_choose_the_grpc_executor_over_two_pools() -> None:
    args = _args("--prefill_engine_url", P1, "--prefill_engine_url", P2, "--decode_engine_url", D1, *OE)
    assert engine_of(args) == "trtllm-grpc"  # type: ignore[arg-type]
    executor, _ = _build_executor(args, engine_of(args))  # type: ignore[arg-type]
    assert isinstance(executor, TrtllmGrpcExecutor) and executor._prefill is not None
    assert (executor._prefill.urls, executor.pool.urls) == ([P1, P2], [D1])
