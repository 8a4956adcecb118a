"""Remote MCP servers as server-run tools, through the official ``mcp`` SDK.

``prepare_mcp_tools`` checks a request's ``{"type": "mcp"}`` tools (the URL
against the operator's allow-list; ``headers``, ``allowed_tools``,
``require_approval``), lists each server's tools or reuses a listing the
conversation already holds, and returns the providers. :class:`MCPProvider`
runs calls. The listing has its own MCP session (streamable HTTP, or SSE when
the URL's path ends in ``/sse``), made while the request is prepared; the calls
of one response share one session, opened at the first call and closed when the
response ends (the loop calls ``aclose`` from the task that made the calls, as
anyio's cancel scopes require). A timed-out or failed call drops the session.

Headers a client sends (``Authorization``…) go to its MCP server and nowhere
else: they are kept only on the provider of this response, never in the
response, the store or a log line.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
import orjson
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from openai.types.responses.response_output_item import McpListTools, McpListToolsTool

from ..errors import InvalidRequestError
from ..harmony.items import ItemKind, ItemTarget, list_tools_key
from ..ids import new_id
from .base import ApprovedCall, ServerTools, ToolNamespace, ToolOutcome, ToolProvider, truncate_output
from .settings import ToolSettings, url_allowed

__all__ = ["MCPProvider", "MissingTool", "prepare_mcp_tools"]

logger = logging.getLogger(__name__)

# JSON-RPC / MCP error codes used in mcp_protocol_error items.
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_TIMEOUT = -32001
CONNECTION_ERROR = -32000


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every MCP connection (building one costs milliseconds; it never changes)."""
    return httpx2.create_ssl_context()


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An HTTP client for one MCP session: the mcp SDK's defaults (no redirects: the SDK follows same-origin
    ones itself), the shared TLS context, and no proxy settings read from the environment."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(30.0),
        auth=auth,
        verify=_ssl_context(),
        trust_env=False,
    )


def _protocol_error(message: str, code: int) -> ToolOutcome:
    return ToolOutcome(
        {"output": None, "error": {"type": "mcp_protocol_error", "code": code, "message": message}},
        failed=True,
    )


def describe_exception(exc: BaseException) -> tuple[str, int | None]:
    """A short message for a failed MCP exchange (the innermost cause), and its HTTP status if any."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"the MCP server answered HTTP {exc.response.status_code}", exc.response.status_code
    if isinstance(exc, httpx2.ConnectError):
        return "could not connect to the MCP server", None
    if isinstance(exc, httpx2.TimeoutException):
        return "the MCP server did not answer in time", None
    if isinstance(exc, MCPError):
        return f"the MCP server returned an error: {exc.message}", None
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, None


class _ApprovalRule:
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
            names = _tool_names(value.get(key), f"{where}.{key}")
            setattr(self, key, names)

    def __call__(self, name: str) -> bool:
        if name in self.never:
            return False
        return name in self.always or self.default


def _tool_names(value: Any, where: str) -> frozenset[str]:
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
        approval: _ApprovalRule | None = None,
    ) -> None:
        self.namespace = label
        self._url = url
        self._headers = dict(headers)
        self._settings = settings
        self._description = description
        self._allowed = allowed
        self._read_only = read_only
        self._approval = approval or _ApprovalRule("never", "")
        self.tools: list[McpListToolsTool] | None = None
        self._session: Client | None = None
        self._stack: AsyncExitStack | None = None

    def __repr__(self) -> str:  # never the headers
        return f"MCPProvider({self.namespace!r}, {self._url!r})"

    # -- sessions ----------------------------------------------------------------------------

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[Client]:
        timeout = self._settings.tool_timeout
        if self._url.rstrip("/").endswith("/sse"):
            transport: Any = sse_client(
                self._url,
                headers=self._headers,
                timeout=timeout,
                sse_read_timeout=timeout,
                httpx_client_factory=_http_client,
            )
            async with Client(transport, mode="legacy", cache=None, read_timeout_seconds=timeout) as client:
                yield client
            return
        http = _http_client(headers=self._headers, timeout=httpx2.Timeout(timeout))
        async with http:
            transport = streamable_http_client(self._url, http_client=http)
            async with Client(transport, mode="legacy", cache=None, read_timeout_seconds=timeout) as client:
                yield client

    # -- listing -----------------------------------------------------------------------------

    async def list_tools(self) -> list[McpListToolsTool]:
        """List the server's tools (every page), filtered by ``allowed_tools``; sets ``self.tools``."""
        tools: list[McpListToolsTool] = []
        async with self._client() as client:
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                for tool in page.tools:
                    annotations = (
                        tool.annotations.model_dump(exclude_none=True, by_alias=True)
                        if tool.annotations
                        else None
                    )
                    tools.append(
                        McpListToolsTool(
                            name=tool.name,
                            description=tool.description,
                            input_schema=tool.input_schema,
                            annotations=annotations,
                        )
                    )
                cursor = page.next_cursor
                if not cursor:
                    break
        self.tools = self.filter(tools)
        return self.tools

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
        return _protocol_error(message, code)

    async def reset(self) -> None:
        stack, self._stack, self._session = self._stack, None, None
        if stack is not None:
            try:
                await stack.aclose()
            except (asyncio.CancelledError, KeyboardInterrupt):
                raise
            except BaseException as exc:  # a broken session: nothing left to release
                logger.debug("Closing the MCP session to %s: %s", self.namespace, describe_exception(exc)[0])

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
        stack = AsyncExitStack()
        try:
            self._session = await stack.enter_async_context(self._client())
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            return self._failed(exc, "connect")
        self._stack = stack
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
            result = await self._session.call_tool(name, args)
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


class MissingTool(ToolProvider):
    """Answers a call to a namespace no server-run tool serves."""

    namespace = ""

    def failure(self, message: str, code: int = INTERNAL_ERROR) -> ToolOutcome:
        return _protocol_error(message, code)

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        return self.failure(
            f"Tool '{name}' is not available: no such server in this response.", INVALID_PARAMS
        )


# --------------------------------------------------------------------------------------------
# Preparing a request's MCP tools
# --------------------------------------------------------------------------------------------


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidRequestError(f"'{where}' must be an object of string values.", param=where)
    return dict(value)


def _not_allowed(url: str, where: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"This server does not connect to the MCP server URL {url!r}: it is not under an allowed prefix. "
        "The operator enables MCP URLs with `trtllm-responses serve --mcp_allowed_urls PREFIX[,PREFIX...]` "
        "(or configures a server with `--tool_server LABEL=URL`).",
        param=where,
        code="mcp_url_not_allowed",
    )


def _providers_from_request(tools: Sequence[Mapping[str, Any]], settings: ToolSettings) -> list[MCPProvider]:
    providers: list[MCPProvider] = []
    labels: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.get("type") != "mcp":
            continue
        where = f"tools[{i}]"
        label = tool.get("server_label")
        if not isinstance(label, str) or not label or "." in label or " " in label:
            raise InvalidRequestError(
                f"'{where}.server_label' must be a non-empty name without dots or spaces.",
                param=f"{where}.server_label",
            )
        if label in labels or label == "functions":
            raise InvalidRequestError(f"Two tools use server_label {label!r}.", param=f"{where}.server_label")
        labels.add(label)
        if tool.get("connector_id") is not None:
            raise InvalidRequestError(
                "connector_id is not supported by this server; give a server_url.",
                param=f"{where}.connector_id",
            )
        url = tool.get("server_url")
        if url is None:
            url = settings.tool_server(label)
            if url is None:
                raise InvalidRequestError(
                    f"'{where}.server_url' is required: no MCP server is configured for label {label!r} "
                    "(the operator configures them with `--tool_server LABEL=URL`).",
                    param=f"{where}.server_url",
                )
        elif not isinstance(url, str) or not url_allowed(url, settings.mcp_allowed_urls):
            raise _not_allowed(str(url), f"{where}.server_url")
        headers = _string_map(tool.get("headers"), f"{where}.headers")
        authorization = tool.get("authorization")
        if isinstance(authorization, str) and authorization:
            headers.setdefault("Authorization", f"Bearer {authorization}")
        description = tool.get("server_description")
        if description is not None and not isinstance(description, str):
            raise InvalidRequestError(
                f"'{where}.server_description' must be a string.", param=f"{where}.server_description"
            )
        allowed_value = tool.get("allowed_tools")
        allowed = None if allowed_value is None else _tool_names(allowed_value, f"{where}.allowed_tools")
        read_only = False
        if isinstance(allowed_value, Mapping):  # {"tool_names": [...], "read_only": bool}
            read_only = allowed_value.get("read_only") is True
            if read_only and not allowed_value.get("tool_names"):
                allowed = None
        providers.append(
            MCPProvider(
                label,
                url,
                headers=headers,
                settings=settings,
                description=description,
                allowed=allowed,
                read_only=read_only,
                approval=_ApprovalRule(tool.get("require_approval"), f"{where}.require_approval"),
            )
        )
    return providers


def _listings_in(input_items: Any) -> dict[str, str]:
    """``mcp_list_tools`` items a request replays: label → tools JSON."""
    found: dict[str, str] = {}
    if isinstance(input_items, list):
        for item in input_items:
            if (
                isinstance(item, Mapping)
                and item.get("type") == "mcp_list_tools"
                and isinstance(item.get("server_label"), str)
                and isinstance(item.get("tools"), list)
                and item.get("error") is None
            ):
                found[list_tools_key(item["server_label"])] = orjson.dumps(item["tools"]).decode()
    return found


def _approved_calls(
    input_items: Any, calls: Mapping[str, str], providers: Mapping[str, MCPProvider]
) -> list[ApprovedCall]:
    """Calls this request approves (mcp_approval_response, approve: true), in input order."""
    if not isinstance(input_items, list):
        return []
    requests = dict(calls)
    approved: list[ApprovedCall] = []
    for item in input_items:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "mcp_approval_request" and isinstance(item.get("id"), str):
            requests[item["id"]] = orjson.dumps(
                {
                    "server_label": item.get("server_label"),
                    "name": item.get("name"),
                    "arguments": item.get("arguments"),
                }
            ).decode()
        elif item.get("type") == "mcp_approval_response" and item.get("approve") is True:
            pending = requests.get(str(item.get("approval_request_id")))
            if pending is None:
                continue  # the input converter reports it, naming the item
            call = orjson.loads(pending)
            target = ItemTarget(ItemKind.MCP_CALL, name=call["name"], namespace=call["server_label"])
            approved.append(ApprovedCall(target, call["arguments"], str(item["approval_request_id"])))
    return approved


async def prepare_mcp_tools(
    tools: Sequence[Mapping[str, Any]],
    input_items: Any,
    history_calls: Mapping[str, str],
    settings: ToolSettings,
) -> ServerTools | None:
    """The request's MCP tools for one response, listed (or reused); None when it declares none.

    Raises InvalidRequestError for a malformed tool or a URL the operator did not allow.
    A listing that fails becomes an ``mcp_list_tools`` item with its ``error`` (the
    response goes on without that server's tools).
    """
    providers = _providers_from_request(tools, settings)
    if not providers:
        return None
    known = {**history_calls, **_listings_in(input_items)}
    server_tools = ServerTools(missing=MissingTool())

    async def prepare(provider: MCPProvider) -> McpListTools | None:
        reused = known.get(list_tools_key(provider.namespace))
        if reused is not None:
            provider.tools = provider.filter(
                [McpListToolsTool.model_validate(t) for t in orjson.loads(reused)]
            )
            return None
        item_id = new_id("mcpl")
        try:
            listed = await asyncio.wait_for(provider.list_tools(), settings.tool_timeout)
        except asyncio.TimeoutError:
            error = f"Listing the tools of MCP server '{provider.namespace}' timed out after {settings.tool_timeout:g} s."
            return McpListTools(
                id=item_id, type="mcp_list_tools", server_label=provider.namespace, tools=[], error=error
            )
        except Exception as exc:
            message, _ = describe_exception(exc)
            logger.info("Listing MCP server %s failed: %s", provider.namespace, message)
            error = f"Listing the tools of MCP server '{provider.namespace}' failed: {message}."
            return McpListTools(
                id=item_id, type="mcp_list_tools", server_label=provider.namespace, tools=[], error=error
            )
        return McpListTools(id=item_id, type="mcp_list_tools", server_label=provider.namespace, tools=listed)

    items = await asyncio.gather(*(prepare(p) for p in providers))
    for provider, item in zip(providers, items, strict=True):
        server_tools.providers[provider.namespace] = provider
        if item is not None:
            server_tools.opening_items.append(item)
    server_tools.approved = _approved_calls(input_items, history_calls, server_tools.providers)  # type: ignore[arg-type]
    return server_tools
