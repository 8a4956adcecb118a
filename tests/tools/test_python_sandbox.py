"""Model-written code tries to escape ``--python_tool local``'s sandbox, and must not.

Each escape of issue 19 is a test: a real ``serve`` subprocess (the echo executor: ``call python CODE``
runs CODE) with an API key on its command line, a secret in its environment and an encryption key file,
beside a Redis server on a Unix socket; the code runs through the openai client as a model's call would,
and the test checks both what the code printed and the host afterwards. Skipped only where the sandbox
cannot be set up (``make test`` installs bubblewrap).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from support.process_harness import ServeProcess, wait_gone
from support.redis_harness import redis_binary

import trtllm_responses
from trtllm_responses.tools.sandbox import SandboxUnavailable, setup_sandbox
from trtllm_responses.tools.settings import PythonLimits

API_KEY = "sk-sandbox-test-api-key-3f9c"
ENV_SECRET = "env-secret-value-7d21"
ENCRYPTION_KEY = "c2FuZGJveC10ZXN0LWVuY3J5cHRpb24ta2V5LTAwMDA="  # 32 bytes, base64
PYTHON_TIMEOUT = 8.0
MEMORY_MB = 384
CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(scope="module", autouse=True)
def sandbox_here() -> None:
    try:
        setup_sandbox(PythonLimits())
    except SandboxUnavailable as exc:
        pytest.skip(f"the python sandbox cannot be set up here: {exc}")


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("server-secrets")
    (directory / "encryption.key").write_text(ENCRYPTION_KEY)
    (directory / "encryption.key").chmod(0o600)
    return directory


@pytest.fixture(scope="module")
def server(secrets_dir: Path) -> Iterator[ServeProcess]:
    flags = (
        "--python_tool", "local", "--python_timeout", str(PYTHON_TIMEOUT), "--python_memory_mb", str(MEMORY_MB),
        "--tool_timeout", "60", "--api_key", API_KEY,
        "--encryption_key_file", str(secrets_dir / "encryption.key"),
    )  # fmt: skip
    process = ServeProcess(*flags, env={"TRTLLM_TEST_ENV_SECRET": ENV_SECRET}).start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def client(server: ServeProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key=API_KEY, max_retries=0, timeout=120) as c:
        yield c


def run(client: openai.OpenAI, code: str) -> tuple[str, str]:
    """Run ``code`` as the model's python call; (what it printed, the call's status)."""
    response = client.responses.create(
        model="gpt-oss",
        input="call python " + textwrap.dedent(code).strip(),
        tools=[CODE_TOOL],  # type: ignore[list-item]
        include=["code_interpreter_call.outputs"],
    )
    assert response.status == "completed"
    call = response.output[1]
    assert call.type == "code_interpreter_call"
    logs = "".join(o.logs for o in call.outputs or [] if o.type == "logs")
    return logs, str(call.status)


def test_the_server_environment_and_command_line_stay_unread(
    client: openai.OpenAI, server: ServeProcess
) -> None:
    assert server.process is not None
    code = f"""
    import os
    seen = []
    for pid in sorted({{os.getppid(), {server.process.pid}, 1, 2}} | {{int(p) for p in os.listdir('/proc') if p.isdigit()}}):
        for name in ('environ', 'cmdline'):
            try:
                seen.append(open(f'/proc/{{pid}}/{{name}}', 'rb').read().decode(errors='replace'))
            except OSError as exc:
                seen.append(f'{{pid}}/{{name}}: {{exc.strerror}}')
    seen.append(repr(dict(os.environ)))
    print('\\n'.join(seen))
    """
    logs, _ = run(client, code)
    assert "environ" in logs or "cmdline" in logs or "PATH" in logs, logs  # the code ran and printed
    assert API_KEY not in logs and ENV_SECRET not in logs
    assert "trtllm_responses" not in logs, "no server process is visible"


def test_the_encryption_key_and_server_files_stay_unread(
    client: openai.OpenAI, secrets_dir: Path, server: ServeProcess
) -> None:
    package = Path(trtllm_responses.__file__).parent
    paths = [
        secrets_dir / "encryption.key",
        package / "__init__.py",
        Path.home() / ".cache",
        Path("/etc/passwd"),
    ]
    code = f"""
    import os, sys
    for path in {[str(p) for p in paths]!r}:
        try:
            print(path, '<<READ>>', open(path).read()[:100] if os.path.isfile(path) else os.listdir(path))
        except OSError as exc:
            print(path, exc.strerror)
    found = []
    for root, dirs, files in os.walk('/'):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ('/proc', '/usr', '/dev', sys.prefix)]
        found += [os.path.join(root, f) for f in files]
    print('files outside /usr, /proc, /dev and the interpreter:', found)
    """
    logs, _ = run(client, code)
    assert "<<READ>>" not in logs and ENCRYPTION_KEY not in logs, logs
    assert logs.endswith("files outside /usr, /proc, /dev and the interpreter: []\n"), logs


def test_a_redis_unix_socket_is_out_of_reach(client: openai.OpenAI, tmp_path: Path) -> None:
    binary = redis_binary()
    if binary is None:
        pytest.fail("redis-server is not installed: run `make test` (it installs it)")
    sock = tmp_path / "redis.sock"
    redis = subprocess.Popen(
        [
            binary,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "777",
            "--save",
            "",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        import socket

        with socket.socket(socket.AF_UNIX) as s:  # the socket works for whoever can reach it
            s.connect(str(sock))
            s.sendall(b"PING\r\n")
            assert s.recv(16).startswith(b"+PONG")
        code = f"""
        import socket
        for path in ({str(sock)!r}, '/tmp/redis.sock', '/run/redis/redis-server.sock', '/var/run/redis/redis.sock'):
            try:
                s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(path); s.sendall(b'PING\\r\\n')
                print(path, 'REPLIED', s.recv(16))
            except OSError as exc:
                print(path, exc.strerror)
        try:
            s = socket.socket(socket.AF_UNIX); s.connect('\\0' + {str(sock)!r}); print('abstract CONNECTED')
        except OSError as exc:
            print('abstract', exc.strerror)
        """
        logs, _ = run(client, code)
    finally:
        redis.kill()
        redis.wait()
    assert str(sock) in logs and "REPLIED" not in logs and "PONG" not in logs and "CONNECTED" not in logs, (
        logs
    )


def test_pidfd_getfd_cannot_take_the_listening_socket(client: openai.OpenAI, server: ServeProcess) -> None:
    assert server.process is not None
    code = f"""
    import ctypes, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in ({server.process.pid}, os.getppid(), 1):
        pidfd = libc.syscall(434, pid, 0)  # pidfd_open
        if pidfd < 0:
            print(pid, 'pidfd_open', os.strerror(ctypes.get_errno()))
            continue
        for fd in range(64):
            got = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
            if got >= 0:
                try:
                    s = socket.socket(fileno=got)
                    if s.family in (socket.AF_INET, socket.AF_INET6):
                        print(pid, fd, 'INET SOCKET', s.getsockname())
                except OSError:
                    pass
    print('done')
    """
    logs, _ = run(client, code)
    # The sandbox's own pid 1 (bwrap's init) holds only the call's pipes; the server is not there to name.
    assert f"{server.process.pid} pidfd_open No such process" in logs, logs
    assert "done" in logs and "INET SOCKET" not in logs and str(server.port) not in logs, logs


def test_the_server_cannot_be_stopped(client: openai.OpenAI, server: ServeProcess) -> None:
    assert server.process is not None
    pid = server.process.pid
    code = f"""
    import os, signal
    for target in ({pid}, os.getppid(), -1):
        try:
            os.kill(target, signal.SIGSTOP); print(target, 'signalled')
        except OSError as exc:
            print(target, exc.strerror)
    """
    run(client, code)
    state = next(
        line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State")
    )
    if "T" in state.split()[1]:
        os.kill(pid, signal.SIGCONT)
        pytest.fail("the server was stopped")
    assert client.with_options(timeout=10).models.list().data, "and it answers"


def test_a_new_session_does_not_outlive_the_timeout(client: openai.OpenAI) -> None:
    marker = "31.4159265"
    code = f"""
    import os
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv('/usr/bin/sleep', ['sleep', '{marker}'])
        os._exit(0)
    print('parent leaves')
    """
    start = time.monotonic()
    logs, _ = run(client, code)
    assert "parent leaves" in logs
    assert time.monotonic() - start < PYTHON_TIMEOUT + 30
    assert not wait_gone(marker), "the sleeper was killed with its sandbox"


def test_a_detached_daemon_dies_with_the_call(client: openai.OpenAI) -> None:
    marker = "27.1828182"
    code = f"""
    import os, sys
    if os.fork() == 0:
        os.setsid()
        devnull = os.open('/dev/null', os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execv('/usr/bin/sleep', ['sleep', '{marker}'])
    print('parent done')
    """
    logs, status = run(client, code)
    assert "parent done" in logs and status == "completed"
    assert not wait_gone(marker)


def test_a_fork_bomb_is_bounded(client: openai.OpenAI) -> None:
    marker = "16.180339"
    code = f"""
    import os
    started = 0
    try:
        for _ in range(300):
            if os.fork() == 0:
                os.execv('/usr/bin/sleep', ['sleep', '{marker}'])
            started += 1
    except OSError as exc:
        print('refused:', exc.strerror)
    print('started', started)
    """
    logs, _ = run(client, code)
    started = int(logs.split("started")[1].split()[0])
    assert "refused" in logs and started < PythonLimits().processes, logs
    assert not wait_gone(marker), "every process of the call is gone"


def test_memory_is_bounded_across_children(client: openai.OpenAI) -> None:
    sandbox = setup_sandbox(PythonLimits(memory_bytes=MEMORY_MB << 20))
    if sandbox.cgroups is None:
        pytest.skip(
            "no cgroup here: total memory is bounded by processes x RLIMIT_AS only (docs/server-run-tools.md#gpt-osss-own-tools-python-code_interpreter-and-browser-web_search)"
        )
    # Three children of 200 MB each (each under RLIMIT_AS), 600 MB in all against a 384 MiB budget.
    code = """
    import os, time
    pids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            block = b'x' * (200 << 20)
            time.sleep(1)
            os._exit(0)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    print('exit codes', codes)
    """
    logs, _ = run(client, code)
    assert "exit codes" in logs, logs
    codes = json.loads(logs.split("exit codes")[1].strip())
    assert -signal.SIGKILL in codes, f"one child went over the call's memory budget: {logs}"


def test_nothing_is_written_outside_its_directory(client: openai.OpenAI) -> None:
    package = Path(trtllm_responses.__file__).parent
    before = (package / "__init__.py").read_bytes()
    marker = "escape-marker-5e7a"
    targets = ["/", "/tmp", "/usr", "/usr/lib", "/root", "/dev", "/proc", str(package), os.getcwd()]
    code = f"""
    import os
    for directory in {targets!r}:
        try:
            with open(os.path.join(directory, {marker!r}), 'w') as f:
                f.write('x')
            print(directory, 'WROTE')
        except OSError as exc:
            print(directory, exc.strerror)
    try:
        with open({str(package / "__init__.py")!r}, 'a') as f:
            f.write('# changed')
        print('CHANGED the server code')
    except OSError as exc:
        print('server code', exc.strerror)
    try:
        with open('big', 'wb') as f:
            for _ in range(180):
                f.write(b'x' * (1 << 20))
        print('WROTE 180 MiB')
    except OSError as exc:
        print('big file', exc.strerror, os.path.getsize('big') >> 20, 'MiB')
    """
    logs, _ = run(client, code)
    assert "WROTE" not in logs and "CHANGED" not in logs, logs
    assert "big file" in logs
    assert (package / "__init__.py").read_bytes() == before
    for directory in targets:
        assert not (Path(directory) / marker).exists()


def test_python_and_tool_timeouts_both_kill_and_clean(secrets_dir: Path) -> None:
    """--tool_timeout before --python_timeout: the call's sandbox is killed and its cgroup removed."""
    process = ServeProcess("--python_tool", "local", "--python_timeout", "60", "--tool_timeout", "2").start()
    marker = "14.142135"
    try:
        assert process.process is not None
        with openai.OpenAI(base_url=process.base_url + "/v1", api_key="unused", max_retries=0) as c:
            code = f"import os\nos.execv('/usr/bin/sleep', ['sleep', '{marker}'])"
            response = c.responses.create(model="gpt-oss", input="call python " + code, tools=[CODE_TOOL])  # type: ignore[list-item]
        assert response.output[1].type == "code_interpreter_call" and response.output[1].status == "failed"
        assert "timed out after 2 s" in response.output_text
        assert not wait_gone(marker)
        parent = setup_sandbox(PythonLimits()).cgroups  # the server's cgroups are the test's (inherited)
        roots = {parent.memory, parent.pids} if parent is not None else set()
        leftovers = [p for root in roots for p in root.glob(f"trtllm-python-{process.process.pid}-*")]
        assert not leftovers
    finally:
        process.kill()


def test_concurrent_calls_share_one_memory_budget(client: openai.OpenAI) -> None:
    # Before: memory was bounded per call only (3 concurrent calls held +2.3 GB). At most
    # concurrent_calls run at once (the others wait for a slot), so all together hold at most
    # concurrent_calls x the per-call budget.
    slots = PythonLimits().concurrent_calls
    code = """
    import time
    began = time.time()
    time.sleep(1.5)
    print('ran', began, time.time())
    """
    with concurrent.futures.ThreadPoolExecutor(slots + 2) as pool:
        results = list(pool.map(lambda _: run(client, code), range(slots + 2)))
    spans = []
    for logs, status in results:
        assert status == "completed" and "ran" in logs, logs
        began, ended = (float(x) for x in logs.split("ran")[1].split())
        spans.append((began, ended))
    most = max(sum(1 for b, e in spans if b <= at < e) for at, _ in spans)
    assert most == slots, spans  # never more at once; and as many as allowed
