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

Tracing on, each request is a client span (``initialize``, ``tools/list``, ``tools/call {tool}``) whose
W3C trace context the request carries in ``params._meta`` and its HTTP headers (``tools/spans.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
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
from ..ops import tracing
from .base import ToolNamespace, ToolOutcome, ToolProvider, truncate_output
from .mcp_errors import (
    CONNECTION_ERROR,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    URLNotAllowed,
    describe_exception,
    error_type,
    protocol_error,
)
from .mcp_sdk import Session, http, open_session
from .mcp_session import SessionHost
from .settings import ToolSettings, url_allowed
from .spans import McpTrace, mcp_failed, mcp_span

__all__ = [
    "INVALID_PARAMS",
    "ApprovalRule",
    "MCPProvider",
    "describe_exception",
    "protocol_error",
    "tool_names",
]

logger = logging.getLogger(__name__)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every MCP connection (building one costs milliseconds; it never changes)."""
    return http.create_ssl_context()


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: Any = None,
    auth: Any = None,
    *,
    allowed: tuple[str, ...] = (),
    trace: McpTrace | None = None,
) -> Any:
    """An HTTP client for one MCP session (httpx2 under mcp 2.x, httpx under 1.x: ``mcp_sdk.http``): no
    redirects (mcp 2.x follows same-origin ones itself; under 1.x none is followed), the shared TLS context, no proxy settings read from the environment, and every request
    checked against the ``allowed`` URL prefixes before it is sent. ``trace`` (tracing on): each request
    carries its MCP message's trace context in its headers, and the session's id is noted."""

    async def check(request: Any) -> None:
        url = str(request.url)
        if not url_allowed(url, allowed):
            raise URLNotAllowed(f"the MCP server sent the session to {url[:200]}, outside the allowed URLs")

    hooks: dict[str, list[Any]] = {"request": [check]}
    if trace is not None:
        hooks = {"request": [check, trace.on_request], "response": [trace.on_response]}
    return http.AsyncClient(
        headers=headers,
        timeout=timeout or http.Timeout(30.0),
        auth=auth,
        verify=_ssl_context(),
        trust_env=False,
        event_hooks=hooks,
    )


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
        self._trace: McpTrace | None = None  # the calls' session's, tracing on

    def __repr__(self) -> str:  # never the headers
        return f"MCPProvider({self.namespace!r}, {self._url!r})"

    # -- sessions ----------------------------------------------------------------------------

    def _client(self, trace: McpTrace | None) -> AbstractAsyncContextManager[Session]:
        opening = open_session(
            self._url,
            headers=self._headers,
            timeout=self._settings.tool_timeout,
            sse=self._url.rstrip("/").endswith("/sse"),
            client_factory=functools.partial(_http_client, allowed=self._allowed_urls, trace=trace),
        )
        return opening if trace is None else trace.initializing(opening, _protocol_version, error_type)

    # -- listing -----------------------------------------------------------------------------

    async def list_tools(self) -> list[McpListToolsTool]:
        """List the server's tools (every page), filtered by ``allowed_tools``; sets ``self.tools``."""
        trace = McpTrace.new(self._url)
        host = SessionHost(functools.partial(self._client, trace))
        await host.start()
        try:
            tools = await self._list_all(host, trace)
        finally:
            await host.aclose()
        self.tools = self.filter(tools)
        return self.tools

    @staticmethod
    async def _list_all(host: SessionHost, trace: McpTrace | None) -> list[McpListToolsTool]:
        tools: list[McpListToolsTool] = []
        cursor: str | None = None
        while True:
            with mcp_span("tools/list", trace) as span:
                try:
                    page = await host.run(functools.partial(_list_page, cursor=cursor, meta=tracing.inject()))
                except BaseException as exc:  # the listing's timeout cancels it: "cancelled"
                    mcp_failed(span, exc, *error_type(exc))
                    raise
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
        session, self._session, self._trace = self._session, None, None
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
        trace = McpTrace.new(self._url)
        session = SessionHost(functools.partial(self._client, trace))
        try:
            await session.start()
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            return self._failed(exc, "connect")
        self._session, self._trace = session, trace
        return None

    def _failed(self, exc: BaseException, what: str) -> ToolOutcome:
        message, status = describe_exception(exc)
        logger.info("MCP %s on %s failed: %s", what, self.namespace, message)
        kind = error_type(exc)[0]
        if status is not None:
            return ToolOutcome(
                {"output": None, "error": {"type": "http_error", "code": status, "message": message}},
                failed=True,
                error_type=kind,
            )
        return dataclasses.replace(self.failure(message, CONNECTION_ERROR), error_type=kind)

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        if self._session is None:
            connected = await self.connect()
            if connected is not None:
                return connected
        assert self._session is not None
        args = orjson.loads(arguments) if arguments.strip() else {}
        with mcp_span("tools/call", self._trace, name) as span:
            request = functools.partial(_call, name=name, arguments=args, meta=tracing.inject())
            try:
                result = await self._session.run(request)
            except (asyncio.CancelledError, KeyboardInterrupt):  # the loop's timeout, or the response's end
                mcp_failed(span, None, "cancelled")
                raise
            except BaseException as exc:
                mcp_failed(span, exc, *error_type(exc))
                await self.reset()
                return self._failed(exc, f"call {name}")
            if result.is_error:
                mcp_failed(span, None, "tool_error")
        text = truncate_output(_content_text(result.content), self._settings.tool_output_max_bytes)
        if result.is_error:
            content = [{"type": "text", "text": text}]
            return ToolOutcome(
                {"output": None, "error": {"type": "mcp_tool_execution_error", "content": content}},
                failed=True,
                error_type="tool_error",
            )
        return ToolOutcome({"output": text, "error": None})


async def _list_page(session: Session, *, cursor: str | None, meta: dict[str, str] | None) -> Any:
    return await session.list_tools(cursor, meta)


async def _call(
    session: Session, *, name: str, arguments: dict[str, Any], meta: dict[str, str] | None
) -> Any:
    return await session.call_tool(name, arguments, meta)


def _protocol_version(session: Session) -> str | None:
    return session.protocol_version


def _content_text(content: Sequence[Any]) -> str:
    """A tool result's content as the text the model reads (non-text blocks as their JSON)."""
    parts = []
    for block in content:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
        else:
            parts.append(orjson.dumps(block.model_dump(mode="json", exclude_none=True)).decode())
    return "\n".join(parts)
