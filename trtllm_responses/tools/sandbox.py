"""The sandbox a local python call runs in: bubblewrap's namespaces and mounts, a cgroup, rlimits.

The mechanism is borrowed (bubblewrap 0.8, Debian 12's; the kernel's cgroups and rlimits); this
module chooses the policy: every namespace, no nested user namespace, a read-only minimal root with
a private ``/sandbox`` tmpfs, a cleared environment, and the call's cgroup (:mod:`.cgroups`) or
rlimits. The policy in full:
docs/server-run-tools.md#gpt-osss-own-tools-python-code_interpreter-and-browser-web_search (python).
:func:`setup_sandbox` probes
once that it all works here, else raises :class:`SandboxUnavailable` saying why (``serve`` refuses to
start).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import weakref
from dataclasses import dataclass, field

import orjson

from .cgroups import CallCgroup, CgroupParent, under
from .settings import PythonLimits

__all__ = ["SANDBOX_DIR", "Sandbox", "SandboxUnavailable", "setup_sandbox"]

#: The call's private writable directory inside the sandbox (its cwd, HOME and TMPDIR).
SANDBOX_DIR = "/sandbox"
#: The size of the sandbox's ``/dev/shm`` (a tmpfs of its own: POSIX shared memory, semaphores).
SHM_BYTES = 16 << 20
#: The uid and gid the code runs as inside its user namespace ("nobody").
SANDBOX_ID = "65534"
#: ``bwrap``'s own environment (it clears the code's with ``--clearenv``).
_BWRAP_ENV = {"PATH": "/usr/bin:/bin"}
#: Joins the call's cgroup(s) (``echo $$ > cgroup.procs``), then becomes ``bwrap`` (same pid): every
#: process of the call starts inside the cgroup, none is moved in after it could have forked.
_JOIN_CGROUP = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
)

#: Runs in the sandbox before the model's code (read from stdin): the rlimits, then the code.
BOOTSTRAP = r"""
import os, resource, sys
cpu, mem, fsize, nproc = (int(v) for v in sys.argv[1:5])
def limit(kind, value, hard=None):
    try:
        resource.setrlimit(kind, (value, value if hard is None else hard))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(kind)
        resource.setrlimit(kind, (min(value, hard) if hard != resource.RLIM_INFINITY else value, hard))
limit(resource.RLIMIT_CPU, cpu, cpu + 1)  # SIGXCPU at cpu s, SIGKILL a second later
limit(resource.RLIMIT_FSIZE, fsize)
limit(resource.RLIMIT_NOFILE, 256)
limit(resource.RLIMIT_CORE, 0)
if sys.argv[5] == "probe":
    limit(resource.RLIMIT_NPROC, 1)
    try:
        pid = os.fork()
    except OSError:
        enforced = True
    else:
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        enforced = False
    print('{"uid": %d, "nproc_enforced": %s}' % (os.getuid(), "true" if enforced else "false"))
    raise SystemExit(0)
limit(resource.RLIMIT_NPROC, nproc)
code = sys.stdin.read()
sys.stdin.close()
sys.stdin = open(os.devnull)
sys.stdout.reconfigure(encoding="utf-8", errors="replace", line_buffering=False)
sys.stderr.reconfigure(encoding="utf-8", errors="replace")
limit(resource.RLIMIT_AS, mem)
del resource, limit, cpu, mem, fsize, nproc
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
exec(compile(code, "<python>", "exec"), namespace)
"""


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be set up on this machine; the message is one sentence saying why."""


def _interpreter() -> str:
    """The server's base interpreter (not its virtualenv, whose site-packages hold the server)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _filesystem(file_bytes: int) -> list[str]:
    """bwrap's mount arguments: the read-only system and interpreter, /proc, /dev, the private dir."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    bound = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
    for prefix in sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}):
        if not any(under(prefix, root) for root in bound):
            args += ["--ro-bind", prefix, prefix]
            bound.append(prefix)
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    for site in sorted(
        {os.path.realpath(sysconfig.get_path(kind, vars=base)) for kind in ("purelib", "platlib")}
    ):
        if os.path.isdir(site) and any(under(site, root) for root in bound):
            args += ["--tmpfs", site, "--remount-ro", site]  # hidden: the server may be installed there
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    args += ["--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]  # multiprocessing's semaphores
    args += ["--size", str(file_bytes), "--tmpfs", SANDBOX_DIR, "--chdir", SANDBOX_DIR]
    args += ["--remount-ro", "/"]  # bwrap's root tmpfs: read-only once the mount points are made
    return args


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How to start one call in the sandbox on this machine (what :func:`setup_sandbox` found working)."""

    bwrap: str
    interpreter: str
    mounts: tuple[str, ...]
    cgroups: CgroupParent | None
    limits: PythonLimits
    #: The call slots of each event loop serving (one in a server): ``limits.concurrent_calls`` each. One
    #: sandbox per limits, so one set of slots bounds the memory of every call of the server together.
    _slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = field(
        init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_slots", weakref.WeakKeyDictionary())

    @property
    def slots(self) -> asyncio.Semaphore:
        """The running loop's call slots: hold one while a call runs."""
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:
            slots = self._slots[loop] = asyncio.Semaphore(self.limits.concurrent_calls)
        return slots

    def bwrap_argv(self, mode: str = "run") -> list[str]:
        """``bwrap ... python -I -c BOOTSTRAP limits mode``: the call, its code read from stdin."""
        limits = self.limits
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": SANDBOX_DIR,
            "TMPDIR": SANDBOX_DIR,
            "LANG": "C.UTF-8",
        }
        return [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid",
            SANDBOX_ID,
            "--gid",
            SANDBOX_ID,
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            *[arg for name, value in env.items() for arg in ("--setenv", name, value)],
            *self.mounts,
            "--",
            self.interpreter,
            "-I",
            "-c",
            BOOTSTRAP,
            str(limits.cpu_seconds),
            str(limits.memory_bytes),
            str(limits.file_bytes),
            str(limits.processes),
            mode,
        ]

    def command(self, cgroup: CallCgroup | None, mode: str = "run") -> list[str]:
        """The command of one call: joining ``cgroup`` first when there is one."""
        argv = self.bwrap_argv(mode)
        if cgroup is None:
            return argv
        files = cgroup.procs_files
        return ["/bin/sh", "-c", _JOIN_CGROUP, "sh", str(len(files)), *files, *argv]

    def new_cgroup(self) -> CallCgroup | None:
        """A cgroup for one call (its memory and process budgets written), when the server has them."""
        if self.cgroups is None:
            return None
        return self.cgroups.create(self.limits.memory_bytes, self.limits.processes)

    @property
    def env(self) -> dict[str, str]:
        """The environment bwrap itself starts with (none of the server's)."""
        return dict(_BWRAP_ENV)

    def describe(self) -> str:
        """One sentence for the start-up log: what bounds a call here."""
        limits = self.limits
        if self.cgroups is not None:
            return (
                f"bubblewrap sandbox; each call bounded by a cgroup v{self.cgroups.version} to "
                f"{limits.memory_bytes >> 20} MiB in total and {limits.processes} processes"
            )
        return (
            f"bubblewrap sandbox; no cgroup here, so each call is bounded by rlimits: {limits.processes} "
            f"processes, {limits.memory_bytes >> 20} MiB of address space each"
        )


@functools.lru_cache(maxsize=8)
def _setup(limits: PythonLimits) -> Sandbox | str:
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces, and this is {sys.platform}"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return (
            "bubblewrap is not installed (no `bwrap` on PATH): install it, e.g. `apt-get install bubblewrap`"
        )
    try:
        cgroups = CgroupParent.find()
        if cgroups is not None:
            cgroups.sweep()
    except OSError:
        cgroups = None
    sandbox = Sandbox(bwrap, _interpreter(), tuple(_filesystem(limits.file_bytes)), cgroups, limits)
    cgroup = None
    try:
        cgroup = sandbox.new_cgroup()
        result = subprocess.run(
            sandbox.command(cgroup, "probe"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=sandbox.env,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the sandbox could not be started: {exc}"
    finally:
        if cgroup is not None:
            cgroup.remove()
    lines = (result.stderr or result.stdout).decode(errors="replace").strip().splitlines()
    if result.returncode != 0:
        return f"bubblewrap cannot create the sandbox here ({lines[-1] if lines else f'exit {result.returncode}'})"
    try:
        probe = orjson.loads(result.stdout)
    except orjson.JSONDecodeError:
        return f"the sandbox's probe printed {result.stdout[:200]!r}"
    if str(probe.get("uid")) != SANDBOX_ID:
        return f"the sandbox's code ran as uid {probe.get('uid')}, not {SANDBOX_ID}"
    if cgroups is None and not probe.get("nproc_enforced"):
        return (
            "no cgroup with memory and pids control is writable by the server, and the kernel does not apply "
            "RLIMIT_NPROC to the server's user (root), so a call's processes could not be bounded: run the "
            "server as an unprivileged user, or in a cgroup v2 with memory and pids delegated to it"
        )
    return sandbox


def setup_sandbox(limits: PythonLimits) -> Sandbox:
    """The sandbox for ``limits``, checked once with a probe call; raises :class:`SandboxUnavailable`."""
    found = _setup(limits)
    if isinstance(found, str):
        raise SandboxUnavailable(found)
    return found
