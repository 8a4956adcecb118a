"""ToolSettings: the operator's limits on server-run tools (CLI flags; safe defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_TOOL_OUTPUT_MAX_BYTES",
    "DEFAULT_TOOL_TIMEOUT",
    "PythonLimits",
    "ToolSettings",
    "url_allowed",
]

_DEFAULT_PORTS = {"http": 80, "https": 443}

#: Seconds one server-run tool call may take unless ``--tool_timeout`` says otherwise.
DEFAULT_TOOL_TIMEOUT = 60.0
#: Longest tool output the model reads unless ``--tool_output_max_bytes`` says otherwise.
DEFAULT_TOOL_OUTPUT_MAX_BYTES = 64 << 10


@dataclass(frozen=True, slots=True)
class PythonLimits:
    """What one local python call may use (``--python_tool local``)."""

    timeout: float = 30.0  # wall-clock seconds
    cpu_seconds: int = 10  # RLIMIT_CPU, per process
    memory_bytes: int = 1 << 30  # the call's cgroup (all its processes) and RLIMIT_AS (each process)
    file_bytes: int = 64 << 20  # the private tmpfs's size, and RLIMIT_FSIZE
    processes: int = 64  # the call's cgroup pids.max and RLIMIT_NPROC (the sandbox's own user namespace)
    #: Calls running at once in this process (more wait for a slot, within the tool loop's timeout): the
    #: memory of every call together is at most this x ``memory_bytes`` (``--python_concurrent_calls``).
    concurrent_calls: int = 2
    #: stdout+stderr the model reads (``serve`` passes ``--tool_output_max_bytes``)
    output_bytes: int = DEFAULT_TOOL_OUTPUT_MAX_BYTES


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """Limits and allow-lists for the tools the server runs.

    ``mcp_allowed_urls``: URL prefixes a client's ``server_url`` may point under
    (none by default: a client cannot make the server connect anywhere).
    ``tool_servers``: operator-configured MCP servers, ``(label, url)`` pairs.
    ``tool_timeout``: seconds one tool call, or one MCP tool listing, may take.
    ``tool_output_max_bytes``: longest tool output the model reads (longer is cut, with a note).
    """

    mcp_allowed_urls: tuple[str, ...] = ()
    tool_servers: tuple[tuple[str, str], ...] = ()
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    tool_output_max_bytes: int = DEFAULT_TOOL_OUTPUT_MAX_BYTES
    # gpt-oss's built-in tools (tools/builtin.py): "off", "local" or "mcp:URL"; "off" or a backend.
    python_tool: str = "off"
    python_limits: PythonLimits = PythonLimits()
    browser_backend: str = "off"
    #: The search backend of ``web_search`` tools with ``external_web_access: false``: "off" (such searches are
    #: refused) or "searxng:URL", an index the operator vouches is offline or cached (tools/browser/provider.py).
    browser_offline_backend: str = "off"
    #: Hosts or CIDRs the browser may fetch although they are not globally reachable (tools/addresses.py).
    fetch_allow_private: tuple[str, ...] = ()

    def tool_server(self, label: str) -> str | None:
        """The operator's URL for ``label``, if it configured one."""
        return next((url for name, url in self.tool_servers if name == label), None)


def _origin(url: str) -> tuple[str, str, int, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    if parts.username is not None or parts.password is not None:
        return None
    return scheme, parts.hostname.lower(), port, parts.path


def url_allowed(url: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``url`` lies under one of ``prefixes``: same scheme, host and port, and a path under the prefix's.

    Compared parsed, not as strings, so ``http://127.0.0.1:80801`` or
    ``http://allowed@evil`` never pass for ``http://127.0.0.1:8080``; paths with
    ``..`` segments are refused outright.
    """
    target = _origin(url)
    if target is None:
        return False
    path = target[3]
    if any(segment in ("..", ".") for segment in path.split("/")) or "%2e" in path.lower():
        return False
    for prefix in prefixes:
        allowed = _origin(prefix)
        if allowed is None or allowed[:3] != target[:3]:
            continue
        base = allowed[3].rstrip("/")
        if not base or path == base or path.startswith(base + "/"):
            return True
    return False
