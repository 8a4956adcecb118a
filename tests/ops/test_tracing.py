"""ops/tracing.py: off at no cost, on from the flag or the standard OTEL_* environment, spans exported over
OTLP (HTTP and gRPC) to a real receiver, a client's traceparent continued, the context injected onward."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.otlp_receiver import OtlpReceiver
from tests.support.traced import OTEL_ENVIRONMENT
from trtllm_responses.ops import trace_attrs, tracing

_ENV = OTEL_ENVIRONMENT
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    yield
    tracing.shutdown()


def test_off_by_default_is_the_shared_no_op() -> None:
    assert not tracing.check(None)
    assert not tracing.configure(None)
    assert not tracing.enabled()
    with tracing.span("x", {"a": 1}) as one, tracing.server_span("y", [(b"traceparent", b"junk")]) as two:
        assert one is two is tracing.NULL_SPAN
        assert not one.is_recording()
    assert tracing.start_span("z") is tracing.NULL_SPAN
    assert tracing.inject() is None and tracing.current_ids() is None
    assert not tracing.capture_content()


def test_off_imports_nothing_of_the_sdk() -> None:
    code = (
        "import sys\n"
        "from trtllm_responses.ops import tracing\n"
        "tracing.configure(None)\n"
        "with tracing.span('x'):\n    pass\n"
        "from trtllm_responses.server import create_app\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk') or 'exporter' in m))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": sys.path[0]}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("disabled", [("OTEL_SDK_DISABLED", "true"), ("OTEL_TRACES_EXPORTER", "none")])
def test_the_standard_switches_keep_it_off(
    monkeypatch: pytest.MonkeyPatch, disabled: tuple[str, str]
) -> None:
    monkeypatch.setenv(*disabled)
    assert not tracing.configure("http://127.0.0.1:1/v1/traces")


def test_an_unknown_protocol_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(tracing.TracingSetupError, match="grpc or http/protobuf"):
        tracing.check("http://127.0.0.1:1")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_environment_alone_turns_it_on_and_continues_the_client_trace(
    monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    with OtlpReceiver(protocol) as receiver:  # type: ignore[arg-type]
        for name, value in receiver.env().items():
            monkeypatch.setenv(name, value)
        assert tracing.configure(None, instance="8000/0")
        parent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01".encode()
        with tracing.server_span(
            "POST /v1/responses", [(b"traceparent", parent)], {trace_attrs.HTTP_METHOD: "POST"}
        ):
            ids = tracing.current_ids()
            with tracing.span("prepare"):
                headers = tracing.inject()
        tracing.shutdown()  # flushes
        spans = receiver.wait_for(lambda got: len(got) >= 2)
    by_name = {s.name: s for s in spans}
    server, prepare = by_name["POST /v1/responses"], by_name["prepare"]
    assert server.trace_id == prepare.trace_id == CLIENT_TRACE
    assert server.parent_span_id == CLIENT_SPAN and server.kind == "server"
    assert prepare.parent_span_id == server.span_id
    assert ids == (CLIENT_TRACE, server.span_id)
    assert headers is not None and headers["traceparent"] == f"00-{CLIENT_TRACE}-{prepare.span_id}-01"
    assert server.resource["service.name"] == "trtllm-responses"
    assert server.resource["service.instance.id"] == "8000/0"


def test_the_flag_speaks_grpc_unless_told_http(monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpReceiver("grpc") as receiver:
        assert tracing.configure(receiver.endpoint)  # no protocol in the environment: gRPC, as trtllm-serve
        with tracing.span("one"):
            pass
        tracing.shutdown()
        assert [s.name for s in receiver.wait_for(bool)] == ["one"]
    with OtlpReceiver("http/protobuf") as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "gateway-a")
        assert tracing.configure(receiver.endpoint)
        with tracing.span("two"):
            pass
        tracing.shutdown()
        (two,) = receiver.wait_for(bool)
        assert two.name == "two" and two.resource["service.name"] == "gateway-a"


def test_an_exception_leaving_a_span_marks_it_failed_and_fail_marks_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with OtlpReceiver() as receiver:
        for name, value in receiver.env().items():
            monkeypatch.setenv(name, value)
        tracing.configure(None)
        with pytest.raises(ValueError), tracing.span("raises"):
            raise ValueError("boom")
        live = tracing.start_span("answered")
        tracing.fail(live, "bad request", error_type="invalid_request_error")
        live.end()
        tracing.shutdown()
        spans = {s.name: s for s in receiver.wait_for(lambda got: len(got) >= 2)}
    assert spans["raises"].status == 2 and spans["raises"].events[0][0] == "exception"
    assert spans["answered"].status == 2
    assert spans["answered"].attributes["error.type"] == "invalid_request_error"


def test_a_sampled_out_trace_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpReceiver() as receiver:
        for name, value in receiver.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
        tracing.configure(None)
        with tracing.span("dropped") as live:
            assert not live.is_recording()
        tracing.shutdown()
        assert receiver.spans() == []
