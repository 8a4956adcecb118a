"""A real nginx (Debian's package; the Makefile installs it) in front of test servers, on a loopback port.

It runs ``examples/nginx-session-affinity.conf`` as it is, with the upstream servers and the listen port
replaced, inside a main configuration of its own: everything (pid, logs, temp files) in a temp folder it
owns, in the foreground, stopped by the test. Each response carries ``x-upstream`` (``$upstream_addr``,
the replica that answered) for the tests to read; the example does not send it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from support.paths import ROOT
from support.redis_harness import free_port

__all__ = ["EXAMPLE", "Nginx", "nginx_binary"]

EXAMPLE = ROOT / "examples" / "nginx-session-affinity.conf"


def nginx_binary() -> str | None:
    """The nginx executable, or None."""
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )


def site_config(upstreams: list[str], port: int) -> str:
    """The example with its ``server host:port ...;`` upstream lines and its ``listen`` set to these."""
    text = EXAMPLE.read_text()
    lines = text.splitlines()
    servers = [i for i, line in enumerate(lines) if re.match(r"\s*server \d+\.\d+\.\d+\.\d+:\d+ ", line)]
    assert len(servers) >= 1, "the example has no upstream servers"
    options = re.sub(r"^\s*server \S+ ?", "", lines[servers[0]])  # max_fails=... fail_timeout=...;
    replaced = [f"    server {address} {options}".rstrip() for address in upstreams]
    lines[servers[0] : servers[-1] + 1] = replaced
    text = "\n".join(lines) + "\n"
    text, listens = re.subn(r"listen \d+;", f"listen 127.0.0.1:{port};", text)
    assert listens == 1, "the example has one listen directive"
    return text


class Nginx:
    """One nginx master process on 127.0.0.1, proxying to ``upstreams`` (``host:port``) with the example."""

    def __init__(self, upstreams: list[str]) -> None:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError(
                "nginx is not installed (make test installs Debian's nginx-light with apt-get)"
            )
        self.binary = binary
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="nginx-test-"))
        self.process: subprocess.Popen[bytes] | None = None
        (self.dir / "site.conf").write_text(site_config(upstreams, self.port))
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers as root: they write the temp folder
        temp = "".join(
            f"    {kind}_temp_path {self.dir / kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (self.dir / "nginx.conf").write_text(
            f"{user}worker_processes 1;\npid {self.dir / 'nginx.pid'};\nerror_log {self.dir / 'error.log'} info;\n"
            "events { worker_connections 256; }\n"
            "http {\n"
            f"    access_log {self.dir / 'access.log'};\n{temp}"
            "    add_header x-upstream $upstream_addr always;\n"
            f"    include {self.dir / 'site.conf'};\n"
            "}\n"
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20) -> Nginx:
        command = [self.binary, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-g", "daemon off;"]
        check = subprocess.run([*command[:-2], "-t"], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"nginx refused the configuration:\n{check.stderr}")
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.process.returncode}:\n{self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not start:\n{self.error_log()}")

    def error_log(self) -> str:
        path = self.dir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """SIGQUIT (graceful), then SIGKILL if it lingers; the temp folder is removed."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)
