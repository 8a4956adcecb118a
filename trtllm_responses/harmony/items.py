"""Harmony messages → Responses output items: which item a model message becomes.

``classify`` + ``build_output_item``: a Harmony header decides which Responses item a
model message becomes:

    analysis, no recipient            → reasoning        (rs_)
    final, no recipient               → message          (msg_, phase final_answer)
    commentary, no recipient          → message          (msg_, phase commentary: a preamble)
    to=functions.NAME, a declared function → function_call    (fc_, call_…)
    to=NS.NAME, NS a declared namespace → function_call with namespace NS
    to=functions.NAME, NAME a custom tool → custom_tool_call (ctc_, call_…), body = raw input
    to=browser.*                      → web_search_call  (ws_)
    to=python                         → code_interpreter_call (ci_)
    to=functions.NAME or a bare NAME, nothing declared by that name
                                      → no item: an undeclared function, answered to the model
    any other recipient               → mcp_call         (mcp_), or mcp_approval_request (mcpr_)
                                        when the server's tool loop says the call needs approval,
                                        or multi_agent_call (mac_) when its provider says so
                                        (the beta multi-agent surface, ``tools/multi_agent.py``)

A recipient is first resolved against the request's declared tools (``RequestTools.resolve``:
a bare name, ``functions.functions.x``, a glued ``json`` or stray control token are the declared
tool they clean to). A stray word where the recipient goes (``guessed``) is a call only when it names a
tool the response has and the channel is not final (:func:`callable_header`). A call to a tool nobody runs
(a namespace no server serves, ``browser``/``python`` not run here) becomes an ``mcp_call``,
``web_search_call`` or ``code_interpreter_call``, and an undeclared function no item at all, which the
tool loop answers to the model with an error (``tools/unavailable.py``).

The way back, items sent as input to Harmony messages, is ``input_messages.py``: output
items sent back convert to the same messages the server stores, so a stateless replay
renders the same tokens as a stored continuation.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson
from openai.types.beta.beta_response_output_item import MultiAgentCall
from openai.types.responses import (
    ResponseCodeInterpreterToolCall,
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseToolSearchCall,
)
from openai.types.responses.response_function_web_search import ActionFind, ActionOpenPage, ActionSearch
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall
from openai.types.responses.response_reasoning_item import Content as ReasoningContent

from ..core import new_id
from .completion import ParsedMessage
from .headers import MessageHeader
from .tools import RequestTools, recipient_candidates

__all__ = [
    "FUNCTIONS_NAMESPACE",
    "ItemKind",
    "ItemTarget",
    "build_output_item",
    "callable_header",
    "classify",
    "completion_to_output_items",
    "new_item_ids",
]

FUNCTIONS_NAMESPACE = "functions"
_BROWSER_ACTIONS = {"search": "search", "open": "open_page", "find": "find_in_page"}


class ItemKind(enum.Enum):
    REASONING = "reasoning"
    MESSAGE = "message"
    FUNCTION_CALL = "function_call"
    CUSTOM_TOOL_CALL = "custom_tool_call"
    WEB_SEARCH_CALL = "web_search_call"
    CODE_INTERPRETER_CALL = "code_interpreter_call"
    MCP_CALL = "mcp_call"
    MCP_APPROVAL_REQUEST = "mcp_approval_request"
    #: A call to the client-run ``tool_search`` (``functions.tool_search``): a ``tool_search_call`` item.
    TOOL_SEARCH_CALL = "tool_search_call"
    #: A call to a function the request did not declare: no item (a client acts on every function_call),
    #: the tool loop answers it to the model as that function's output (``tools/unavailable.py``).
    UNDECLARED_FUNCTION = "undeclared_function"
    #: A call to the beta multi-agent namespace (``multi_agent.ACTION``): a ``multi_agent_call`` item.
    MULTI_AGENT_CALL = "multi_agent_call"


_PREFIX = {
    ItemKind.REASONING: "rs",
    ItemKind.MESSAGE: "msg",
    ItemKind.FUNCTION_CALL: "fc",
    ItemKind.CUSTOM_TOOL_CALL: "ctc",
    ItemKind.WEB_SEARCH_CALL: "ws",
    ItemKind.CODE_INTERPRETER_CALL: "ci",
    ItemKind.MCP_CALL: "mcp",
    ItemKind.MCP_APPROVAL_REQUEST: "mcpr",
    ItemKind.TOOL_SEARCH_CALL: "tsc",
    ItemKind.UNDECLARED_FUNCTION: "fc",
    ItemKind.MULTI_AGENT_CALL: "mac",
}


@dataclass(frozen=True, slots=True)
class ItemTarget:
    """The Responses item a Harmony message becomes."""

    kind: ItemKind
    name: str | None = None  # function, custom tool, MCP tool or browser action
    namespace: str | None = (
        None  # the recipient's namespace (not functions): MCP server label, "browser", "python", a namespace tool's
    )
    phase: str | None = None  # messages: "final_answer" or "commentary"


def callable_header(
    header: MessageHeader, tools: RequestTools | None, runs: Callable[[str], bool] | None = None
) -> MessageHeader:
    """``header``, its guessed recipient kept only if it can be one (docs/harmony.md#what-the-model-may-write).

    A stray word where the recipient goes (``<|channel|>commentary 2?``, ``Some text <|channel|>…``) is
    a call only when it names a declared tool (``tools``, after issue 17's cleanups) or one the server
    runs (``runs``), and never on the final channel; else the header has no recipient.
    """
    if not header.guessed:
        return header
    name = header.recipient
    if (
        name is not None
        and header.channel != "final"
        and ((tools is not None and tools.resolve(name) is not None) or (runs is not None and runs(name)))
    ):
        return replace(header, guessed=False)
    return replace(header, recipient=None, guessed=False)


def classify(header: MessageHeader, tools: RequestTools | None = None) -> ItemTarget:
    """Map the header of an assistant message to the output item it becomes.

    ``tools`` (the request's) tells declared namespaces and custom tools apart.
    """
    recipient = header.recipient
    if recipient:
        tool = tools.resolve(recipient) if tools is not None else None
        if tool is not None and tool.search:
            return ItemTarget(ItemKind.TOOL_SEARCH_CALL, name=tool.name)
        if tool is not None:
            namespace = None if tool.namespace == FUNCTIONS_NAMESPACE else tool.namespace
            kind = ItemKind.CUSTOM_TOOL_CALL if tool.custom else ItemKind.FUNCTION_CALL
            return ItemTarget(kind, name=tool.name, namespace=namespace)
        recipient = recipient_candidates(recipient)[-1]
        namespace, _, name = recipient.partition(".")
        if namespace == FUNCTIONS_NAMESPACE and name and tools is None:  # no request to check it against
            return ItemTarget(ItemKind.FUNCTION_CALL, name=name)
        if namespace == "browser":
            return ItemTarget(ItemKind.WEB_SEARCH_CALL, name=name or "search", namespace="browser")
        if recipient == "python":
            return ItemTarget(ItemKind.CODE_INTERPRETER_CALL, namespace="python")
        if tools is not None and ((namespace == FUNCTIONS_NAMESPACE and name) or not name):
            # ``functions.nope``, or a bare name (Harmony's way to call a function): nothing declared by it
            return ItemTarget(
                ItemKind.UNDECLARED_FUNCTION, name=name or namespace, namespace=FUNCTIONS_NAMESPACE
            )
        return ItemTarget(ItemKind.MCP_CALL, name=name or namespace, namespace=namespace)
    if header.channel == "analysis":
        return ItemTarget(ItemKind.REASONING)
    if header.channel == "commentary":
        return ItemTarget(ItemKind.MESSAGE, phase="commentary")
    return ItemTarget(ItemKind.MESSAGE, phase="final_answer")


def _web_search_action(action: str | None, arguments: str) -> Any:
    try:
        args = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    kind = _BROWSER_ACTIONS.get(action or "search", "search")
    if kind == "open_page":
        url = args.get("url") or args.get("id")
        return ActionOpenPage(type="open_page", url=url if isinstance(url, str) else None)
    if kind == "find_in_page":
        pattern = args.get("pattern")
        url = args.get("url")
        return ActionFind(
            type="find_in_page",
            pattern=pattern if isinstance(pattern, str) else "",
            url=url if isinstance(url, str) else "",
        )
    query = args.get("query")
    return ActionSearch(type="search", query=query if isinstance(query, str) else None)


def build_output_item(
    target: ItemTarget, item_id: str, text: str, status: str, call_id: str | None = None
) -> ResponseOutputItem:
    """Build the Responses output item for a model message with body ``text``.

    ``status`` is ``in_progress`` (item just added), ``completed`` or ``incomplete``
    (cut off by the token limit). Function calls need their ``call_id``.
    """
    kind = target.kind
    if kind is ItemKind.MESSAGE:
        content: list[Any] = [ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])]
        return ResponseOutputMessage(
            id=item_id,
            type="message",
            role="assistant",
            status=status,  # type: ignore[arg-type]
            content=content if status != "in_progress" else [],
            phase=target.phase,  # type: ignore[arg-type]
        )
    if kind is ItemKind.REASONING:
        return ResponseReasoningItem(
            id=item_id,
            type="reasoning",
            summary=[],
            content=[ReasoningContent(type="reasoning_text", text=text)] if status != "in_progress" else [],
            status=status,  # type: ignore[arg-type]
        )
    if kind in _CLIENT_CALL_KINDS:
        assert call_id is not None
        return _client_call_item(target, item_id, text, status, call_id)
    return _server_call_item(target, item_id, text, status, call_id)


#: The kinds of item a client runs (it answers each with the call's output).
_CLIENT_CALL_KINDS = frozenset({ItemKind.FUNCTION_CALL, ItemKind.CUSTOM_TOOL_CALL, ItemKind.TOOL_SEARCH_CALL})


def _client_call_item(
    target: ItemTarget, item_id: str, text: str, status: str, call_id: str
) -> ResponseOutputItem:
    """A ``function_call``, ``custom_tool_call`` or ``tool_search_call`` (:data:`_CLIENT_CALL_KINDS`)."""
    if target.kind is ItemKind.TOOL_SEARCH_CALL:
        return ResponseToolSearchCall(
            id=item_id,
            type="tool_search_call",
            call_id=call_id,
            arguments=_search_arguments(text),
            execution="client",
            status=status,  # type: ignore[arg-type]
        )
    assert target.name is not None
    namespace: dict[str, Any] = {"namespace": target.namespace} if target.namespace else {}
    if target.kind is ItemKind.CUSTOM_TOOL_CALL:
        return ResponseCustomToolCall(
            id=item_id, type="custom_tool_call", call_id=call_id, name=target.name, input=text, **namespace
        )
    return ResponseFunctionToolCall(
        id=item_id,
        type="function_call",
        call_id=call_id,
        name=target.name,
        arguments=text,
        status=status,  # type: ignore[arg-type]
        **namespace,
    )


def _server_call_item(
    target: ItemTarget, item_id: str, text: str, status: str, call_id: str | None
) -> ResponseOutputItem:
    """A call of a tool the client does not run: web search, code interpreter, multi-agent, MCP (or its approval
    request); any other kind (an undeclared function) is an ``mcp_call``."""
    kind = target.kind
    if kind is ItemKind.WEB_SEARCH_CALL:
        return ResponseFunctionWebSearch(
            id=item_id,
            type="web_search_call",
            status=status,  # type: ignore[arg-type]
            action=_web_search_action(target.name, text),
        )
    if kind is ItemKind.CODE_INTERPRETER_CALL:
        return ResponseCodeInterpreterToolCall(
            id=item_id,
            type="code_interpreter_call",
            code=text,
            container_id="",
            outputs=None,
            status=status,  # type: ignore[arg-type]
        )
    assert target.name is not None and target.namespace is not None
    if kind is ItemKind.MULTI_AGENT_CALL:  # a beta item: no status field
        assert call_id is not None
        return MultiAgentCall(  # type: ignore[return-value]
            id=item_id,
            type="multi_agent_call",
            action=target.name,  # type: ignore[arg-type]
            arguments=text,
            call_id=call_id,
        )
    mcp: dict[str, Any] = {"name": target.name, "server_label": target.namespace, "arguments": text}
    if kind is ItemKind.MCP_APPROVAL_REQUEST:
        return McpApprovalRequest(id=item_id, type="mcp_approval_request", **mcp)
    return McpCall(id=item_id, type="mcp_call", status=status, **mcp)  # type: ignore[arg-type]


_CALL_KINDS = frozenset(
    {ItemKind.FUNCTION_CALL, ItemKind.CUSTOM_TOOL_CALL, ItemKind.MULTI_AGENT_CALL, ItemKind.TOOL_SEARCH_CALL}
)


def _search_arguments(text: str) -> Any:
    """A tool search's ``arguments`` (an object in the SDK): its JSON, ``{}`` while none has streamed, else
    the text as written (a model that wrote no JSON)."""
    if not text.strip():
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def new_item_ids(kind: ItemKind) -> tuple[str, str | None]:
    """A fresh item id, and a call id for function, custom tool and multi-agent calls."""
    return new_id(_PREFIX[kind]), (new_id("call") if kind in _CALL_KINDS else None)


def completion_to_output_items(
    messages: Sequence[ParsedMessage], tools: RequestTools | None = None
) -> list[ResponseOutputItem]:
    """Output items for whole parsed assistant messages (a message without terminator is incomplete).

    A call to an undeclared function has no item (:class:`ItemKind`).
    """
    items: list[ResponseOutputItem] = []
    for message in messages:
        target = classify(callable_header(message.header, tools), tools)
        if target.kind is ItemKind.UNDECLARED_FUNCTION:
            continue
        item_id, call_id = new_item_ids(target.kind)
        status = "completed" if message.terminator is not None else "incomplete"
        items.append(build_output_item(target, item_id, message.text, status, call_id))
    return items
