"""K serving frontends on one port: ``serve --num_serve_frontends K`` (docs/stores-and-frontends.md#many-frontends-num_serve_frontends).

TensorRT-LLM's own multi-frontend serving, copied in shape (``tensorrt_llm/serve/_frontend_processes.py``,
``serve/multi_frontend.py``): the launcher (frontend 0) starts K-1 attached frontends by running the
same ``serve`` command line again with the group's facts in their environment; every frontend binds the
one port with ``SO_REUSEPORT`` (the kernel spreads connections over them); each attached frontend writes
``R`` on an inherited pipe once it serves, and the launcher serves only when all K do: a child that exits
first, or misses the deadline, fails the whole group. Afterwards the group lives and dies together: a
frontend that exits stops the launcher (and so the rest), SIGTERM to the launcher drains every frontend,
and an attached frontend whose launcher is gone stops itself. What needs one view of the group
(Prometheus counters, ``/stats``) is gathered from the frontends (``ops/metrics.py``, ``server/group.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENV_FRONTEND",
    "ENV_GROUP_DIR",
    "ENV_READY_FD",
    "FrontendGroup",
    "FrontendRole",
    "GroupStartError",
    "StartGroupWithApp",
    "frontend_role",
    "reuse_port_socket",
    "serve_argv",
    "signal_ready",
    "watch_launcher",
]

logger = logging.getLogger(__name__)

#: ``INDEX/COUNT`` of an attached frontend (unset in the launcher and in a single server).
ENV_FRONTEND = "TRTLLM_RESPONSES_FRONTEND"
#: The write end of the pipe an attached frontend signals READY on.
ENV_READY_FD = "TRTLLM_RESPONSES_READY_FD"
#: The group's own folder: Prometheus' multiprocess files, each frontend's Unix socket.
ENV_GROUP_DIR = "TRTLLM_RESPONSES_GROUP_DIR"
#: Seconds the launcher waits for every attached frontend to serve (TensorRT-LLM's TLLM_FRONTEND_READY_TIMEOUT).
READY_TIMEOUT = 300.0
#: Seconds between an attached frontend's checks that its launcher is alive.
LAUNCHER_WATCH_INTERVAL = 1.0


class GroupStartError(RuntimeError):
    """The group could not start: an attached frontend exited before it served, or was too slow."""


@dataclass(frozen=True)
class FrontendRole:
    """This process's place in a group of ``count`` frontends (``index`` 0: the launcher, or alone)."""

    index: int = 0
    count: int = 1
    group_dir: str | None = None

    @property
    def is_launcher(self) -> bool:
        return self.index == 0 and self.count > 1

    @property
    def is_attached(self) -> bool:
        return self.index > 0


def frontend_role(env: Mapping[str, str], count: int) -> FrontendRole:
    """The role ``serve --num_serve_frontends count`` has in a process whose environment is ``env``."""
    spec = env.get(ENV_FRONTEND)
    if spec is None:
        return FrontendRole(0, count, None)
    index, _, of = spec.partition("/")
    return FrontendRole(int(index), int(of), env.get(ENV_GROUP_DIR))


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` that other frontends of the group may bind too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.set_inheritable(False)
    except BaseException:
        sock.close()
        raise
    return sock


def signal_ready() -> None:
    """An attached frontend serves: tell the launcher (once; a no-op anywhere else)."""
    fd = os.environ.pop(ENV_READY_FD, None)
    if fd is None:
        return
    os.write(int(fd), b"R")
    os.close(int(fd))


def watch_launcher(
    on_lost: Callable[[], None], interval: float = LAUNCHER_WATCH_INTERVAL
) -> threading.Thread:
    """In an attached frontend: call ``on_lost`` once the launcher (the parent) is gone
    (TensorRT-LLM's ``AttachedFrontendWatchdog``: a frontend must not go on serving without its group)."""
    launcher = os.getppid()

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(interval)
        logger.error("The launcher frontend (pid %d) exited; this frontend stops", launcher)
        on_lost()

    thread = threading.Thread(target=watch, name="launcher-watch", daemon=True)
    thread.start()
    return thread


class FrontendGroup:
    """In the launcher: the K-1 attached frontends, started, awaited, watched and stopped together."""

    def __init__(self, count: int, group_dir: str, env: Mapping[str, str] | None = None) -> None:
        self.count = count
        self.group_dir = group_dir
        self._env = dict(os.environ if env is None else env)
        self.children: list[subprocess.Popen[bytes]] = []
        self._stopping = threading.Event()

    def start(
        self,
        argv: list[str],
        attach_env: Callable[[int], dict[str, str]] = lambda index: {},
        timeout: float = READY_TIMEOUT,
    ) -> None:
        """Run ``argv`` (``serve``'s command line) as frontends 1..K-1, each with ``attach_env(index)`` in its
        environment (what it needs to reach the launcher's engine); return once all serve.

        GroupStartError (the children already started are stopped) if one exits first or the deadline
        passes: ``num_serve_frontends=K`` never silently serves with fewer.
        """
        ready: dict[int, subprocess.Popen[bytes]] = {}
        try:
            for index in range(1, self.count):
                read_fd, write_fd = os.pipe()
                attach = attach_env(index)
                base = self._env if not attach else _without_mpi_identity(self._env)
                env = {
                    **base,
                    **attach,
                    ENV_FRONTEND: f"{index}/{self.count}",
                    ENV_GROUP_DIR: self.group_dir,
                    ENV_READY_FD: str(write_fd),
                }
                try:
                    child = subprocess.Popen(argv, env=env, pass_fds=(write_fd,))
                except BaseException:
                    os.close(read_fd)
                    raise
                finally:
                    os.close(write_fd)  # the child holds the only write end: its exit is EOF here
                self.children.append(child)
                ready[read_fd] = child
                logger.info("Started frontend %d of %d (pid %d)", index, self.count, child.pid)
            self._await_ready(ready, timeout)
        except BaseException:
            self.stop(grace=5.0)
            raise
        finally:
            for fd in ready:
                os.close(fd)

    def _await_ready(self, pending: dict[int, subprocess.Popen[bytes]], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        waiting = dict(pending)
        with selectors.DefaultSelector() as selector:
            for fd in waiting:
                selector.register(fd, selectors.EVENT_READ)
            while waiting:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise GroupStartError(
                        f"{len(waiting)} frontend(s) did not start serving within {timeout:g} s"
                    )
                for key, _ in selector.select(min(remaining, 1.0)):
                    child = waiting.pop(key.fd)  # type: ignore[call-overload]
                    selector.unregister(key.fd)
                    if os.read(key.fd, 1) != b"R":  # type: ignore[arg-type]  # EOF: exited first
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            child.wait(timeout=1.0)
                        raise GroupStartError(
                            f"Frontend pid {child.pid} exited (code {child.returncode}) before it served"
                        )
                for child in self.children:  # a sibling that already signalled may have died since
                    if child.poll() is not None:
                        raise GroupStartError(
                            f"Frontend pid {child.pid} exited (code {child.returncode}) while the group started"
                        )

    def watch(self, on_exit: Callable[[int, int], None]) -> None:
        """Call ``on_exit(pid, code)`` (once) when an attached frontend exits while the group is not stopping."""

        def wait(child: subprocess.Popen[bytes]) -> None:
            code = child.wait()
            if not self._stopping.is_set():
                self._stopping.set()
                logger.error("Frontend pid %d exited (code %d): the group stops", child.pid, code)
                on_exit(child.pid, code)

        for child in self.children:
            threading.Thread(target=wait, args=(child,), name=f"frontend-{child.pid}", daemon=True).start()

    def forward_signal(self, signum: int) -> None:
        """Send ``signum`` to every attached frontend still running (SIGHUP: each reloads its tenants)."""
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signum)

    def terminate(self) -> None:
        """SIGTERM every attached frontend (each drains, as the launcher does)."""
        self._stopping.set()
        for child in self.children:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGTERM)

    def stop(self, grace: float) -> None:
        """SIGTERM every attached frontend, wait ``grace`` seconds in all, SIGKILL what is left."""
        self.terminate()
        deadline = time.monotonic() + grace
        for child in self.children:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("Frontend pid %d did not stop in time; killed", child.pid)
                child.kill()
                child.wait()


#: Variables that give a process an MPI (or Slurm) rank: an attached frontend inheriting them would try to
#: join the launcher's job (TensorRT-LLM's ``split_mpi_env`` strips them for the same reason).
_MPI_IDENTITY = ("OMPI_", "PMI_", "PMIX_", "SLURM_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")


def _without_mpi_identity(env: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if not name.startswith(_MPI_IDENTITY)}


def serve_argv(argv: list[str] | None = None) -> list[str]:
    """The command line that runs this ``serve`` again (as a module: a console script's path is not one)."""
    return [sys.executable, "-m", "trtllm_responses.cli", *(sys.argv[1:] if argv is None else argv)]


class StartGroupWithApp:
    """The launcher's ASGI app: the attached frontends start once the app has started (its executor is
    up, as TensorRT-LLM's must be before frontends attach) and before uvicorn accepts a connection.

    A group that cannot start fails the launcher's start-up (uvicorn exits non-zero). Everything else
    (attributes uvicorn's settings read, routes) is the wrapped app's.
    """

    def __init__(self, app: Any, start: Callable[[], None]) -> None:
        self.app = app
        self._start = start

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def started(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.startup.complete":
                try:
                    await asyncio.to_thread(self._start)
                except Exception as exc:  # GroupStartError, or a child that could not be run
                    logger.error("The frontends could not start: %s", exc)
                    message = {"type": "lifespan.startup.failed", "message": str(exc)}
            await send(message)

        await self.app(scope, receive, started)
