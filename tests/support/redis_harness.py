"""A real ``redis-server`` on a free loopback port, started and stopped by tests.

The binary comes from Debian's ``redis-server`` package (the Makefile installs
it); tests that need it are skipped with the reason if it is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

__all__ = ["RedisServer", "free_port", "redis_binary"]


def redis_binary() -> str | None:
    """The redis-server executable, or None."""
    return shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/local/bin/redis-server") if Path(p).exists()), None
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process (no persistence) on 127.0.0.1; ``stop``/``start`` simulate an outage."""

    def __init__(self, port: int | None = None) -> None:
        binary = redis_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it with apt-get)")
        self.binary = binary
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="redis-test-")
        # Kept across stop()/start() (an outage and a restart), removed with this object or at the test's exit.
        weakref.finalize(self, shutil.rmtree, self.dir, ignore_errors=True)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(b"FLUSHALL\r\n")
            s.recv(16)
