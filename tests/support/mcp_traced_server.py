"""The test MCP server (``mcp_server.build_server``) in a process of its own, instrumented as an operator's
would be: mcp 2.x servers trace every request they serve (``mcp/server/_otel.py``'s
``OpenTelemetryMiddleware``, on by default) through OpenTelemetry's global tracer provider, which this
process sets to export to the standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``. The server span of a request
continues the trace context the request carried in ``params._meta`` (SEP-414).

``python tests/support/mcp_traced_server.py`` prints its streamable HTTP URL, then serves until SIGTERM
(which flushes its spans).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from support.mcp_server import MCPTestServer, _serve, build_server  # noqa: E402

SERVICE = "mcp-test-server"


def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    stopped = threading.Event()

    def stop(*_: Any) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    running = MCPTestServer(url="", sse_url="")
    url = _serve(build_server().streamable_http_app(), running) + "/mcp"
    print(url, flush=True)
    stopped.wait()
    running.stop()
    provider.shutdown()  # exports what is pending
    os._exit(0)


if __name__ == "__main__":
    main()
