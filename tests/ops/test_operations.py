"""Operations: /metrics after a load, API keys, and SIGTERM during 16 streams through a real ``serve``."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.process_harness import ServeProcess
from support.server_harness import parse_sse, stream_events
from support.stream_grammar import check_stream


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_after_a_load(serve) -> None:  # type: ignore[no-untyped-def]
    running = serve()
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as http:
            for i in range(5):
                check_stream(stream_events(http, {"input": f"#lorem {10 + i}"}))
            done = [http.post("/v1/responses", json={"input": "#lorem 7"}).json() for _ in range(3)]
            assert http.get("/v1/responses/resp_nope").status_code == 404
            http.get(f"/v1/responses/{done[0]['id']}")
            response = http.get("/metrics")
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
            got = samples(response.text)
        post = ("trtllm_requests_total", (("method", "POST"), ("route", "/v1/responses"), ("status", "200")))
        assert got[post] == 8
        assert (
            got[
                (
                    "trtllm_requests_total",
                    (("method", "GET"), ("route", "/v1/responses/{id}"), ("status", "404")),
                )
            ]
            == 1
        )
        assert (
            got[
                (
                    "trtllm_requests_total",
                    (("method", "GET"), ("route", "/v1/responses/{id}"), ("status", "200")),
                )
            ]
            == 1
        )
        assert got[("trtllm_responses_total", (("status", "completed"),))] == 8
        # Each response's output: the analysis "Writing N tokens." plus N tokens, and the Harmony framing.
        assert got[("trtllm_output_tokens_total", ())] > sum(range(10, 15)) + 21
        assert got[("trtllm_input_tokens_total", ())] > 8 * 10
        assert got[("trtllm_time_to_first_token_seconds_count", ())] == 8
        assert got[("trtllm_inter_token_latency_seconds_count", ())] == 8
        assert got[("trtllm_server_added_latency_seconds_count", ())] == 8
        assert got[("trtllm_store_responses", ())] == 8
        assert got[("trtllm_active_responses", ())] == 0
        assert got[("trtllm_executor_aborts_total", ())] == 0
        assert ("trtllm_store_errors_total", ()) in got
        # per tenant (docs/tenants.md#usage): the open server's one tenant, every turn and token of it
        tenant = (("tenant", "default"),)
        assert got[("trtllm_tenant_requests_total", tenant)] == 8
        for kind in ("input", "output"):
            key = ("trtllm_tenant_tokens_total", (("kind", kind), *tenant))
            assert got[key] == got[(f"trtllm_{kind}_tokens_total", ())]
    finally:
        running.stop()


def test_api_key(serve) -> None:  # type: ignore[no-untyped-def]
    running = serve(api_key="sekret-key")
    try:
        with httpx.Client(base_url=running.base_url, timeout=30) as http:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekret-key"}):
                for method, path in (
                    ("POST", "/v1/responses"),
                    ("GET", "/v1/models"),
                    ("GET", "/v1/responses/x"),
                ):
                    response = http.request(method, path, json={"input": "x"}, headers=headers)
                    assert response.status_code == 401, (headers, path)
                    error = response.json()["error"]
                    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
                    assert "sekret" not in response.text and "wrong" not in response.text
            assert http.get("/health").status_code == 200
            assert http.get("/metrics").status_code == 200
            ok = http.post(
                "/v1/responses", json={"input": "hi"}, headers={"Authorization": "Bearer sekret-key"}
            )
            assert ok.status_code == 200
        with openai.OpenAI(base_url=running.base_url + "/v1", api_key="sekret-key", max_retries=0) as client:
            assert client.responses.create(model="m", input="hi").output_text == "hi"
        with openai.OpenAI(base_url=running.base_url + "/v1", api_key="nope", max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError):
                client.responses.create(model="m", input="hi")
    finally:
        running.stop()


def test_api_key_from_the_environment(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServeProcess(env={"TRTLLM_RESPONSES_API_KEY": "from-env"}).start()
    try:
        assert httpx.get(server.base_url + "/v1/models").status_code == 401
        assert (
            httpx.get(
                server.base_url + "/v1/models", headers={"Authorization": "Bearer from-env"}
            ).status_code
            == 200
        )
    finally:
        server.kill()


def test_sigterm_during_16_streams_ends_each_with_a_terminal_event_and_exits_0(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = f"sqlite:///{tmp_path / 'r.db'}"
    server = ServeProcess(
        "--echo_tokens_per_second", "40", "--shutdown_timeout", "3", "--store", store
    ).start()
    # Two background responses too: one finishes within the grace period, one is ended by the shutdown.
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        quick_bg = http.post("/v1/responses", json={"input": "#lorem 20", "background": True}).json()["id"]
        slow_bg = http.post("/v1/responses", json={"input": "#lorem 2000", "background": True}).json()["id"]
    results: dict[int, Any] = {}
    started = threading.Barrier(17)

    def run(i: int) -> None:
        # Half finish within the grace period (20 tokens at 40/s), half cannot (2000 tokens).
        body = {"input": "#lorem 20" if i % 2 else "#lorem 2000", "stream": True}
        lines: list[str] = []
        try:
            with httpx.Client(base_url=server.base_url, timeout=60) as http:
                with http.stream("POST", "/v1/responses", json=body) as response:
                    iterator = response.iter_lines()
                    for line in iterator:
                        lines.append(line)
                        if line.startswith("data: ") and '"response.created"' in line:
                            break
                    started.wait(timeout=30)
                    lines.extend(iterator)
            results[i] = parse_sse(iter(lines))
        except Exception as exc:  # noqa: BLE001
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    try:
        started.wait(timeout=30)
        time.sleep(0.1)
        began = time.monotonic()
        code = server.terminate(timeout=60)
        elapsed = time.monotonic() - began
    finally:
        for t in threads:
            t.join(timeout=60)
        server.kill()
    assert code == 0, server.output()
    assert elapsed < 30
    statuses = []
    for i in range(16):
        events = results[i]
        assert not isinstance(events, Exception), events
        final = check_stream(events)
        statuses.append(final["status"])
        if i % 2:
            assert final["status"] == "completed"
        else:
            assert final["status"] == "failed"
    assert statuses.count("completed") == 8, statuses
    # The store was flushed on the way out: after a restart, both background responses are there, ended.
    server.start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as http:
            assert http.get(f"/v1/responses/{quick_bg}").json()["status"] == "completed"
            assert http.get(f"/v1/responses/{slow_bg}").json()["status"] == "failed"
    finally:
        server.kill()


def test_api_key_applies_to_the_websocket(serve) -> None:  # type: ignore[no-untyped-def]
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect as ws_connect

    running = serve(api_key="sekret-key")
    url = running.base_url.replace("http://", "ws://") + "/v1/responses"
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            with pytest.raises(InvalidStatus) as refused:
                ws_connect(url, additional_headers=headers, open_timeout=10)
            assert refused.value.response.status_code == 403
        with ws_connect(
            url, additional_headers={"Authorization": "Bearer sekret-key"}, open_timeout=10
        ) as ws:
            ws.send('{"type": "response.create", "input": "hi"}')
            assert '"response.created"' in ws.recv(timeout=10)
    finally:
        running.stop()
