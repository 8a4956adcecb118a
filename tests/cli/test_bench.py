"""The load generator counts what the server really sent, streaming and not, and reports errors."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from trtllm_responses.cli.bench import BenchConfig, percentile, run_bench
from trtllm_responses.executors.base import ExecutorError, GenerationRequest, TokenDelta
from trtllm_responses.executors.echo import EchoExecutor


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 90) == 9.0


def test_streaming_counts_match_the_server(echo_server) -> None:  # type: ignore[no-untyped-def]
    config = BenchConfig(
        base_url=echo_server.base_url,
        concurrency=3,
        duration=None,
        requests=9,
        warmup=2,
        lorem=40,
        progress=False,
    )
    summary = run_bench(config).summary
    assert summary["requests"] == 9 and summary["errors"] == 0
    import httpx

    one = httpx.post(
        echo_server.base_url + "/v1/responses", json={"input": "#lorem 40", "store": False}
    ).json()
    assert summary["output_tokens"] == 9 * one["usage"]["output_tokens"]
    assert summary["ttft_ms"]["p50"] > 0 and summary["itl_ms"]["p99"] is not None
    assert summary["client_us_per_token"] > 0


def test_non_streaming_and_continuations(echo_server) -> None:  # type: ignore[no-untyped-def]
    import httpx

    first = httpx.post(echo_server.base_url + "/v1/responses", json={"input": "hello"}).json()
    config = BenchConfig(
        base_url=echo_server.base_url + "/v1",
        concurrency=2,
        duration=None,
        requests=4,
        warmup=0,
        prompt="again",
        stream=False,
        progress=False,
        extra_body={"previous_response_id": first["id"]},
    )
    summary = run_bench(config).summary
    assert summary["errors"] == 0 and summary["requests"] == 4 and summary["output_tokens"] > 0


def two_requests(base_url: str, **fields: Any) -> dict[str, Any]:
    """The summary of two requests, one at a time, no warm-up (``fields``: more of BenchConfig)."""
    config = BenchConfig(
        base_url=base_url, concurrency=1, duration=None, requests=2, warmup=0, progress=False, **fields
    )
    return run_bench(config).summary


def test_errors_are_counted_not_hidden(echo_server) -> None:  # type: ignore[no-untyped-def]
    summary = two_requests(echo_server.base_url, extra_body={"previous_response_id": "resp_missing"})
    assert summary["errors"] == 2 and "404" in summary["error_samples"][0]


def test_bench_cli_json(echo_server) -> None:  # type: ignore[no-untyped-def]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trtllm_responses.cli",
            "bench",
            "--base-url",
            echo_server.base_url,
            "--requests",
            "3",
            "--concurrency",
            "1",
            "--warmup",
            "0",
            "--lorem",
            "10",
            "--json",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    import json

    assert json.loads(result.stdout)["summary"]["requests"] == 3


@pytest.mark.parametrize("api", ["chat", "messages"])
@pytest.mark.parametrize("stream", [True, False])
def test_other_apis_count_what_responses_counts(echo_server, api: str, stream: bool) -> None:  # type: ignore[no-untyped-def]
    """``--api chat`` and ``--api messages`` load their own endpoints and count the same output tokens."""
    summaries = {}
    for wire in ("responses", api):
        config = BenchConfig(
            base_url=echo_server.base_url,
            concurrency=2,
            duration=None,
            requests=4,
            warmup=0,
            lorem=30,
            stream=stream,
            progress=False,
            api=wire,
        )
        summaries[wire] = run_bench(config).summary
    assert summaries[api]["errors"] == 0 and summaries[api]["requests"] == 4
    assert summaries[api]["output_tokens"] == summaries["responses"]["output_tokens"] > 0


class _FailingEcho(EchoExecutor):
    """The echo executor, failing every generation after its first token."""

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        async for delta in super().generate(request):
            yield delta
            raise ExecutorError("the GPU fell over")


@pytest.mark.parametrize("api", ["responses", "chat", "messages"])
@pytest.mark.parametrize("stream", [True, False])
def test_every_request_failed_exits_non_zero(serve, encoding, api: str, stream: bool) -> None:  # type: ignore[no-untyped-def]
    """A run whose requests all failed is not a result: ``bench`` says so and exits 1, whatever the API and
    however the failure came (a ``status: "failed"`` response with HTTP 200, a 500, an error event)."""
    with serve(_FailingEcho(encoding)) as running:
        summary = two_requests(running.base_url, stream=stream, api=api)
        assert summary["errors"] == summary["requests"] == 2, summary
        assert "the GPU fell over" in summary["error_samples"][0]
        args = ["--requests", "1", "--warmup", "0", "--no-progress", "--api", api]
        result = subprocess.run(
            [sys.executable, "-m", "trtllm_responses.cli", "bench", "--base-url", running.base_url, *args]
            + ([] if stream else ["--no-stream"]),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "requests (errors)           1 (1)" in result.stdout
