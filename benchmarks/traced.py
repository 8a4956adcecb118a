"""Run a benchmark with tracing on: every server it starts traces every request, spans exported over
OTLP/HTTP to a sink that drops them (``_otlp_sink.py``), what tracing costs at its most
(docs/tracing-and-dashboards.md#what-tracing-costs).

    python benchmarks/traced.py benchmarks/http_stream.py --duration 8 --runs 2
    python benchmarks/traced.py benchmarks/agent_session.py --sessions 1,8 --no-reuse

The servers a benchmark starts inherit this process's environment (``_server.start_server``), so the
standard variables reach them: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the sink), ``..._PROTOCOL``
``http/protobuf``, ``OTEL_TRACES_SAMPLER`` ``always_on``. At the end the sink's export requests and bytes are
printed to stderr.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _otlp_sink import OtlpSink  # noqa: E402
from _server import free_port  # noqa: E402


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    script, *args = sys.argv[1:]
    with OtlpSink(free_port()) as sink:
        os.environ.update(
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=sink.endpoint,
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
            OTEL_TRACES_SAMPLER="always_on",
        )
        sys.argv = [script, *args]
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            print(f"otlp_export_requests {sink.requests}\notlp_export_bytes {sink.bytes}", file=sys.stderr)


if __name__ == "__main__":
    main()
