"""``ops/log_format.py``: one JSON object a line, its fields, the span's ids, hostile text, and what a
``--log_format json`` process routes through it (warnings, uncaught exceptions); ``ops/access.py``'s
fields and its text line's path."""

from __future__ import annotations

import calendar
import io
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from opentelemetry import context, trace

from trtllm_responses.ops import AccessRecord, JsonFormatter, uvicorn_logging
from trtllm_responses.ops.access import printable
from trtllm_responses.ops.log_format import ACCESS_FIELDS, TRACE_IDS, TraceIds

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


class Captured:
    """A logger whose records are formatted by a :class:`JsonFormatter` into a string."""

    def __init__(self, ids: TraceIds | None = None, name: str = "test.log_format") -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(JsonFormatter(ids))
        self.logger = logging.getLogger(name)
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False

    def lines(self) -> list[str]:
        return self.stream.getvalue().split("\n")[:-1]

    def entries(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.lines()]

    def close(self) -> None:
        self.logger.removeHandler(self.handler)


@pytest.fixture
def captured() -> Iterator[Callable[..., Captured]]:
    made: list[Captured] = []

    def make(ids: TraceIds | None = None, name: str = "test.log_format") -> Captured:
        made.append(Captured(ids, name))
        return made[-1]

    yield make
    for one in made:
        one.close()


def test_a_record_is_one_object_with_its_fields(captured: Callable[..., Captured]) -> None:
    log = captured()
    before = time.time()
    log.logger.warning("%d responses, %s", 3, "then more")
    (entry,) = log.entries()
    assert set(entry) == {"timestamp", "level", "logger", "message", "process"}
    assert entry["level"] == "WARNING" and entry["logger"] == "test.log_format"
    assert entry["message"] == "3 responses, then more" and entry["process"] == os.getpid()
    stamp = str(entry["timestamp"])
    assert TIMESTAMP.fullmatch(stamp)
    written = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))  # read as UTC
    assert before - 1 <= written + int(stamp[20:23]) / 1000 <= time.time() + 1


def test_the_ids_are_the_current_spans(captured: Callable[..., Captured]) -> None:
    current: list[tuple[str, str] | None] = [None]
    log = captured(lambda: current[0])
    log.logger.info("no span")
    current[0] = (TRACE_ID, SPAN_ID)
    log.logger.info("in a span")
    first, second = log.entries()
    assert "trace_id" not in first and "span_id" not in first
    assert (second["trace_id"], second["span_id"]) == (TRACE_ID, SPAN_ID)


def otel_ids() -> tuple[str, str] | None:
    """The current OpenTelemetry span's ids, as ``ops/tracing.current_ids`` gives them."""
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    return format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")


def test_the_ids_of_a_real_opentelemetry_span(captured: Callable[..., Captured]) -> None:
    log = captured(otel_ids)
    span = trace.NonRecordingSpan(
        trace.SpanContext(
            int(TRACE_ID, 16), int(SPAN_ID, 16), is_remote=False, trace_flags=trace.TraceFlags.SAMPLED
        )
    )
    token = context.attach(trace.set_span_in_context(span))
    try:
        log.logger.info("inside")
    finally:
        context.detach(token)
    log.logger.info("outside")
    inside, outside = log.entries()
    assert (inside["trace_id"], inside["span_id"]) == (TRACE_ID, SPAN_ID)
    assert "trace_id" not in outside


def test_ids_a_record_carries_win_and_a_failing_source_costs_only_the_ids(
    captured: Callable[..., Captured],
) -> None:
    log = captured(lambda: ("f" * 32, "e" * 16))
    log.logger.info("own", extra={TRACE_IDS: (TRACE_ID, SPAN_ID)})
    (entry,) = log.entries()
    assert (entry["trace_id"], entry["span_id"]) == (TRACE_ID, SPAN_ID)

    def broken() -> tuple[str, str] | None:
        raise RuntimeError("no context")

    failing = captured(broken, name="test.log_format.failing")
    failing.logger.info("still written")
    (entry,) = failing.entries()
    assert entry["message"] == "still written" and "trace_id" not in entry


def test_an_exception_is_its_formatted_traceback(captured: Callable[..., Captured]) -> None:
    log = captured()
    try:
        raise ValueError("the store said no")
    except ValueError:
        log.logger.exception("Writing failed")
    (line,) = log.lines()
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["message"] == "Writing failed"
    assert str(entry["exception"]).startswith("Traceback (most recent call last):")
    assert str(entry["exception"]).endswith("ValueError: the store said no")


HOSTILE = [
    'a "quoted" \\ path',
    "two\nlines\r\nand a\x00nul\x1b[31m",
    "line\u2028separators\u2029and\x85next line",
    "a lone surrogate \\udcff from bytes that were not UTF-8",  # made in the test: xdist's report can't carry one
    "\ufffd\x7f\x9b",
]


@pytest.mark.parametrize(
    "text", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))]
)  # ASCII ids: xdist sends them as UTF-8
def test_hostile_text_stays_one_line_and_reads_back(captured: Callable[..., Captured], text: str) -> None:
    text = text.replace("\\udcff", "\udcff")
    log = captured()
    # Straight to the handler: no other logging handler (pytest's capture, which xdist sends as UTF-8) sees it.
    log.handler.handle(
        log.logger.makeRecord(log.logger.name, logging.ERROR, __file__, 0, "%s", (text,), None)
    )
    written = log.stream.getvalue()
    assert written.endswith("\n") and len(written.splitlines()) == 1  # splitlines splits on \u2028, \x85 too
    written.encode("utf-8")  # a UTF-8 stream takes it
    assert json.loads(written)["message"] == text


def test_extra_values_are_not_written(captured: Callable[..., Captured]) -> None:
    log = captured()
    log.logger.info("calling", extra={"api_key": "sk-secret-value", "body": "the prompt"})
    (line,) = log.lines()
    assert "sk-secret-value" not in line and "the prompt" not in line


def test_the_access_fields_are_typed_fields(captured: Callable[..., Captured]) -> None:
    log = captured(name="trtllm_responses.access")
    scope = {"method": "POST", "path": "/v1/res\nponses x", "headers": [(b"x-request-id", b'id"1')]}
    record = AccessRecord.start(scope)
    record.status, record.tenant, record.response_id, record.session_id = 200, "team-a", "resp_1", "s-1"
    record.input_tokens, record.output_tokens, record.cached_tokens = 12, 34, 8
    record.first_token = record.started + 0.0123
    record.log()
    (line,) = log.lines()
    entry = json.loads(line)
    assert {key: entry[key] for key in ("method", "path", "status", "request_id", "tenant")} == {
        "method": "POST",
        "path": "/v1/res\nponses x",
        "status": 200,
        "request_id": 'id"1',
        "tenant": "team-a",
    }
    assert (entry["response_id"], entry["session_id"]) == ("resp_1", "s-1")
    assert (entry["input_tokens"], entry["output_tokens"], entry["cached_tokens"]) == (12, 34, 8)
    assert entry["first_token_ms"] == 12.3 and isinstance(entry["duration_ms"], float)
    assert str(entry["message"]).startswith('POST /v1/res%0Aponses%20x 200 request_id=id"1 tenant=team-a ')


def test_an_access_line_without_a_response_leaves_those_fields_out(captured: Callable[..., Captured]) -> None:
    log = captured(name="trtllm_responses.access")
    record = AccessRecord.start({"method": "GET", "path": "/health", "headers": []})
    record.status = 200
    record.trace_ids = (TRACE_ID, SPAN_ID)
    record.log()
    (entry,) = log.entries()
    assert set(entry) - {"timestamp", "level", "logger", "message", "process"} == {
        "method",
        "path",
        "status",
        "request_id",
        "duration_ms",
        "trace_id",
        "span_id",
    }
    assert ACCESS_FIELDS not in entry  # the fields, never the attribute carrying them


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/v1/responses", "/v1/responses"),
        ("/v1/é/ü", "/v1/é/ü"),
        ("/a b", "/a%20b"),
        ("/a\nGET /forged 200", "/a%0AGET%20/forged%20200"),
        ("/x\r\x00\x7f", "/x%0D%00%7F"),
        ("/x\u2028\x85", "/x%E2%80%A8%C2%85"),
    ],
)
def test_the_text_lines_path_cannot_split_the_line(path: str, shown: str) -> None:
    assert printable(path) == shown


def test_text_leaves_uvicorn_as_it_was() -> None:
    assert uvicorn_logging("text") == {}
    config = uvicorn_logging("json")["log_config"]
    assert config["loggers"]["uvicorn"] == {"handlers": [], "propagate": True}


PROCESS = """
import logging, sys, threading, warnings
from trtllm_responses.ops import setup_logging
setup_logging("INFO", "json")
logging.getLogger("uvicorn.error").info("a library's line")
warnings.warn("a warning")
thread = threading.Thread(target=lambda: 1 / 0, name="worker-thread")
thread.start(); thread.join()
print("stdout is not the log", flush=True)
raise KeyError("uncaught")
"""


def test_a_json_process_writes_every_stderr_line_as_json() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROCESS], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert done.returncode == 1 and done.stdout == "stdout is not the log\n"
    entries = [json.loads(line) for line in done.stderr.splitlines()]
    assert [entry["logger"] for entry in entries] == [
        "uvicorn.error",
        "py.warnings",
        "trtllm_responses",
        "trtllm_responses",
    ]
    assert "UserWarning: a warning" in str(entries[1]["message"])
    assert entries[2]["message"] == "Uncaught ZeroDivisionError in thread worker-thread"
    assert "ZeroDivisionError" in str(entries[2]["exception"])
    assert entries[3]["level"] == "CRITICAL" and entries[3]["message"] == "Uncaught KeyError"
    assert str(entries[3]["exception"]).endswith("KeyError: 'uncaught'")
