"""One cgroup per local python call: the total memory and process count of everything the call starts.

The kernel does the bounding; this module only finds where the server may create cgroups, makes one per
call, puts the call's first process in it (children inherit it), and removes it afterwards.

- **cgroup v2** (a unified hierarchy): the server's own cgroup (``0::PATH`` in ``/proc/self/cgroup``) must
  be writable and have ``memory`` and ``pids`` in its ``cgroup.subtree_control`` already (a delegated
  cgroup; the server changes no host setting). A call's cgroup gets ``memory.max``, ``memory.swap.max = 0`` and ``pids.max``.
- **cgroup v1** (legacy/hybrid hosts, as root): the server's cgroups in the ``memory`` and ``pids``
  hierarchies; a call gets ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is
  accounted) and ``pids.max``.

Anything else (no write access, a container without a delegated cgroup): :meth:`CgroupParent.find` returns
None and the sandbox says why
(docs/server-run-tools.md#gpt-osss-own-tools-python-code_interpreter-and-browser-web_search).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CallCgroup", "CgroupParent"]

_counter = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller (``""`` for v2): path}."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """Cgroup mounts from ``/proc/self/mountinfo``: (mount root, mount point, fs type, super options)."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return found


def under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or inside it (as strings: no file system lookup)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _directory(mount_root: str, mount_point: str, path: str) -> Path | None:
    if not under(path, mount_root):
        return None
    return Path(mount_point + "/" + path[len(mount_root) :].lstrip("/")).resolve()


def _writable(directory: Path) -> bool:
    probe = directory / f"trtllm-probe-{os.getpid()}-{next(_counter)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


@dataclass(frozen=True, slots=True)
class CgroupParent:
    """Where the server creates its calls' cgroups: one directory (v2) or one per controller (v1)."""

    version: int
    memory: Path
    pids: Path

    @classmethod
    def find(cls) -> CgroupParent | None:
        """The cgroup(s) the server may create call cgroups under, with memory and pids control; else None."""
        own = _own_cgroups()
        mounts = _mounts()
        for root, point, kind, _ in mounts:
            if kind == "cgroup2" and "" in own:
                directory = _directory(root, point, own[""])
                if directory is not None and _v2_ready(directory):
                    return cls(2, directory, directory)
        v1: dict[str, Path] = {}
        for root, point, kind, options in mounts:
            for controller in ("memory", "pids"):
                if kind == "cgroup" and controller in options and controller in own:
                    directory = _directory(root, point, own[controller])
                    if directory is not None and directory.is_dir() and _writable(directory):
                        v1[controller] = directory
        if len(v1) == 2:
            return cls(1, v1["memory"], v1["pids"])
        return None

    def sweep(self) -> None:
        """Remove call cgroups left by servers that were killed (SIGKILL: no clean-up ran); only empty ones go."""
        for root in {self.memory, self.pids}:
            for directory in root.glob("trtllm-python-*-*"):
                pid = directory.name.split("-")[2]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    with contextlib.suppress(OSError):
                        directory.rmdir()

    def create(self, memory_bytes: int, processes: int) -> CallCgroup:
        """A new cgroup (per hierarchy) for one call, its limits written."""
        name = f"trtllm-python-{os.getpid()}-{next(_counter)}"
        if self.version == 2:
            directory = self.memory / name
            directory.mkdir()
            call = CallCgroup(self.version, (directory,))
            try:
                _write(directory / "memory.max", memory_bytes)
                with contextlib.suppress(FileNotFoundError):  # no swap accounting configured
                    _write(directory / "memory.swap.max", 0)
                _write(directory / "pids.max", processes)
            except OSError:
                call.remove()
                raise
            return call
        memory, pids = self.memory / name, self.pids / name
        memory.mkdir()
        call = CallCgroup(self.version, (memory,))
        try:
            pids.mkdir()
            call = CallCgroup(self.version, (memory, pids))
            _write(memory / "memory.limit_in_bytes", memory_bytes)
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", memory_bytes)
            _write(pids / "pids.max", processes)
        except OSError:
            call.remove()
            raise
        return call


def _v2_ready(directory: Path) -> bool:
    """Whether call cgroups under ``directory`` get memory and pids control (the server changes no host setting)."""
    try:
        enabled = set((directory / "cgroup.subtree_control").read_text().split())
    except OSError:
        return False
    return {"memory", "pids"} <= enabled and _writable(directory)


def _write(path: Path, value: int) -> None:
    path.write_text(str(value))


@dataclass(frozen=True, slots=True)
class CallCgroup:
    """One call's cgroup(s): the ``cgroup.procs`` files its first process joins, and removal."""

    version: int
    directories: tuple[Path, ...]

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to (``echo $$ >``) to join the call's cgroup(s)."""
        return [str(directory / "cgroup.procs") for directory in self.directories]

    def kill(self) -> None:
        """SIGKILL every process left in the cgroup (``cgroup.kill`` on v2, each pid on v1)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.directories[0] / "cgroup.kill").write_text("1")
                return
        for pid in self._pids():
            with contextlib.suppress(OSError):
                os.kill(pid, 9)

    def _pids(self) -> list[int]:
        pids: set[int] = set()
        for directory in self.directories:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
        return sorted(pids)

    def remove(self, wait: float = 5.0) -> bool:
        """Kill what is left, wait until the cgroup is empty, remove it; False if it could not be removed."""
        deadline = time.monotonic() + wait
        removed = True
        for directory in self.directories:
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        removed = False
                        break
                    self.kill()
                    time.sleep(0.01)
        return removed
