"""Spans of server-run tool calls and of the MCP requests they make (docs/tracing-and-dashboards.md#tool-spans).

Each call the tool loop runs is an ``execute_tool {gen_ai.tool.name}`` span (the GenAI conventions'), and
each MCP request a ``{mcp.method.name} {target}`` span of kind client (the MCP conventions': ``initialize``,
``tools/list``, ``tools/call {tool}``), created in the task that waits for it, so that it is the child of
whatever is current there (the response's spans). An MCP request carries the W3C trace context of its span
in ``params._meta`` (``traceparent``, ``tracestate``: SEP-414, as the MCP conventions say) and, over HTTP, in
the headers of the HTTP request that carries it.

Off (``tracing.enabled()`` false) every function here is one module-global read, then the shared no-op: no
name, no attribute dict, nothing of OpenTelemetry imported. No argument or output text in any attribute
unless ``tracing.capture_content()`` (then at most :data:`CONTENT_MAX_CHARS` of each).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from ..harmony import MODEL_READ, mcp_output_text
from ..ops import trace_attrs as attrs
from ..ops import tracing
from .base import ToolOutcome

__all__ = [
    "CONTENT_MAX_CHARS",
    "agent_session",
    "agent_span",
    "McpTrace",
    "attached",
    "carried_context",
    "finish_tool_span",
    "mcp_span",
    "model_read_text",
    "tool_span",
]

#: The most characters of a tool call's arguments or result put in a span (with capture_content only).
CONTENT_MAX_CHARS = 4096
_EXECUTE_TOOL = "execute_tool"
#: What every server-run tool is in the GenAI conventions: an extension the agent (this server) runs.
_TOOL_TYPE = "extension"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _bounded(text: str) -> str:
    return text if len(text) <= CONTENT_MAX_CHARS else text[:CONTENT_MAX_CHARS] + "…"


def tool_name(namespace: str, name: str, mcp: bool) -> str:
    """``gen_ai.tool.name``: an MCP tool's own name (its server is ``trtllm.mcp.server_label``), else the
    recipient the model wrote (``python``, ``browser.search``, ``multi_agent.spawn_agent``)."""
    if mcp:
        return name
    return namespace if not name or name == namespace else f"{namespace}.{name}"


def tool_span(
    namespace: str, name: str, *, mcp: bool, call_id: str, arguments: str
) -> AbstractContextManager[tracing.SpanLike]:
    """The ``execute_tool`` span of one server-run call (current inside the ``with``; an exception leaving
    it is recorded). ``mcp``: a call to a remote MCP server's tool (``namespace`` is its server label)."""
    if not tracing.enabled():
        return tracing.span(_EXECUTE_TOOL)  # the shared no-op
    tool = tool_name(namespace, name, mcp)
    attributes: dict[str, tracing.AttributeValue] = {
        attrs.OPERATION: _EXECUTE_TOOL,
        attrs.TOOL_NAME: tool,
        attrs.TOOL_TYPE: _TOOL_TYPE,
        attrs.TOOL_CALL_ID: call_id,
    }
    if mcp:
        attributes[attrs.MCP_SERVER_LABEL] = namespace
    if tracing.capture_content():
        attributes[attrs.TOOL_ARGUMENTS_CONTENT] = _bounded(arguments)
    return tracing.span(f"{_EXECUTE_TOOL} {tool}", attributes)


def model_read_text(fields: Mapping[str, Any]) -> str:
    """The text the model reads of a finished call, from its item's fields as the model reads them: the
    browser's display, python's logs, an MCP or multi-agent call's output or error."""
    read = fields.get(MODEL_READ)
    if isinstance(read, str):
        return read
    outputs = fields.get("outputs")
    if isinstance(outputs, list):
        return "".join(
            o.get("logs", "") for o in outputs if isinstance(o, Mapping) and o.get("type") == "logs"
        )
    return mcp_output_text(fields) or ""


def finish_tool_span(span: tracing.SpanLike, outcome: ToolOutcome) -> None:
    """Record how the call of ``span`` ended: the size of what the model reads of it, ``error.type`` when
    it failed (``outcome.error_type``, else ``tool_error``)."""
    if not span.is_recording():
        return
    read = dict(outcome.fields)
    for overrides in outcome.optional.values():  # the model reads every optional field
        read.update(overrides)
    read.update(outcome.internal)
    text = model_read_text(read)
    span.set_attribute(attrs.TOOL_OUTPUT_BYTES, len(text.encode()))
    if outcome.failed:
        tracing.fail(span, "the tool call failed", error_type=outcome.error_type or "tool_error")
    if tracing.capture_content():
        span.set_attribute(attrs.TOOL_RESULT_CONTENT, _bounded(text))


# -- sub-agents ------------------------------------------------------------------------------------


def agent_span(
    name: str, depth: int, parent_key: str | None, own_key: str | None
) -> AbstractContextManager[tracing.SpanLike]:
    """The ``invoke_agent {name}`` span of one turn of a multi-agent sub-agent (``responses/subagents.py``):
    its depth, its parent's session key (``session.previous_id``) and its own (``gen_ai.agent.id``,
    ``session.id``: its conversation's) where known."""
    if not tracing.enabled():
        return tracing.span("invoke_agent")  # the shared no-op
    attributes: dict[str, tracing.AttributeValue] = {
        attrs.OPERATION: "invoke_agent",
        attrs.AGENT_NAME: name,
        attrs.AGENT_DEPTH: depth,
    }
    if parent_key is not None:
        attributes[attrs.SESSION_PREVIOUS_ID] = parent_key
    if own_key is not None:
        attributes[attrs.AGENT_ID] = attributes[attrs.SESSION_ID] = own_key
    return tracing.span(f"invoke_agent {name}", attributes)


def agent_session(span: tracing.SpanLike, key: str) -> None:
    """A sub-agent's session key, learnt when its first turn ended (``gen_ai.agent.id``, ``session.id``)."""
    if span.is_recording():
        span.set_attributes({attrs.AGENT_ID: key, attrs.SESSION_ID: key})


# -- MCP requests ----------------------------------------------------------------------------------


@dataclass(slots=True)
class McpTrace:
    """What the spans of one MCP session's requests say about it: its server's address, and what the
    session learns (its id from the ``mcp-session-id`` header, or an SSE endpoint's ``session_id``; the
    protocol version initialize agreed). Made per session, only when tracing is on."""

    address: str | None
    port: int | None
    session_id: str | None = None
    protocol_version: str | None = None

    @classmethod
    def new(cls, url: str) -> McpTrace | None:
        """The session's trace of a server at ``url``; None when tracing is off."""
        if not tracing.enabled():
            return None
        parts = urlsplit(url)
        return cls(parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme))

    def attributes(self, method: str) -> dict[str, tracing.AttributeValue]:
        """The attributes of a span of ``method`` in this session."""
        found: dict[str, tracing.AttributeValue] = {attrs.MCP_METHOD: method}
        if self.address:
            found[attrs.SERVER_ADDRESS] = self.address
        if self.port:
            found[attrs.SERVER_PORT] = self.port
        if self.session_id:
            found[attrs.MCP_SESSION_ID] = self.session_id
        if self.protocol_version:
            found[attrs.MCP_PROTOCOL_VERSION] = self.protocol_version
        return found

    async def on_request(self, request: Any) -> None:
        """An HTTP request of the session (httpx's event hook): the trace context of the MCP message it
        carries (its ``params._meta``) goes into its headers; an SSE endpoint's ``session_id`` is noted."""
        if self.session_id is None and "session_id=" in request.url.query.decode(errors="replace"):
            values = parse_qs(request.url.query.decode(errors="replace")).get("session_id")
            self.session_id = values[0] if values else None
        try:
            content = request.content if request.method == "POST" else b""
        except Exception:  # a streamed body (the SDK sends none): nothing to read it from
            return
        if b"traceparent" not in content:
            return
        try:
            message = orjson.loads(content)
        except orjson.JSONDecodeError:
            return
        meta = message.get("params", {}).get("_meta") if isinstance(message, dict) else None
        if isinstance(meta, dict):
            for key in tracing.TRACE_HEADERS:
                if isinstance(meta.get(key), str):
                    request.headers[key] = meta[key]

    async def on_response(self, response: Any) -> None:
        """An HTTP answer of the session: a streamable HTTP server's ``mcp-session-id``."""
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            self.session_id = session_id

    def initializing(
        self,
        opening: AbstractAsyncContextManager[Any],
        version: Callable[[Any], str | None],
        classify: Callable[[BaseException], tuple[str, int | None]],
    ) -> AbstractAsyncContextManager[Any]:
        """``opening`` (a session's connect and initialize) inside an ``initialize`` span, current while it
        runs (so the SDK's own ``_meta``, where it injects one, names it); ``version`` reads the agreed
        protocol version off the open session, ``classify`` a failure's ``error.type`` (and JSON-RPC code)."""
        return _initializing(self, opening, version, classify)


@asynccontextmanager
async def _initializing(
    trace: McpTrace,
    opening: AbstractAsyncContextManager[Any],
    version: Callable[[Any], str | None],
    classify: Callable[[BaseException], tuple[str, int | None]],
) -> AsyncIterator[Any]:
    span = tracing.start_span("initialize", trace.attributes("initialize"), kind="client")
    async with contextlib.AsyncExitStack() as stack:
        try:
            with tracing.use_span(span):
                session = await stack.enter_async_context(opening)
        except BaseException as exc:
            mcp_failed(span, exc, *classify(exc))
            span.end()
            raise
        trace.protocol_version = version(session)
        span.set_attributes(trace.attributes("initialize"))
        span.end()
        yield session


def mcp_span(
    method: str, trace: McpTrace | None, tool: str | None = None
) -> AbstractContextManager[tracing.SpanLike]:
    """The client span of one MCP request (``tools/list``, ``tools/call`` of ``tool``), current inside the
    ``with``: ``tracing.inject()`` there is what the request's ``_meta`` carries. ``trace``: its session's
    (None: tracing off, the shared no-op)."""
    if trace is None or not tracing.enabled():
        return tracing.span(method)
    attributes = trace.attributes(method)
    if tool is not None:
        attributes[attrs.TOOL_NAME] = tool
    return tracing.span(f"{method} {tool}" if tool else method, attributes, kind="client")


def mcp_failed(
    span: tracing.SpanLike, exc: BaseException | None, error_type: str, code: int | None = None
) -> None:
    """Mark an MCP request's span failed: ``error_type`` (a JSON-RPC error code, an HTTP status, an exception's
    class), ``rpc.response.status_code`` for a JSON-RPC error answer."""
    if not span.is_recording():
        return
    tracing.fail(span, str(exc) if exc is not None else error_type, error_type=error_type)
    if code is not None:
        span.set_attribute(attrs.RPC_STATUS, str(code))


# -- the context across the task that owns a session ------------------------------------------------


def carried_context() -> object | None:
    """The current OpenTelemetry context, to run a request in another task under it (None when off)."""
    if not tracing.enabled():
        return None
    from opentelemetry import context

    return context.get_current()


@contextlib.contextmanager
def attached(carried: object | None) -> Iterator[None]:
    """``carried`` (a :func:`carried_context`) current in this task inside the ``with``; None: nothing."""
    if carried is None:
        yield
        return
    from opentelemetry import context

    token = context.attach(carried)  # type: ignore[arg-type]
    try:
        yield
    finally:
        context.detach(token)
