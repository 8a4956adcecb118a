"""Fake TensorRT-LLM gRPC engines (``tests/fake_trtllm/grpc_server.py``) as real processes on loopback ports.

Each :class:`GrpcEngine` is one ``trtllm-serve MODEL --grpc`` (``protocol="openengine"``: ``--grpc-protocol
openengine``) as the fake plays it, on a free port of
127.0.0.1, its output in a log file of its own; ``start`` returns once it says it is ready. ``terminate`` is
SIGTERM (the server stops with its grace period), ``kill`` SIGKILL (an engine that dies). :func:`grpc_engines`
starts several at once (their starts overlap: each loads the fake model) and stops them all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from support.paths import FAKE_TRTLLM, ROOT
from support.redis_harness import free_port

__all__ = ["READY", "GrpcEngine", "grpc_engines"]

#: The line ``launch_server`` logs once the port is served (tensorrt_llm/grpc/smg/server.py).
READY = "Server is ready to accept requests"
SERVER = Path(FAKE_TRTLLM) / "grpc_server.py"


class GrpcEngine:
    """One fake gRPC engine process (module docstring). ``options`` become its ``--extra_llm_api_options``."""

    def __init__(
        self,
        release: str = "1.4.0rc1",
        *,
        options: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        model: str = "/ckpt/gpt-oss-tiny",
        served_model_name: str | None = None,
        protocol: str = "smg",
    ) -> None:
        self.release = release
        #: ``--grpc-protocol``: "smg" (``trtllm.TrtllmService``) or "openengine" (``openengine.v1``)
        self.protocol = protocol
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"grpc-engine-{self.port}-"))
        # The directory (its log, config and the fake's record) lives as long as this object: tests read the log
        # after the engine stopped, so it goes when the object does, or when the test process exits.
        weakref.finalize(self, shutil.rmtree, self.dir, ignore_errors=True)
        self.log = self.dir / "engine.log"
        self.fake_log = self.dir / "fake_trtllm.jsonl"
        self.command = [
            sys.executable,
            "-u",
            str(SERVER),
            model,
            "--port",
            str(self.port),
            "--release",
            release,
        ]
        if options is not None:
            config = self.dir / "extra_llm_api_options.yaml"
            config.write_text(yaml.safe_dump(dict(options)))
            self.command += ["--extra_llm_api_options", str(config)]
        if served_model_name is not None:
            self.command += ["--served_model_name", served_model_name]
        if protocol != "smg":
            self.command += ["--grpc-protocol", protocol]
        self.env = {**os.environ, "FAKE_TRTLLM_LOG": str(self.fake_log), **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        """The address a gRPC channel dials: ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def launch(self) -> GrpcEngine:
        """Start the process without waiting for it (``wait_ready`` waits)."""
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT
            )
        return self

    def wait_ready(self, timeout: float = 180) -> GrpcEngine:
        """Return once the engine logged :data:`READY`; RuntimeError (with its log) if it exits or times out.
        The timeout is long: each engine imports the fake model, several seconds of CPU on a busy machine."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while READY not in self.output():
            if self.process.poll() is not None:
                raise RuntimeError(f"engine exited {self.process.returncode}: {self.output()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"engine not ready in {timeout} s: {self.output()[-4000:]}")
            time.sleep(0.05)
        return self

    def start(self, timeout: float = 180) -> GrpcEngine:
        return self.launch().wait_ready(timeout)

    def output(self) -> str:
        """What the process wrote so far (stdout and stderr)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def _signal(self, sig: signal.Signals, timeout: float) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)

    def terminate(self, timeout: float = 15) -> int | None:
        """SIGTERM, waiting for the exit (SIGKILL after ``timeout``); the exit status."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL: the engine dies at once."""
        return self._signal(signal.SIGKILL, 10)


@contextlib.contextmanager
def grpc_engines(*engines: GrpcEngine, timeout: float = 180) -> Iterator[tuple[GrpcEngine, ...]]:
    """Start ``engines`` together, yield them once all are ready, and stop them all (SIGTERM) afterwards."""
    try:
        for engine in engines:
            engine.launch()
        for engine in engines:
            engine.wait_ready(timeout)
        yield engines
    finally:
        for engine in engines:
            engine.terminate()
