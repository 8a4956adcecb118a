"""An OTLP/HTTP endpoint that takes traces and drops them, for measuring what tracing costs the server.

It answers ``POST /v1/traces`` as a collector does (200, an empty ``ExportTraceServiceResponse``, which is zero
bytes of protobuf) and counts the requests and bytes; it decodes nothing, so the load generator beside it
pays only for reading the bytes. Tests use a decoding receiver (``tests/support/otlp_receiver.py``).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OtlpSink"]


class OtlpSink:
    """One sink on 127.0.0.1:``port``; ``endpoint`` is the traces URL; a context manager."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                sink.bytes += len(self.rfile.read(int(self.headers.get("content-length") or 0)))
                sink.requests += 1
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def __enter__(self) -> OtlpSink:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
