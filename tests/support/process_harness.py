"""``trtllm-responses serve`` as a real subprocess on a free loopback port (restarts, SIGKILL, SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import openai

from support.redis_harness import free_port

__all__ = [
    "TEST_FLAGS",
    "ServeProcess",
    "host_processes",
    "on_frontend",
    "wait_answering",
    "wait_gone",
    "with_test_flags",
]


#: What every ``serve`` a test starts gets unless it says otherwise: one render worker. The default is one a
#: core, each started with the server and loading the vocabulary (~2 s of CPU, a quarter of a start on the
#: 2-core machine); no test of a started process renders beside the loop (the render pool's own tests are
#: ``tests/harmony/test_render_pool.py``).
TEST_FLAGS = {"--render_workers": "1"}


def with_test_flags(flags: tuple[str, ...] | list[str]) -> list[str]:
    """``flags`` and each of :data:`TEST_FLAGS` that ``flags`` does not set itself."""
    extra = [part for name, value in TEST_FLAGS.items() if name not in flags for part in (name, value)]
    return [*flags, *extra]


def wait_answering(
    process: subprocess.Popen[bytes],
    url: str,
    output: Callable[[], str],
    *,
    timeout: float,
    name: str = "serve",
    interval: float = 0.05,
) -> None:
    """Return once ``GET url`` answers 200 (a started server's readiness); RuntimeError with ``output()``
    (its log) if ``process`` exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{output()}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(interval)
    raise RuntimeError(f"{name} did not start:\n{output()}")


class ServeProcess:
    """One ``serve`` process with the echo executor (and :data:`TEST_FLAGS`); ``kill`` is SIGKILL,
    ``terminate`` is SIGTERM."""

    def __init__(self, *flags: str, port: int | None = None, env: dict[str, str] | None = None) -> None:
        self.flags = flags
        self.port = port or free_port()
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"serve-{self.port}-{os.getpid()}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def sdk(self) -> openai.OpenAI:
        """An ``openai`` client of this server (no retries: a test sees each answer as it is)."""
        return openai.OpenAI(base_url=self.base_url + "/v1", api_key="unused", max_retries=0, timeout=30)

    def start(self, timeout: float = 120) -> ServeProcess:
        """Start it; return once ``/health`` answers (a group of frontends takes ~13 s on a quiet 2-core
        machine, several times that while the suite's other workers start theirs: hence 120 s)."""
        command = [sys.executable, "-m", "trtllm_responses.cli", "serve", "--engine", "echo"]
        command += ["--port", str(self.port), "--log_level", "warning", *with_test_flags(self.flags)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(self.env or {})}
            )
        try:
            wait_answering(self.process, self.base_url + "/health", self.output, timeout=timeout)
        except RuntimeError:
            self.kill()
            raise
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM; the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        self.process = None
        return code


def on_frontend(
    server: ServeProcess | str, index: int, headers: dict[str, str] | None = None, tries: int = 200
) -> httpx.Client:
    """A client (sending ``headers``) whose one connection is served by frontend ``index`` of a group (of a
    server, or at a base URL): which frontend answers a connection is the kernel's choice (``SO_REUSEPORT``),
    so connections are opened until ``/health`` on one names it."""
    base_url = server if isinstance(server, str) else server.base_url
    for _ in range(tries):
        client = httpx.Client(
            base_url=base_url, headers=headers, timeout=30, limits=httpx.Limits(max_connections=1)
        )
        if client.get("/health").json()["frontend"] == index:
            return client
        client.close()
    raise AssertionError(f"no connection reached frontend {index} in {tries} tries")


def host_processes(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def wait_gone(marker: str, seconds: float = 5.0) -> list[int]:
    """Wait up to ``seconds`` for the processes ``marker`` names to end; those still there."""
    deadline = time.monotonic() + seconds
    while (left := host_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
