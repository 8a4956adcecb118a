"""``/metrics``' per-frontend collectors and the engine's health (``ops/frontend_metrics.py``,
docs/tracing-and-dashboards.md#dashboard-and-alerts), read from real servers."""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families
from support.server_harness import ServerFactory

from trtllm_responses.executors import EchoExecutor
from trtllm_responses.harmony import HarmonyEncoding


def _samples(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
    }


class FailingEcho(EchoExecutor):
    """The echo executor whose health check fails once ``dead`` is set (as a TensorRT-LLM whose worker died)."""

    dead = False

    def healthy(self) -> bool:
        return not self.dead


def test_the_engines_health_follows_its_health_check(encoding: HarmonyEncoding, serve: ServerFactory) -> None:
    executor = FailingEcho(encoding)
    with serve(executor) as running, httpx.Client(base_url=running.base_url, timeout=30) as client:
        assert _samples(client)[("trtllm_executor_healthy", ())] == 1
        executor.dead = True
        assert client.get("/health").status_code == 503
        assert _samples(client)[("trtllm_executor_healthy", ())] == 0


def test_event_loop_lag_and_responses_are_labelled_by_frontend(serve: ServerFactory) -> None:
    with serve(frontend_index=3) as running, httpx.Client(base_url=running.base_url, timeout=30) as client:
        before = _samples(client)
        for _ in range(2):
            assert client.post("/v1/responses", json={"input": "#lorem 5"}).status_code == 200
        time.sleep(0.1)  # ~20 more samples of the loop's lag
        after = _samples(client)
    frontend = (("frontend", "3"),)
    assert after[("trtllm_frontend_responses_total", frontend)] == 2
    assert after[("trtllm_frontend_active_responses", frontend)] == 0
    count = ("trtllm_event_loop_lag_seconds_count", frontend)
    assert after[count] > before[count] > 0
    assert after[("trtllm_event_loop_lag_seconds_bucket", (*frontend, ("le", "+Inf")))] == after[count]
