"""The trace context into TensorRT-LLM, per release, over the fake (docs/tracing-and-dashboards.md#into-the-engine).

- ``GenerationRequest.trace_headers`` reaches ``generate_async(trace_headers=...)`` unchanged on the releases whose
  ``generate_async`` takes it (1.2.0 on), and is not passed on 1.1 (whose signature has no such argument);
- ``serve --otlp_traces_endpoint`` reaches the LLM arguments as trtllm-serve's does, where the release has
  ``otlp_traces_endpoint`` (1.2.0 on), a YAML value winning; on 1.1 the engine starts without it, and says so;
- nothing changes for a request without trace headers.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import pytest
from support.checkpoints import make_checkpoint
from support.trtllm_harness import collect

from trtllm_responses.adapter import HarmonyAdapter
from trtllm_responses.executors.base import GenerationRequest, SamplingSettings
from trtllm_responses.executors.trtllm import TrtllmExecutor
from trtllm_responses.executors.trtllm_releases import Release
from trtllm_responses.harmony import HarmonyEncoding
from trtllm_responses.request.protocol import parse_request

#: Each release played, and whether it has TensorRT-LLM's tracing (trace_headers, otlp_traces_endpoint).
RELEASES = [("1.1.0", False), ("1.2.0", True), ("1.2.1", True), ("1.3.0rc29", True), ("1.4.0rc1", True)]
HEADERS = {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "rojo=00f067aa0ba902b7",
}
ENDPOINT = "http://127.0.0.1:8719/v1/traces"
LOGGER = "trtllm_responses.executors.trtllm"


def _request(adapter: HarmonyAdapter, **fields: Any) -> GenerationRequest:
    prompt = adapter.build_prompt(parse_request({"input": "hello"})).token_ids
    return GenerationRequest("r1", prompt, SamplingSettings(64, adapter.stop_token_ids), **fields)


async def _started(
    fake_trtllm: Any,
    monkeypatch: pytest.MonkeyPatch,
    encoding: HarmonyEncoding,
    release: str,
    llm_kwargs: dict[str, Any] | None = None,
    **options: Any,
) -> TrtllmExecutor:
    monkeypatch.setattr(fake_trtllm, "__version__", release)
    kwargs = {"model": "/ckpt/gpt-oss-tiny", **(llm_kwargs or {})}
    executor = TrtllmExecutor(kwargs, end_id=encoding.return_, **options)
    await executor.start()
    return executor


@pytest.mark.parametrize(("version", "traced"), [*RELEASES, ("1.3.0", True), ("", False)])
def test_each_release_says_whether_it_has_the_endpoint(version: str, traced: bool) -> None:
    assert Release(version).otlp_traces_endpoint is traced


@pytest.mark.parametrize(("release", "takes"), RELEASES)
async def test_trace_headers_reach_generate_async_unchanged_where_it_takes_them(
    release: str,
    takes: bool,
    fake_trtllm: Any,
    monkeypatch: pytest.MonkeyPatch,
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
) -> None:
    """Only trace headers on the request (no session, salt or priority): they alone must reach the engine."""
    executor = await _started(fake_trtllm, monkeypatch, encoding, release)
    llm = executor._llm
    assert ("trace_headers" in inspect.signature(llm.generate_async).parameters) is takes
    deltas = await collect(executor, _request(adapter, trace_headers=HEADERS))
    assert deltas[-1].finish_reason == "stop"  # 1.1.0 would have raised a TypeError had they been passed
    (received,) = llm.trace_headers
    if takes:
        assert (
            received == HEADERS and type(received) is dict
        )  # a plain dict, as TensorRT-LLM's server hands it
    else:
        assert received is None
    await executor.shutdown()


@pytest.mark.parametrize(("release", "takes"), RELEASES)
async def test_a_request_without_trace_headers_passes_none(
    release: str,
    takes: bool,
    fake_trtllm: Any,
    monkeypatch: pytest.MonkeyPatch,
    encoding: HarmonyEncoding,
    adapter: HarmonyAdapter,
) -> None:
    executor = await _started(fake_trtllm, monkeypatch, encoding, release)
    deltas = await collect(executor, _request(adapter, session_key="s", cache_salt="t"))
    assert deltas[-1].finish_reason == "stop"
    assert executor._llm.trace_headers == [None] and executor._llm.cache_salts == ["t"]
    await executor.shutdown()


@pytest.mark.parametrize(("release", "has"), RELEASES)
async def test_the_endpoint_reaches_the_llm_arguments_where_the_release_has_them(
    release: str,
    has: bool,
    fake_trtllm: Any,
    monkeypatch: pytest.MonkeyPatch,
    encoding: HarmonyEncoding,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    executor = await _started(fake_trtllm, monkeypatch, encoding, release, otlp_traces_endpoint=ENDPOINT)
    args = executor._llm.args
    if has:
        assert args.otlp_traces_endpoint == ENDPOINT
        assert args.return_perf_metrics  # without it TensorRT-LLM writes no llm_request span
        assert f"exports its request spans (llm_request) to {ENDPOINT}" in caplog.text
    else:
        assert "otlp_traces_endpoint" not in args.model_fields_set  # 1.1 would refuse the name
        assert not args.return_perf_metrics
        assert (
            f"TensorRT-LLM {release} has no otlp_traces_endpoint" in caplog.text and ENDPOINT in caplog.text
        )
    await executor.shutdown()


@pytest.mark.parametrize(("release", "has"), RELEASES)
async def test_no_endpoint_no_llm_argument(
    release: str, has: bool, fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, encoding: HarmonyEncoding
) -> None:
    executor = await _started(fake_trtllm, monkeypatch, encoding, release)
    assert "otlp_traces_endpoint" not in executor._llm.args.model_fields_set
    assert not executor._llm.args.return_perf_metrics  # no traces asked for: no per-request metrics' cost
    await executor.shutdown()


async def test_a_yaml_return_perf_metrics_wins(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, encoding: HarmonyEncoding
) -> None:
    executor = await _started(
        fake_trtllm,
        monkeypatch,
        encoding,
        "1.2.1",
        {"return_perf_metrics": False},
        otlp_traces_endpoint=ENDPOINT,
    )
    assert executor._llm.args.otlp_traces_endpoint == ENDPOINT and not executor._llm.args.return_perf_metrics
    await executor.shutdown()


async def test_a_yaml_endpoint_wins_over_the_flag(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch, encoding: HarmonyEncoding
) -> None:
    """trtllm-serve's YAML overrides its flags (``update_llm_args_with_extra_dict``): so here."""
    yaml_endpoint = "http://127.0.0.1:8718/v1/traces"
    executor = await _started(
        fake_trtllm,
        monkeypatch,
        encoding,
        "1.2.1",
        {"otlp_traces_endpoint": yaml_endpoint},
        otlp_traces_endpoint=ENDPOINT,
    )
    assert executor._llm.args.otlp_traces_endpoint == yaml_endpoint
    await executor.shutdown()


async def test_serve_hands_its_flag_to_the_executor(
    tmp_path: Path, fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one place serve's ``--otlp_traces_endpoint`` is handed on (``cli/command.py``, ``_build_executor``)."""
    from trtllm_responses.cli.command import _build_executor, build_parser

    monkeypatch.setattr(fake_trtllm, "__version__", "1.2.1")
    args = build_parser().parse_args(["serve", str(make_checkpoint(tmp_path)), "--engine", "trtllm"])
    args.otlp_traces_endpoint = ENDPOINT  # the flag itself is serve_options.py's
    executor, _ = _build_executor(args, "trtllm")
    assert isinstance(executor, TrtllmExecutor)
    await executor.start()
    assert executor._llm.args.otlp_traces_endpoint == ENDPOINT
    await executor.shutdown()


# -- the fake, as each release --------------------------------------------------------------------------------


def test_the_fake_refuses_on_1_1_what_1_1_has_not(fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", "1.1.0")
    with pytest.raises(ValueError, match="no otlp_traces_endpoint in TensorRT-LLM 1.1.0"):
        fake_trtllm.LLM(model="m", otlp_traces_endpoint=ENDPOINT)
    with pytest.raises(ValueError, match="no otlp_traces_endpoint"):
        fake_trtllm.LLM(model="m", otlp_traces_endpoint=None)  # an unknown name, whatever its value
    llm = fake_trtllm.LLM(model="m")
    with pytest.raises(TypeError, match="unexpected keyword argument 'trace_headers'"):
        llm.generate_async([1, 2, 3], streaming=True, trace_headers=HEADERS)
    llm.shutdown()


def test_the_fake_takes_them_from_1_2_and_checks_their_type(
    fake_trtllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_trtllm, "__version__", "1.2.0")
    llm = fake_trtllm.LLM(model="m", otlp_traces_endpoint=ENDPOINT)
    assert llm.args.otlp_traces_endpoint == ENDPOINT
    assert "conversation_params" not in inspect.signature(llm.generate_async).parameters  # still none on 1.2
    with pytest.raises(TypeError, match="Mapping"):
        llm.generate_async([1, 2, 3], streaming=True, trace_headers="00-abc")
    llm.shutdown()


def test_one_trace_from_the_client_into_the_engine(tmp_path: Path) -> None:
    """A real ``serve --engine trtllm`` on the fake, tracing to a real OTLP receiver: a client's streamed turn
    is one trace, and the ``trace_headers`` the engine received name that trace and its ``chat`` span (the
    issue's Done-when; the engine's own ``llm_request`` span would be that span's child)."""
    import openai
    from support.otlp_receiver import OtlpReceiver
    from support.trtllm_harness import Served

    client_trace, client_span = "5ce0e9a56015fec5aadfa328ae398115", "ab2cd3ef4a5b6c7d"
    with OtlpReceiver() as receiver:
        server = Served(
            [
                str(make_checkpoint(tmp_path)),
                "--engine",
                "trtllm",
                "--otlp_traces_endpoint",
                receiver.endpoint,
            ],
            tmp_path / "trtllm.log",
            {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "50"},
        )
        try:
            with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as client:
                with client.responses.stream(
                    model="m",
                    input="hello",
                    max_output_tokens=16,
                    extra_headers={"traceparent": f"00-{client_trace}-{client_span}-01"},
                ) as stream:
                    final = stream.get_final_response()
                # The request's own span ends after the chat span: it may come in a later export batch.
                spans = receiver.wait_for(lambda got: {"chat", "POST"} <= {s.name.split(" ")[0] for s in got})
                (generated,) = server.records("generate")
        finally:
            server.stop()
    (chat,) = [s for s in spans if s.name.startswith("chat ")]
    assert chat.trace_id == client_trace and chat.attributes["gen_ai.response.id"] == final.id
    assert generated["trace_headers"] == {"traceparent": f"00-{client_trace}-{chat.span_id}-01"}
    by_id = {s.span_id: s for s in spans}
    root = chat
    while root.parent_span_id in by_id:
        root = by_id[root.parent_span_id]
    assert root.name == "POST /v1/responses" and root.parent_span_id == client_span
