"""The ``mcp`` SDK, 1.x or 2.x, behind one small interface: the only module that imports it.

Both majors are served because TensorRT-LLM's container decides which one is installed: from 1.3.0rc22
TensorRT-LLM pins ``mcp<2.0.0,>=1.23.0`` (the PyPI sdists' PKG-INFO, constraints/), while a venv of
our own takes the newest, 2.x. The two differ in everything a client touches:

============================ =================================== ======================================
what                         mcp 1.23 - 1.x                      mcp 2.x
============================ =================================== ======================================
the session                  ``ClientSession(read, write)`` +    ``Client(transport, mode="legacy")``
                             ``initialize()``
streamable HTTP transport    ``streamablehttp_client(url, …,     ``streamable_http_client(url,
                             httpx_client_factory=…)``           http_client=…)``
HTTP library                 httpx                               httpx2
a JSON-RPC error             ``McpError`` (``.error.message``)   ``MCPError`` (``.message``)
field names                  ``inputSchema``, ``nextCursor``,    ``input_schema``, ``next_cursor``,
                             ``isError``                         ``is_error``
============================ =================================== ======================================

:func:`open_session` yields a :class:`Session` whose answers are this module's plain dataclasses, so
nothing above it reads an SDK type. SSE (``sse_client``) is the same call in both.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

__all__ = [
    "MCP_MAJOR",
    "MCP_VERSION",
    "CallResult",
    "ListedTool",
    "Session",
    "ToolPage",
    "http",
    "open_session",
    "protocol_error_code",
    "protocol_error_message",
]

#: The installed SDK's version, and its major (1 or 2).
MCP_VERSION = importlib.metadata.version("mcp")
MCP_MAJOR = int(MCP_VERSION.split(".")[0])

#: The HTTP library the installed SDK speaks (its transports take and raise its types): httpx2 for mcp 2.x,
#: httpx for 1.x.
http: Any = importlib.import_module("httpx2" if MCP_MAJOR >= 2 else "httpx")


@functools.cache
def _sdk(module: str) -> Any:
    """The SDK's ``module``, imported at its first use: the SDK and its models (2.x's ``mcp_types``) are a
    quarter of the server's import, which every ``serve`` process and CLI run would pay for MCP tools that
    most never call (``mcp.client.sse``, ``mcp.client.streamable_http``, ``mcp.shared.exceptions``; 1.x's
    ``mcp.types``: its request models, which 2.x moved to ``mcp_types``, never needed here)."""
    return importlib.import_module(module)


def _protocol_error() -> type[BaseException]:
    """The SDK's JSON-RPC error (a server's error answer): 2.x's ``MCPError``, 1.x's ``McpError``."""
    exceptions = _sdk("mcp.shared.exceptions")
    return getattr(exceptions, "MCPError", None) or exceptions.McpError  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ListedTool:
    """One tool a server lists: ``annotations`` as the MCP wire names them (``readOnlyHint``)."""

    name: str
    description: str | None
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None


@dataclass(frozen=True)
class ToolPage:
    """One page of ``tools/list``."""

    tools: list[ListedTool]
    next_cursor: str | None


@dataclass(frozen=True)
class CallResult:
    """A ``tools/call`` answer: its content blocks (SDK models: ``.type``, ``.text``, ``model_dump``) and
    whether the tool failed."""

    content: Sequence[Any]
    is_error: bool


def _field(model: Any, snake: str, camel: str) -> Any:
    return getattr(model, snake) if hasattr(model, snake) else getattr(model, camel, None)


class Session:
    """An open MCP client session, whichever SDK major made it.

    ``meta`` (of :meth:`list_tools`, :meth:`call_tool`) is the request's ``params._meta``: the W3C trace
    context of its span (``tools/spans.py``). Both majors take it per request: 1.x ``call_tool(meta=)`` and
    ``list_tools(params=PaginatedRequestParams(_meta=))``, 2.x ``call_tool(meta=)``, ``list_tools(meta=)``
    (which also injects the current context itself, ``mcp/shared/jsonrpc_dispatcher.py``
    ``send_raw_request``: the same span, as the caller's context is current where the request runs).
    """

    def __init__(self, client: Any, protocol_version: str | None = None) -> None:
        self._client = client
        self._protocol_version = protocol_version

    @property
    def protocol_version(self) -> str | None:
        """The MCP protocol version initialize agreed on."""
        if MCP_MAJOR >= 2:
            return str(self._client.protocol_version)
        return self._protocol_version

    async def list_tools(self, cursor: str | None, meta: dict[str, str] | None = None) -> ToolPage:
        """One page of the server's tools, from ``cursor`` (None: the first)."""
        if meta is None:
            page = await self._client.list_tools(cursor=cursor)
        elif MCP_MAJOR >= 2:
            page = await self._client.list_tools(cursor=cursor, meta=meta)
        else:
            params = _sdk("mcp.types").PaginatedRequestParams(cursor=cursor, _meta=meta)
            page = await self._client.list_tools(params=params)
        tools = []
        for tool in page.tools:
            annotations = (
                tool.annotations.model_dump(exclude_none=True, by_alias=True) if tool.annotations else None
            )
            tools.append(
                ListedTool(
                    tool.name, tool.description, _field(tool, "input_schema", "inputSchema"), annotations
                )
            )
        return ToolPage(tools, _field(page, "next_cursor", "nextCursor"))

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, str] | None = None
    ) -> CallResult:
        """Call tool ``name``; a JSON-RPC error answer raises (see :func:`protocol_error_message`)."""
        if meta is None:
            result = await self._client.call_tool(name, arguments)
        else:
            result = await self._client.call_tool(name, arguments, meta=meta)
        return CallResult(result.content, bool(_field(result, "is_error", "isError")))


@asynccontextmanager
async def open_session(
    url: str,
    *,
    headers: dict[str, str],
    timeout: float,
    sse: bool,
    client_factory: Callable[..., Any],
) -> AsyncIterator[Session]:
    """An initialized session with the server at ``url`` (SSE when ``sse``, else streamable HTTP).

    ``client_factory(headers=, timeout=, auth=)`` makes the session's HTTP client (of :data:`http`'s
    library): every request the SDK sends goes through it.
    """
    if sse:
        transport = _sdk("mcp.client.sse").sse_client(
            url,
            headers=headers,
            timeout=timeout,
            sse_read_timeout=timeout,
            httpx_client_factory=client_factory,
        )
        async with _connected(transport, timeout) as session:
            yield session
        return
    if MCP_MAJOR >= 2:
        client = client_factory(headers=headers, timeout=http.Timeout(timeout))
        async with client:
            async with _connected(
                _sdk("mcp.client.streamable_http").streamable_http_client(url, http_client=client), timeout
            ) as session:
                yield session
        return
    transport = _sdk("mcp.client.streamable_http").streamablehttp_client(
        url, headers=headers, timeout=timeout, sse_read_timeout=timeout, httpx_client_factory=client_factory
    )
    async with _connected(transport, timeout) as session:
        yield session


@asynccontextmanager
async def _connected(transport: Any, timeout: float) -> AsyncIterator[Session]:
    if MCP_MAJOR >= 2:
        client_class = _sdk("mcp.client").Client
        async with client_class(transport, mode="legacy", cache=None, read_timeout_seconds=timeout) as client:
            yield Session(client)
        return
    client_session = _sdk("mcp").ClientSession
    async with transport as streams:
        async with client_session(
            streams[0], streams[1], read_timeout_seconds=timedelta(seconds=timeout)
        ) as client:
            initialized = await client.initialize()
            yield Session(client, initialized.protocolVersion)


def _protocol_error_field(exc: BaseException, name: str) -> Any:
    """``name`` (``code``, ``message``) of the SDK's JSON-RPC error: 2.x's property, 1.x's ``.error``."""
    value = getattr(exc, name, None)
    return value if value is not None else getattr(getattr(exc, "error", None), name, None)


def protocol_error_code(exc: BaseException) -> int | None:
    """The JSON-RPC error code of the SDK's error (a server's error answer), None for any other exception."""
    if not isinstance(exc, _protocol_error()):
        return None
    code = _protocol_error_field(exc, "code")
    return code if isinstance(code, int) else None


def protocol_error_message(exc: BaseException) -> str | None:
    """The message of the SDK's JSON-RPC error (a server's error answer), None for any other exception."""
    if not isinstance(exc, _protocol_error()):
        return None
    message = _protocol_error_field(exc, "message")
    return str(message if message is not None else exc)
