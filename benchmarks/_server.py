"""Starting a server for a benchmark: a subprocess on a free port, pinned to CPU 0 where possible.

Pinning the server to one core and the load generator (this process) to the
other keeps the two from migrating between cores, which on a 2-core machine
makes run-to-run figures far steadier. It is reported with the results.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

SERVER_CPU = 0
CLIENT_CPU = 1


def pinning_available() -> bool:
    return shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2


def pin_this_process() -> bool:
    """Pin the calling process (the load generator) to CLIENT_CPU."""
    if not pinning_available():
        return False
    os.sched_setaffinity(0, {CLIENT_CPU})
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    extra: list[str] | None = None, command: list[str] | None = None, cpus: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """``trtllm-responses serve`` (echo, unpaced) on a free port, or ``command`` with the port as its
    third word (``[python, script, PORT, ...]``); pinned to ``cpus`` (taskset's list) if given, else to
    SERVER_CPU; returns the process and its base URL."""
    port = free_port()
    if command is not None:
        command = [*command[:2], str(port), *command[2:]]
    else:
        command = [
            sys.executable,
            "-m",
            "trtllm_responses.cli",
            "serve",
            "--port",
            str(port),
            "--log_level",
            "warning",
        ]
        command += extra or []
    if pinning_available():
        command = ["taskset", "-c", cpus or str(SERVER_CPU), *command]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("server did not start")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def post_json(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def report(result: dict[str, Any], as_json: bool) -> None:
    """Print a benchmark's result: one JSON line, or ``key  value`` lines."""
    if as_json:
        print(json.dumps(result))
        return
    width = max(len(key) for key in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
