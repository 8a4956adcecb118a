"""Remote MCP servers as server-run tools, through the official ``mcp`` SDK.

:class:`MCPProvider` is one MCP server of one response: it lists the server's
tools and runs calls (``mcp_request.py`` builds providers from a request). The
listing has its own MCP session (streamable HTTP, or SSE when the URL's path
ends in ``/sse``), made while the request is prepared; the calls
of one response share one session, opened at the first call and closed when the
response ends. Every session lives in a task of its own (``mcp_session.SessionHost``):
whatever its transport does (a result of any size, a broken connection) can only
fail the request waiting on it, which becomes a failed item, never the response.
A timed-out or failed call drops the session.

Headers a client sends (``Authorization``…) go to its MCP server and nowhere
else: they are kept only on the provider of this response, never in the
response, the store or a log line. Every HTTP request a session makes (redirects
the SDK follows, an SSE server's message endpoint) is checked against the
provider's allowed prefixes before it is sent: a server cannot send the session
anywhere the operator did not allow.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import urlsplit

import orjson
from openai.types.responses.response_output_item import McpListToolsTool

from ..core import InvalidRequestError
from ..harmony import ItemKind
from .base import ToolNamespace, ToolOutcome, ToolProvider, truncate_output
from .mcp_sdk import Session, http, open_session, protocol_error_message
from .mcp_session import SessionFailed, SessionHost
from .settings import ToolSettings, url_allowed

__all__ = [
    "INVALID_PARAMS",
    "ApprovalRule",
    "MCPProvider",
    "describe_exception",
    "protocol_error",
    "tool_names",
]

logger = logging.getLogger(__name__)

# JSON-RPC / MCP error codes used in mcp_protocol_error items.
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_TIMEOUT = -32001
CONNECTION_ERROR = -32000


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every MCP connection (building one costs milliseconds; it never changes)."""
    return http.create_ssl_context()


class URLNotAllowed(Exception):
    """A request of an MCP session went outside the allowed prefixes (a redirect, an SSE endpoint)."""


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: Any = None,
    auth: Any = None,
    *,
    allowed: tuple[str, ...] = (),
) -> Any:
    """An HTTP client for one MCP session (httpx2 under mcp 2.x, httpx under 1.x: ``mcp_sdk.http``): no
    redirects (mcp 2.x follows same-origin ones itself; under 1.x none is followed), the shared TLS context, no proxy settings read from the environment, and every request
    checked against the ``allowed`` URL prefixes before it is sent."""

    async def check(request: Any) -> None:
        url = str(request.url)
        if not url_allowed(url, allowed):
            raise URLNotAllowed(f"the MCP server sent the session to {url[:200]}, outside the allowed URLs")

    return http.AsyncClient(
        headers=headers,
        timeout=timeout or http.Timeout(30.0),
        auth=auth,
        verify=_ssl_context(),
        trust_env=False,
        event_hooks={"request": [check]},
    )


def protocol_error(message: str, code: int) -> ToolOutcome:
    """The outcome of a call the MCP protocol refused: an ``mcp_call`` item's ``mcp_protocol_error``."""
    return ToolOutcome(
        {"output": None, "error": {"type": "mcp_protocol_error", "code": code, "message": message}},
        failed=True,
    )


def describe_exception(exc: BaseException) -> tuple[str, int | None]:
    """A short message for a failed MCP exchange (the innermost cause), and its HTTP status if any."""
    while True:
        if isinstance(exc, SessionFailed) and exc.__cause__ is not None:
            exc = exc.__cause__
        elif isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
            exc = exc.exceptions[0]  # type: ignore[attr-defined]
        else:
            break
    if isinstance(exc, SessionFailed):
        return "the connection to the MCP server failed", None
    if isinstance(exc, http.HTTPStatusError):
        return f"the MCP server answered HTTP {exc.response.status_code}", exc.response.status_code
    if isinstance(exc, http.ConnectError):
        return "could not connect to the MCP server", None
    if isinstance(exc, http.TimeoutException):
        return "the MCP server did not answer in time", None
    protocol = protocol_error_message(exc)
    if protocol is not None:
        return f"the MCP server returned an error: {protocol}", None
    if isinstance(exc, URLNotAllowed):
        return str(exc), None
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, None


class ApprovalRule:
    """``require_approval``: "always" (the default, as OpenAI's), "never", or {"always"/"never": {"tool_names"}}."""

    def __init__(self, value: Any, where: str) -> None:
        self.default = True
        self.never: frozenset[str] = frozenset()
        self.always: frozenset[str] = frozenset()
        if value is None or value == "always":
            return
        if value == "never":
            self.default = False
            return
        if not isinstance(value, Mapping):
            raise InvalidRequestError(
                f"'{where}' must be 'always', 'never' or an object with 'always'/'never' tool lists.",
                param=where,
            )
        for key in ("always", "never"):
            names = tool_names(value.get(key), f"{where}.{key}")
            setattr(self, key, names)

    def __call__(self, name: str) -> bool:
        if name in self.never:
            return False
        return name in self.always or self.default


def tool_names(value: Any, where: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, Mapping):
        value = value.get("tool_names") or []
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise InvalidRequestError(f"'{where}' must list tool names.", param=where)
    return frozenset(value)


class MCPProvider(ToolProvider):
    """One MCP server of one response: its listed tools, and calls to them."""

    item_kind = ItemKind.MCP_CALL

    def __init__(
        self,
        label: str,
        url: str,
        *,
        headers: Mapping[str, str],
        settings: ToolSettings,
        description: str | None = None,
        allowed: frozenset[str] | None = None,
        read_only: bool = False,
        approval: ApprovalRule | None = None,
        allowed_urls: tuple[str, ...] | None = None,
    ) -> None:
        self.namespace = label
        self._url = url
        #: URL prefixes every request of its sessions must stay under (default: the URL's origin, for
        #: servers the operator configured; a client's URL gets the operator's --mcp_allowed_urls).
        if allowed_urls is None:
            parts = urlsplit(url)
            allowed_urls = (f"{parts.scheme}://{parts.netloc}",)
        self._allowed_urls = allowed_urls
        self._headers = dict(headers)
        self._settings = settings
        self._description = description
        self._allowed = allowed
        self._read_only = read_only
        self._approval = approval or ApprovalRule("never", "")
        self.tools: list[McpListToolsTool] | None = None
        self._session: SessionHost | None = None

    def __repr__(self) -> str:  # never the headers
        return f"MCPProvider({self.namespace!r}, {self._url!r})"

    # -- sessions ----------------------------------------------------------------------------

    def _client(self) -> AbstractAsyncContextManager[Session]:
        return open_session(
            self._url,
            headers=self._headers,
            timeout=self._settings.tool_timeout,
            sse=self._url.rstrip("/").endswith("/sse"),
            client_factory=functools.partial(_http_client, allowed=self._allowed_urls),
        )

    # -- listing -----------------------------------------------------------------------------

    async def list_tools(self) -> list[McpListToolsTool]:
        """List the server's tools (every page), filtered by ``allowed_tools``; sets ``self.tools``."""
        host = SessionHost(self._client)
        await host.start()
        try:
            tools = await host.run(self._list_all)
        finally:
            await host.aclose()
        self.tools = self.filter(tools)
        return self.tools

    @staticmethod
    async def _list_all(session: Session) -> list[McpListToolsTool]:
        tools: list[McpListToolsTool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(cursor)
            tools.extend(
                McpListToolsTool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    annotations=tool.annotations,
                )
                for tool in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def filter(self, tools: Sequence[McpListToolsTool]) -> list[McpListToolsTool]:
        """The tools ``allowed_tools`` lets the model see."""
        out = []
        for tool in tools:
            if self._allowed is not None and tool.name not in self._allowed:
                continue
            if self._read_only and not (
                isinstance(tool.annotations, Mapping) and tool.annotations.get("readOnlyHint")
            ):
                continue
            out.append(tool)
        return out

    def describe(self) -> ToolNamespace | None:
        if not self.tools:
            return None
        return ToolNamespace(
            name=self.namespace,
            description=self._description or "",
            tools=tuple(
                {"name": t.name, "description": t.description or "", "parameters": t.input_schema}
                for t in self.tools
            ),
        )

    def needs_approval(self, name: str) -> bool:
        # A call to a tool that is not listed is refused, not put to the user.
        return bool(self.tools) and name in {t.name for t in self.tools or ()} and self._approval(name)

    # -- calls -------------------------------------------------------------------------------

    def failure(self, message: str, code: int = INTERNAL_ERROR) -> ToolOutcome:
        return protocol_error(message, code)

    async def reset(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()  # never raises: a broken session has nothing left to release

    async def aclose(self) -> None:
        await self.reset()

    def check(self, name: str, arguments: str) -> ToolOutcome | None:
        if not self.tools or name not in {t.name for t in self.tools}:
            return self.failure(
                f"Tool '{name}' is not available on MCP server '{self.namespace}'.", INVALID_PARAMS
            )
        try:
            args = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError as exc:
            return self.failure(f"The arguments are not valid JSON: {exc}", INVALID_PARAMS)
        if not isinstance(args, dict):
            return self.failure("The arguments must be a JSON object.", INVALID_PARAMS)
        return None

    async def connect(self) -> ToolOutcome | None:
        if self._session is not None:
            return None
        session = SessionHost(self._client)
        try:
            await session.start()
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            return self._failed(exc, "connect")
        self._session = session
        return None

    def _failed(self, exc: BaseException, what: str) -> ToolOutcome:
        message, status = describe_exception(exc)
        logger.info("MCP %s on %s failed: %s", what, self.namespace, message)
        if status is not None:
            return ToolOutcome(
                {"output": None, "error": {"type": "http_error", "code": status, "message": message}},
                failed=True,
            )
        return self.failure(message, CONNECTION_ERROR)

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        if self._session is None:
            connected = await self.connect()
            if connected is not None:
                return connected
        assert self._session is not None
        args = orjson.loads(arguments) if arguments.strip() else {}
        try:
            result = await self._session.run(lambda client: client.call_tool(name, args))
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            await self.reset()
            return self._failed(exc, f"call {name}")
        text = truncate_output(_content_text(result.content), self._settings.tool_output_max_bytes)
        if result.is_error:
            content = [{"type": "text", "text": text}]
            return ToolOutcome(
                {"output": None, "error": {"type": "mcp_tool_execution_error", "content": content}},
                failed=True,
            )
        return ToolOutcome({"output": text, "error": None})


def _content_text(content: Sequence[Any]) -> str:
    """A tool result's content as the text the model reads (non-text blocks as their JSON)."""
    parts = []
    for block in content:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
        else:
            parts.append(orjson.dumps(block.model_dump(mode="json", exclude_none=True)).decode())
    return "\n".join(parts)
