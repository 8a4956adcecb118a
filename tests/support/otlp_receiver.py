"""A real OTLP trace receiver on loopback, started and stopped by tests.

No OpenTelemetry collector is published on the registries this project installs from (PyPI, npm, Debian),
so this is the receiver the issue allows: the OTLP wire decoded by ``opentelemetry-proto``'s own
``ExportTraceServiceRequest``, over HTTP (``POST /v1/traces``, ``application/x-protobuf``, the OTLP/HTTP
binding) or gRPC (``opentelemetry.proto.collector.trace.v1.TraceService/Export`` on grpcio). It answers
as a collector does (an empty ``ExportTraceServiceResponse``) and keeps every span it received, decoded
into ``ReceivedSpan``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from .redis_harness import free_port

__all__ = ["OtlpReceiver", "ReceivedSpan"]

_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(value: common_pb2.AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver decoded it (ids as lowercase hex, times in ns since the epoch)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: str
    attributes: Mapping[str, Any]
    events: tuple[tuple[str, Mapping[str, Any]], ...]
    status: int  # 0 unset, 1 ok, 2 error
    start_ns: int
    end_ns: int
    resource: Mapping[str, Any] = field(default_factory=dict)
    links: tuple[str, ...] = ()  # linked spans' "trace_id/span_id"


def _decode(request: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        kind=_KINDS.get(s.kind, str(s.kind)),
                        attributes=_attributes(s.attributes),
                        events=tuple((e.name, _attributes(e.attributes)) for e in s.events),
                        status=s.status.code,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        resource=resource,
                        links=tuple(f"{link.trace_id.hex()}/{link.span_id.hex()}" for link in s.links),
                    )
                )
    return spans


class OtlpReceiver:
    """One OTLP receiver on 127.0.0.1 (``http/protobuf`` or ``grpc``); use as a context manager."""

    def __init__(self, protocol: Literal["http/protobuf", "grpc"] = "http/protobuf") -> None:
        self.protocol = protocol
        self.port = free_port()
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self._http: ThreadingHTTPServer | None = None
        self._grpc: Any = None
        self.requests = 0  # export calls received

    @property
    def endpoint(self) -> str:
        """What an exporter is pointed at: the traces URL (HTTP) or host:port (gRPC)."""
        if self.protocol == "grpc":
            return f"http://127.0.0.1:{self.port}"
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def env(self) -> dict[str, str]:
        """The standard environment pointing a process's SDK here, exporting within ~50 ms."""
        return {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": self.protocol,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }

    def _take(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        spans = _decode(request)
        with self._lock:
            self._spans.extend(spans)
            self.requests += 1

    def start(self) -> OtlpReceiver:
        if self.protocol == "grpc":
            self._start_grpc()
        else:
            self._start_http()
        return self

    def _start_http(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path != "/v1/traces" or "protobuf" not in (self.headers.get("content-type") or ""):
                    self.send_error(404 if self.path != "/v1/traces" else 415)
                    return
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._take(request)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
                return None

        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def _start_grpc(self) -> None:
        import grpc

        receiver = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (the service's name)
                receiver._take(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self._grpc)
        self._grpc.add_insecure_port(f"127.0.0.1:{self.port}")
        self._grpc.start()

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._grpc is not None:
            self._grpc.stop(grace=None)
            self._grpc = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """Every span received of one trace."""
        return [s for s in self.spans() if s.trace_id == trace_id]

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0
    ) -> list[ReceivedSpan]:
        """The spans once ``done(spans)`` holds; AssertionError with what arrived after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if done(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s.name for s in spans})
                raise AssertionError(f"spans not received within {timeout}s; got {len(spans)}: {names}")
            time.sleep(0.02)
