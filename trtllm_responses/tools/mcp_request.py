"""A request's ``{"type": "mcp"}`` tools → the MCP providers of one response.

``prepare_mcp_tools`` checks each tool (the URL against the operator's
allow-list, ``headers``, ``allowed_tools``, ``require_approval``), lists each
server's tools or reuses a listing the conversation already holds (stored or
replayed ``mcp_list_tools`` items), and finds the calls this request approves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from openai.types.responses.response_output_item import McpListTools, McpListToolsTool

from ..core import InvalidRequestError, new_id
from ..harmony import ItemKind, ItemTarget, list_tools_key
from ..request import InputItem, McpApprovalRequest, McpApprovalResponse, McpTool, RequestTool
from ..request import McpListTools as McpListToolsItem
from .base import ApprovedCall, ServerTools
from .mcp import ApprovalRule, MCPProvider, describe_exception, tool_names
from .settings import ToolSettings, url_allowed

__all__ = ["prepare_mcp_tools"]

logger = logging.getLogger(__name__)


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidRequestError(f"'{where}' must be an object of string values.", param=where)
    return dict(value)


#: Headers a client may not send to an MCP server: ``Host`` and what proxies route or frame by
#: (hop-by-hop headers, RFC 9110 section 7.6.1, and the forwarding ones) could send the request elsewhere.
FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "connection",
        "proxy-connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "proxy-authorization",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-original-url",
        "x-rewrite-url",
    }
)


def _headers(value: Any, where: str) -> dict[str, str]:
    headers = _string_map(value, where)
    for name in headers:
        if name.strip().lower() in FORBIDDEN_HEADERS:
            raise InvalidRequestError(
                f"'{where}' may not set {name!r}: it could send the request somewhere else.",
                param=f"{where}.{name}",
            )
    return headers


def _not_allowed(url: str, where: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"This server does not connect to the MCP server URL {url!r}: it is not under an allowed prefix. "
        "The operator enables MCP URLs with `trtllm-responses serve --mcp_allowed_urls PREFIX[,PREFIX...]` "
        "(or configures a server with `--tool_server LABEL=URL`).",
        param=where,
        code="mcp_url_not_allowed",
    )


def _providers_from_request(tools: Sequence[RequestTool], settings: ToolSettings) -> list[MCPProvider]:
    providers: list[MCPProvider] = []
    labels: set[str] = set()
    for i, declared in enumerate(tools):
        if not isinstance(declared, McpTool):
            continue
        where = f"tools[{i}]"
        tool = declared.data
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
        # Every request of the session stays under these: the operator's prefixes for a client's URL,
        # the origin of a server the operator configured (an SSE server posts to its own endpoint path).
        allowed_urls: tuple[str, ...] | None = settings.mcp_allowed_urls
        if url is None:
            url = settings.tool_server(label)
            allowed_urls = None  # the configured server's origin (MCPProvider's default)
            if url is None:
                raise InvalidRequestError(
                    f"'{where}.server_url' is required: no MCP server is configured for label {label!r} "
                    "(the operator configures them with `--tool_server LABEL=URL`).",
                    param=f"{where}.server_url",
                )
        elif not isinstance(url, str) or not url_allowed(url, settings.mcp_allowed_urls):
            raise _not_allowed(str(url), f"{where}.server_url")
        headers = _headers(tool.get("headers"), f"{where}.headers")
        authorization = tool.get("authorization")
        if isinstance(authorization, str) and authorization:
            headers.setdefault("Authorization", f"Bearer {authorization}")
        description = tool.get("server_description")
        if description is not None and not isinstance(description, str):
            raise InvalidRequestError(
                f"'{where}.server_description' must be a string.", param=f"{where}.server_description"
            )
        allowed_value = tool.get("allowed_tools")
        allowed = None if allowed_value is None else tool_names(allowed_value, f"{where}.allowed_tools")
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
                approval=ApprovalRule(tool.get("require_approval"), f"{where}.require_approval"),
                allowed_urls=allowed_urls,
            )
        )
    return providers


def _listings_in(input_items: str | Sequence[InputItem]) -> dict[str, str]:
    """``mcp_list_tools`` items a request replays: label → tools JSON."""
    found: dict[str, str] = {}
    for typed in input_items:
        if not isinstance(typed, McpListToolsItem):
            continue
        item = typed.data
        if (
            isinstance(item.get("server_label"), str)
            and isinstance(item.get("tools"), list)
            and item.get("error") is None
        ):
            found[list_tools_key(item["server_label"])] = orjson.dumps(item["tools"]).decode()
    return found


def _approved_calls(
    input_items: str | Sequence[InputItem], calls: Mapping[str, str], providers: Mapping[str, MCPProvider]
) -> list[ApprovedCall]:
    """Calls this request approves (mcp_approval_response, approve: true), in input order."""
    requests = dict(calls)
    approved: list[ApprovedCall] = []
    for typed in input_items:
        if isinstance(typed, str):
            continue
        item = typed.data
        if isinstance(typed, McpApprovalRequest) and isinstance(item.get("id"), str):
            requests[item["id"]] = orjson.dumps(
                {
                    "server_label": item.get("server_label"),
                    "name": item.get("name"),
                    "arguments": item.get("arguments"),
                }
            ).decode()
        elif isinstance(typed, McpApprovalResponse) and typed.approves:
            pending = requests.get(str(item.get("approval_request_id")))
            if pending is None:
                continue  # the input converter reports it, naming the item
            call = orjson.loads(pending)
            target = ItemTarget(ItemKind.MCP_CALL, name=call["name"], namespace=call["server_label"])
            approved.append(ApprovedCall(target, call["arguments"], str(item["approval_request_id"])))
    return approved


async def prepare_mcp_tools(
    tools: Sequence[RequestTool],
    input_items: str | Sequence[InputItem],
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
    server_tools = ServerTools()

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
