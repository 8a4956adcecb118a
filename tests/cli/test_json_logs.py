"""``serve --log_format json`` as a log pipeline reads it: a real server's stderr, every line one JSON object,
the access lines' fields what the client sent and got; a group of frontends and a render worker logging the
same way; and ``--log_format text`` (the default) writing the lines it always wrote, a hostile path included
(docs/tracing-and-dashboards.md#json-logs)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.process_harness import wait_answering
from support.redis_harness import free_port

BASE_FIELDS = {"timestamp", "level", "logger", "message", "process"}
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


class LoggedServe:
    """A ``serve`` (echo executor, one render worker) whose stdout and stderr are files of their own."""

    def __init__(self, folder: Path, *flags: str) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.stdout, self.stderr = folder / "stdout", folder / "stderr"
        command = [sys.executable, "-m", "trtllm_responses.cli", "serve", "--engine", "echo"]
        command += ["--port", str(self.port), "--render_workers", "1", *flags]
        env = {**os.environ, "TRTLLM_RESPONSES_CACHE": str(folder / "cache")}
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err, env=env)

    def wait_ready(self, timeout: float = 120) -> LoggedServe:
        wait_answering(self.process, self.base_url + "/health", self.stderr.read_text, timeout=timeout)
        return self

    def stop(self) -> list[str]:
        """SIGTERM, then every line it wrote to stderr (stdout must hold none)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=90)
        assert self.stdout.read_bytes() == b""
        return self.stderr.read_bytes().decode("utf-8").split("\n")[:-1]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[LoggedServe] = []

    def start(*flags: str) -> LoggedServe:
        started.append(LoggedServe(tmp_path, *flags).wait_ready())
        return started[-1]

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(timeout=10)


def parsed(lines: list[str]) -> list[dict[str, Any]]:
    """Each line as JSON (a line that is not fails the test), with the fields every line has."""
    entries = []
    for line in lines:
        entry = json.loads(line)
        assert isinstance(entry, dict) and BASE_FIELDS <= set(entry), line
        assert TIMESTAMP.fullmatch(entry["timestamp"]) and isinstance(entry["process"], int), line
        entries.append(entry)
    return entries


def access(entries: list[dict[str, Any]], request_id: str) -> dict[str, Any]:
    (entry,) = [
        e for e in entries if e["logger"] == "trtllm_responses.access" and e.get("request_id") == request_id
    ]
    return entry


def test_json_logs_every_line_an_object_the_access_fields_what_the_client_saw(serve: Any) -> None:
    server = serve("--log_format", "json", "--log_level", "info")
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
        with client.responses.stream(
            model="gpt-oss", input="#lorem 12", extra_headers={"x-request-id": "streamed-1"}
        ) as stream:
            streamed = stream.get_final_response()
        plain = client.responses.with_raw_response.create(
            model="gpt-oss", input="hello", extra_headers={"x-request-id": "plain-1"}
        )
        answered = plain.parse()
        bad = httpx.post(
            server.base_url + "/v1/responses", content=b'{"input": ', headers={"x-request-id": "bad-1"}
        )
        assert bad.status_code == 400
        hostile = httpx.get(server.base_url + "/v1/a%0Ab%22c%00d%E2%80%A8e%FF")
        assert hostile.status_code == 404
        entries = parsed(server.stop())

    assert {e["process"] for e in entries} >= {server.process.pid}
    loggers = {e["logger"] for e in entries}
    assert {"uvicorn.error", "trtllm_responses", "trtllm_responses.access"} <= loggers
    line = access(entries, "streamed-1")
    assert (line["method"], line["path"], line["status"]) == ("POST", "/v1/responses", 200)
    assert line["response_id"] == streamed.id and line["tenant"] == "default"
    assert streamed.usage is not None and answered.usage is not None
    assert (line["input_tokens"], line["output_tokens"]) == (
        streamed.usage.input_tokens,
        streamed.usage.output_tokens,
    )
    assert line["cached_tokens"] == streamed.usage.input_tokens_details.cached_tokens
    assert 0 < line["first_token_ms"] <= line["duration_ms"]
    line = access(entries, "plain-1")
    assert line["response_id"] == answered.id and plain.headers["x-request-id"] == "plain-1"
    assert line["session_id"] == plain.headers["x-session-id"]
    assert line["output_tokens"] == answered.usage.output_tokens
    line = access(entries, "bad-1")
    assert (line["status"], line["path"]) == (400, "/v1/responses") and "response_id" not in line
    (line,) = [e for e in entries if e.get("status") == 404]
    assert line["path"] == '/v1/a\nb"c\x00d\u2028e\ufffd'
    assert line["request_id"] == hostile.headers["x-request-id"]
    assert all(e["level"] in ("INFO", "WARNING") and "exception" not in e for e in entries)


def test_text_logs_are_the_lines_they_were(serve: Any) -> None:
    server = serve("--log_level", "info")
    assert httpx.get(server.base_url + "/health", headers={"x-request-id": "pin-1"}).status_code == 200
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0) as client:
        answered = client.responses.with_raw_response.create(
            model="gpt-oss", input="hello", extra_headers={"x-request-id": "pin-2"}
        )
        response = answered.parse()
        assert response.usage is not None
        hostile = httpx.get(server.base_url + "/v1/a%0AINFO%20trtllm_responses.access:%20GET%20/forged")
        assert hostile.status_code == 404
        lines = server.stop()

    assert any(re.fullmatch(r"INFO:     Started server process \[\d+\]", line) for line in lines)
    assert any(
        re.fullmatch(r"INFO:     Uvicorn running on http://127\.0\.0\.1:\d+ \(Press CTRL\+C to quit\)", line)
        for line in lines
    )
    ours = [line for line in lines if line.startswith("INFO trtllm_responses.access: ")]
    assert any(
        re.fullmatch(
            r"INFO trtllm_responses\.access: GET /health 200 request_id=pin-1 tenant=default duration_ms=\d+\.\d",
            line,
        )
        for line in ours
    ), ours
    usage = response.usage
    pinned = (
        rf"INFO trtllm_responses\.access: POST /v1/responses 200 request_id=pin-2 tenant=default "
        rf"response_id={response.id} session_id={answered.headers['x-session-id']} "
        rf"input_tokens={usage.input_tokens} output_tokens={usage.output_tokens} "
        rf"cached_tokens={usage.input_tokens_details.cached_tokens} duration_ms=\d+\.\d first_token_ms=\d+\.\d"
    )
    assert any(re.fullmatch(pinned, line) for line in ours), ours
    forged = [line for line in lines if "/forged" in line]
    assert len(forged) == 1 and forged[0].startswith(
        "INFO trtllm_responses.access: GET /v1/a%0AINFO%20trtllm_responses.access:%20GET%20/forged 404 "
    )


def test_a_group_of_frontends_logs_json_from_every_process(serve: Any, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'group.db'}"
    server = serve(
        "--log_format", "json", "--log_level", "info", "--num_serve_frontends", "2", "--store", store
    )
    for index in range(6):
        assert (
            httpx.get(server.base_url + "/health", headers={"x-request-id": f"group-{index}"}).status_code
            == 200
        )
    entries = parsed(server.stop())
    started = {e["process"] for e in entries if str(e["message"]).startswith("Started server process")}
    assert len(started) == 2 and server.process.pid in started
    assert {e["process"] for e in entries} == started
    for index in range(6):
        assert access(entries, f"group-{index}")["process"] in started


def test_a_render_worker_logs_its_death_as_json() -> None:
    worker = [sys.executable, "-m", "trtllm_responses.harmony.render_pool"]
    frame = (5).to_bytes(4, "little") + b"[1, 2"  # not JSON: the worker dies of it
    for log_format in ("json", "text"):
        done = subprocess.run([*worker, log_format], input=frame, capture_output=True, timeout=120)
        assert done.returncode == 1
        lines = done.stderr.decode().splitlines()
        if log_format == "text":
            assert lines[0] == "Traceback (most recent call last):"  # Python's own, as before
            continue
        (entry,) = parsed(lines)
        assert entry["level"] == "CRITICAL" and entry["process"] > 0
        assert "JSONDecodeError" in entry["exception"]


def test_a_failed_start_says_so_in_json() -> None:
    command = [
        sys.executable,
        "-m",
        "trtllm_responses.cli",
        "serve",
        "--engine",
        "trtllm",
        "--log_format",
        "json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    (entry,) = parsed(done.stderr.splitlines())
    assert entry["level"] == "ERROR" and entry["message"].startswith(
        "trtllm-responses serve: --engine trtllm needs MODEL"
    )
