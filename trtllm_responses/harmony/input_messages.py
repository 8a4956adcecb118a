"""Typed input items (``request/items.py``) → Harmony messages (``input_to_messages``).

Every input form the Responses API allows for a text model becomes Harmony messages;
``system``/``developer`` messages become instructions (never a second system message);
``function_call_output`` finds its call by ``call_id`` in the history or earlier in the
same input; one without a ``call_id`` but with a ``name`` (and ``namespace``) is output its tool
gives unasked, read by the model from ``NAMESPACE.NAME`` (``functions.NAME`` without a namespace).

Output items sent back as input convert to the same messages the server stores, so a
stateless replay renders the same tokens as a stored continuation (the server's tool loop
and its store use this same converter for the model's own output). MCP items
(``mcp_list_tools``, ``mcp_approval_request``) also leave entries in the conversation's
``calls`` map under keys no call id can take (``mcp_list_tools:LABEL`` → the listed tools'
JSON, ``mcpr_…`` → the pending call's JSON), so a later turn finds them whether the
conversation was stored or replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import orjson
from openai_harmony import Author, Message, Role, TextContent

from ..core import InvalidRequestError
from ..request import (
    MULTI_AGENT_NAMESPACE,
    ROOT_AGENT,
    AgentMessage,
    CodeInterpreterCall,
    ConfigurationUpdate,
    CustomToolCall,
    CustomToolCallOutput,
    FunctionCall,
    FunctionCallOutput,
    InputItem,
    McpApprovalRequest,
    McpApprovalResponse,
    McpCall,
    McpListTools,
    MultiAgentCall,
    MultiAgentCallOutput,
    Reasoning,
    ReasoningEffort,
    ToolSearchCall,
    ToolSearchOutput,
    WebSearchCall,
    not_convertible,
    parse_items,
    parse_text_update,
)
from ..request import Message as MessageItem
from .headers import JSON_CONTENT_TYPE
from .items import FUNCTIONS_NAMESPACE
from .tools import LOADED_TOOL, TOOL_SEARCH

__all__ = [
    "BROWSER_PAGE",
    "BROWSER_PAGES",
    "CONFIG_EFFORT",
    "CONFIG_TEXT",
    "DECLINED_OUTPUT",
    "MODEL_READ",
    "TOOL_OUTPUT_PLACEHOLDER",
    "ConvertedInput",
    "convert_item",
    "function_call_message",
    "input_to_messages",
    "items_to_messages",
    "list_tools_key",
    "mcp_call_message",
    "mcp_output_text",
    "tool_output_message",
    "tool_search_found",
]

_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
_NON_TEXT_PARTS = ("input_image", "input_file", "input_audio", "image_url", "file")
#: What the model reads in place of an image or file a tool returned (a 400 would break every
#: later turn of a session that replays its history).
TOOL_OUTPUT_PLACEHOLDER = "[{kind} omitted: this model reads text only]"
#: The field of a stored web_search_call item holding the page the browser showed the model
#: (not an SDK field: stored items carry it, clients never see it).
MODEL_READ = "model_read"
#: The field of a stored web_search_call item holding the page it pushed on the browser's page stack;
#: the conversation's ``calls`` keep them as ``browser_page:N`` (and their count as ``browser_pages``),
#: so the page stack (and its cursors) lives on through ``previous_response_id``.
BROWSER_PAGE = "browser_page"
BROWSER_PAGES = "browser_pages"


@dataclass
class ConvertedInput:
    """Harmony messages for a request's input, and what else the input said."""

    messages: list[Message] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    calls: dict[str, str] = field(
        default_factory=dict
    )  # call_id → recipient (functions.NAME), new in this input


def _require_str(item: Mapping[str, Any], key: str, param: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise InvalidRequestError(f"'{param}.{key}' must be a string.", param=f"{param}.{key}")
    return value


def _text_of_parts(parts: Any, param: str, tool_output: bool = False) -> list[str]:
    """Texts of a content list; non-text parts are refused (gpt-oss is text-only).

    In a tool's output (``tool_output``) an image or file becomes a placeholder the model
    can read instead: clients replay tool outputs in every later turn.
    """
    if isinstance(parts, str):
        return [parts]
    if not isinstance(parts, list):
        raise InvalidRequestError(f"'{param}' must be a string or a list of content parts.", param=param)
    texts: list[str] = []
    for j, part in enumerate(parts):
        where = f"{param}[{j}]"
        if not isinstance(part, dict):
            raise InvalidRequestError(f"'{where}' must be an object.", param=where)
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            texts.append(_require_str(part, "text", where))
        elif kind == "refusal":
            texts.append(_require_str(part, "refusal", where))
        elif kind in _NON_TEXT_PARTS and tool_output:
            texts.append(TOOL_OUTPUT_PLACEHOLDER.format(kind="image" if "image" in kind else "file"))
        elif kind in _NON_TEXT_PARTS:
            raise InvalidRequestError(
                f"'{where}' is {kind}, but gpt-oss only reads text; send input_text parts instead.",
                param=where,
                code="unsupported_content_type",
            )
        else:
            raise InvalidRequestError(
                f"Unknown content part type {kind!r} at '{where}.type'.", param=f"{where}.type"
            )
    return texts


def _text_message(role: Role, texts: Sequence[str]) -> Message:
    return Message.from_role_and_contents(role, [TextContent(text=t) for t in texts])


def function_call_message(name: str, arguments: str, namespace: str | None = None) -> Message:
    """The Harmony message of a function call: commentary to ``functions.NAME`` (or ``NS.NAME``), JSON body."""
    return (
        Message.from_role_and_content(Role.ASSISTANT, arguments)
        .with_channel("commentary")
        .with_recipient(f"{namespace or FUNCTIONS_NAMESPACE}.{name}")
        .with_content_type(JSON_CONTENT_TYPE)
    )


def custom_tool_call_message(recipient: str, text: str) -> Message:
    """The Harmony message of a custom (freeform) tool call: commentary to its recipient, raw body."""
    return (
        Message.from_role_and_content(Role.ASSISTANT, text)
        .with_channel("commentary")
        .with_recipient(recipient)
    )


def tool_output_message(tool: str, output: str) -> Message:
    """The Harmony message carrying a tool's output back to the assistant."""
    return (
        Message.from_author_and_content(Author.new(Role.TOOL, tool), output)
        .with_recipient("assistant")
        .with_channel("commentary")
    )


def input_to_messages(
    input: str | Sequence[InputItem],
    known_calls: Mapping[str, str],
    param: str = "input",
) -> ConvertedInput:
    """Convert a request's typed ``input`` into Harmony messages; raise InvalidRequestError naming the field.

    ``known_calls`` maps the call ids of the conversation so far to function names.
    """
    out = ConvertedInput()
    if isinstance(input, str):
        out.messages.append(_text_message(Role.USER, [input]))
        return out
    for i, item in enumerate(input):
        convert_item(item, f"{param}[{i}]", known_calls, out)
    return out


def convert_item(item: InputItem, where: str, known_calls: Mapping[str, str], out: ConvertedInput) -> None:
    """Convert one typed input item (at ``where``) into ``out``: its messages, calls and instructions."""
    converter = _INPUT_CONVERTERS.get(type(item))
    if converter is None:
        raise not_convertible(item, where)
    agent = item.data.get("agent")
    if agent is not None and _other_agent(agent, where):
        return  # a sub-agent's item (beta multi-agent): its own conversation's, not this one's
    converter(item.data, where, known_calls, out)


def _other_agent(agent: Any, where: str) -> bool:
    """Whether an item's ``agent`` names an agent other than the root (the beta multi-agent surface)."""
    name = agent.get("agent_name") if isinstance(agent, Mapping) else None
    if not isinstance(name, str):
        raise InvalidRequestError(
            f"'{where}.agent.agent_name' must be a string.", param=f"{where}.agent.agent_name"
        )
    return name != ROOT_AGENT


def items_to_messages(items: Sequence[Any], known_calls: Mapping[str, str], param: str) -> ConvertedInput:
    """:func:`input_to_messages` of items as JSON (a response's output, a conversation's items), typed first."""
    return input_to_messages(parse_items(items, param), known_calls, param)


def _convert_message(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    role = item.get("role")
    if "content" not in item:
        raise InvalidRequestError(f"'{where}.content' is required.", param=f"{where}.content")
    texts = _text_of_parts(item["content"], f"{where}.content")
    if role in ("system", "developer"):
        out.instructions.append("".join(texts))
    elif role == "user":
        out.messages.append(_text_message(Role.USER, texts))
    elif role == "assistant":
        channel = "commentary" if item.get("phase") == "commentary" else "final"
        out.messages.append(_text_message(Role.ASSISTANT, texts).with_channel(channel))
    else:
        raise InvalidRequestError(
            f"'{where}.role' must be one of user, assistant, system, developer; got {role!r}.",
            param=f"{where}.role",
        )


def _convert_function_call(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    call_id = _require_str(item, "call_id", where)
    name = _require_str(item, "name", where)
    arguments = _require_str(item, "arguments", where)
    namespace = _optional_namespace(item, where)
    out.calls[call_id] = f"{namespace or FUNCTIONS_NAMESPACE}.{name}"
    out.messages.append(function_call_message(name, arguments, namespace))


def _optional_namespace(item: Mapping[str, Any], where: str) -> str | None:
    namespace = item.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        raise InvalidRequestError(
            f"'{where}.namespace' must be a non-empty string.", param=f"{where}.namespace"
        )
    return namespace


def _convert_custom_tool_call(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    call_id = _require_str(item, "call_id", where)
    name = _require_str(item, "name", where)
    text = _require_str(item, "input", where)
    recipient = f"{_optional_namespace(item, where) or FUNCTIONS_NAMESPACE}.{name}"
    out.calls[call_id] = recipient
    out.messages.append(custom_tool_call_message(recipient, text))


def _convert_custom_tool_call_output(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    _convert_function_call_output(item, where, calls, out, custom=True)


def _convert_function_call_output(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput, custom: bool = False
) -> None:
    if item.get("call_id") is None and not custom and "name" in item:
        # No call: output a tool gives the model by itself (Codex's goals send
        # {"name": "goal_objective", "namespace": "agent", "output": ...}); it reads it from NAMESPACE.NAME.
        name = _require_str(item, "name", where)
        tool = f"{_optional_namespace(item, where) or FUNCTIONS_NAMESPACE}.{name}"
        texts = _text_of_parts(item.get("output"), f"{where}.output", tool_output=True)
        out.messages.append(tool_output_message(tool, "".join(texts)))
        return
    call_id = _require_str(item, "call_id", where)
    recipient = out.calls.get(call_id) or calls.get(call_id)
    if recipient is None:
        kind = "custom tool call" if custom else "function call"
        raise InvalidRequestError(
            f"No tool call found for {kind} output with call_id {call_id!r}.",
            param=f"{where}.call_id",
        )
    output = item.get("output")
    texts = _text_of_parts(output, f"{where}.output", tool_output=True)
    out.messages.append(tool_output_message(recipient, "".join(texts)))


def _convert_reasoning(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    content = item.get("content") or []
    texts = _text_of_parts(content, f"{where}.content")
    if not texts:
        summary = item.get("summary") or []
        texts = ["\n\n".join(_text_of_parts(summary, f"{where}.summary"))] if summary else []
    text = "".join(texts)
    if text:
        out.messages.append(_text_message(Role.ASSISTANT, [text]).with_channel("analysis"))


def _convert_web_search_call(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    action = item.get("action") or {}
    if not isinstance(action, Mapping):
        raise InvalidRequestError(f"'{where}.action' must be an object.", param=f"{where}.action")
    kind = action.get("type", "search")
    if kind == "open_page":
        name, args = "open", {"url": action.get("url")}
    elif kind == "find_in_page":
        name, args = "find", {"pattern": action.get("pattern"), "url": action.get("url")}
    else:
        name, args = "search", {"query": action.get("query")}
    body = orjson.dumps({k: v for k, v in args.items() if v is not None}).decode()
    out.messages.append(
        Message.from_role_and_content(Role.ASSISTANT, body)
        .with_channel("analysis")
        .with_recipient(f"browser.{name}")
        .with_content_type("code")
    )
    read = item.get(MODEL_READ)
    if isinstance(read, str):  # a call the server ran: what the browser showed the model
        out.messages.append(tool_output_message(f"browser.{name}", read))
    page = item.get(BROWSER_PAGE)
    if isinstance(page, Mapping):  # the page it pushed: the next page of the conversation's stack
        count = out.calls.get(BROWSER_PAGES) or calls.get(BROWSER_PAGES) or "0"
        out.calls[f"browser_page:{count}"] = orjson.dumps(page).decode()
        out.calls[BROWSER_PAGES] = str(int(count) + 1)


def _convert_code_interpreter_call(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    code = item.get("code") or ""
    if not isinstance(code, str):
        raise InvalidRequestError(f"'{where}.code' must be a string.", param=f"{where}.code")
    out.messages.append(
        Message.from_role_and_content(Role.ASSISTANT, code)
        .with_channel("analysis")
        .with_recipient("python")
        .with_content_type("code")
    )
    outputs = item.get("outputs")
    if isinstance(outputs, list):  # a call the server ran: its logs are what python answered
        logs = [o.get("logs") for o in outputs if isinstance(o, Mapping) and o.get("type") == "logs"]
        out.messages.append(tool_output_message("python", "".join(t for t in logs if isinstance(t, str))))


def mcp_call_message(recipient: str, arguments: str) -> Message:
    """The Harmony message of a call to an MCP tool: commentary to ``LABEL.TOOL``, JSON body."""
    return (
        Message.from_role_and_content(Role.ASSISTANT, arguments)
        .with_channel("commentary")
        .with_recipient(recipient)
        .with_content_type(JSON_CONTENT_TYPE)
    )


def mcp_output_text(item: Mapping[str, Any]) -> str | None:
    """What the model read for an ``mcp_call``: its output, or its error as text (None: not run)."""
    output = item.get("output")
    if isinstance(output, str):
        return output
    error = item.get("error")
    if isinstance(error, str):
        return f"Error: {error}"
    if isinstance(error, Mapping):
        if error.get("type") == "mcp_tool_execution_error":
            content = error.get("content")
            if isinstance(content, list):
                texts = [c.get("text", "") for c in content if isinstance(c, Mapping)]
                return "Error: " + "".join(t for t in texts if isinstance(t, str))
            return f"Error: {content}"
        return f"Error: {error.get('message', '')}"
    return None


def list_tools_key(server_label: str) -> str:
    """The ``calls`` key under which a conversation keeps an MCP server's listed tools."""
    return f"mcp_list_tools:{server_label}"


def _convert_mcp_call(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    server = _require_str(item, "server_label", where)
    name = _require_str(item, "name", where)
    arguments = _require_str(item, "arguments", where)
    recipient = f"{server}.{name}"
    if not item.get("approval_request_id"):  # an approved call was rendered by its approval request
        out.messages.append(mcp_call_message(recipient, arguments))
    output = mcp_output_text(item)
    if output is not None:
        out.messages.append(tool_output_message(recipient, output))


def _convert_mcp_list_tools(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    server = _require_str(item, "server_label", where)
    tools = item.get("tools")
    if not isinstance(tools, list):
        raise InvalidRequestError(f"'{where}.tools' must be a list.", param=f"{where}.tools")
    if item.get("error") is None:
        out.calls[list_tools_key(server)] = orjson.dumps(tools).decode()


def _convert_mcp_approval_request(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    request_id = _require_str(item, "id", where)
    server = _require_str(item, "server_label", where)
    name = _require_str(item, "name", where)
    arguments = _require_str(item, "arguments", where)
    out.calls[request_id] = orjson.dumps(
        {"server_label": server, "name": name, "arguments": arguments}
    ).decode()
    out.messages.append(mcp_call_message(f"{server}.{name}", arguments))


#: What the model reads when a call it asked for was not approved.
DECLINED_OUTPUT = "Error: the user did not approve this tool call."


def _convert_mcp_approval_response(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    request_id = _require_str(item, "approval_request_id", where)
    approve = item.get("approve")
    if not isinstance(approve, bool):
        raise InvalidRequestError(f"'{where}.approve' must be a boolean.", param=f"{where}.approve")
    pending = out.calls.get(request_id) or calls.get(request_id)
    if pending is None:
        raise InvalidRequestError(
            f"No mcp_approval_request with id {request_id!r} in this conversation.",
            param=f"{where}.approval_request_id",
        )
    if not approve:  # an approved call runs in the response (its mcp_call item carries the output)
        call = orjson.loads(pending)
        out.messages.append(tool_output_message(f"{call['server_label']}.{call['name']}", DECLINED_OUTPUT))


#: Keys of the conversation's ``calls`` map under which ``configuration_update`` items leave their settings
#: (no call id can take them): they live on through ``previous_response_id`` and conversations.
CONFIG_EFFORT = "configuration:reasoning.effort"
CONFIG_TEXT = "configuration:text"
_EFFORTS = get_args(ReasoningEffort)


def _convert_configuration_update(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    """Settings for this response and the ones after it, until a later update replaces them (no message)."""
    reasoning, text = item.get("reasoning"), item.get("text")
    if reasoning is None and text is None:
        raise InvalidRequestError(
            f"'{where}' must set 'reasoning', 'text' or both.", param=where, code="missing_required_parameter"
        )
    if reasoning is not None:
        if not isinstance(reasoning, Mapping):
            raise InvalidRequestError(f"'{where}.reasoning' must be an object.", param=f"{where}.reasoning")
        effort = reasoning.get("effort")
        if effort is not None and effort not in _EFFORTS:
            raise InvalidRequestError(
                f"'{where}.reasoning.effort' must be one of {', '.join(_EFFORTS)}; got {effort!r}.",
                param=f"{where}.reasoning.effort",
            )
        if effort is not None:
            out.calls[CONFIG_EFFORT] = effort
    if text is not None:
        out.calls[CONFIG_TEXT] = orjson.dumps(parse_text_update(text, where).data).decode()


def _convert_multi_agent_call(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    """The root's call to a multi-agent action: commentary to ``multi_agent.ACTION``, JSON body."""
    action = _require_str(item, "action", where)
    call_id = _require_str(item, "call_id", where)
    recipient = f"{MULTI_AGENT_NAMESPACE}.{action}"
    out.calls[call_id] = recipient
    out.messages.append(mcp_call_message(recipient, _require_str(item, "arguments", where)))


def _convert_multi_agent_call_output(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    """What a multi-agent action returned, read by the model from ``multi_agent.ACTION``."""
    action = _require_str(item, "action", where)
    _require_str(item, "call_id", where)
    texts = _text_of_parts(item.get("output"), f"{where}.output", tool_output=True)
    out.messages.append(tool_output_message(f"{MULTI_AGENT_NAMESPACE}.{action}", "".join(texts)))


def _convert_agent_message(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    """A message between agents: the client's view of the routing (the model read it through its calls)."""
    _require_str(item, "author", where)
    _require_str(item, "recipient", where)


_SEARCH_RECIPIENT = f"{FUNCTIONS_NAMESPACE}.{TOOL_SEARCH}"
_LOADABLE = ("function", "custom")


def _convert_tool_search_call(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    """The model's call to ``functions.tool_search`` with its arguments (an object; a string as written)."""
    call_id = item.get("call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise InvalidRequestError(f"'{where}.call_id' must be a string.", param=f"{where}.call_id")
    if "arguments" not in item:
        raise InvalidRequestError(f"'{where}.arguments' is required.", param=f"{where}.arguments")
    arguments = item["arguments"]
    text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    if call_id:
        out.calls[call_id] = _SEARCH_RECIPIENT
    out.messages.append(function_call_message(TOOL_SEARCH, text))


def _loadable(tool: Any, where: str) -> bool:
    """Whether ``tool`` (at ``where``) is a function or custom tool with a name; other kinds are not callable."""
    if not isinstance(tool, Mapping):
        raise InvalidRequestError(f"'{where}' must be an object.", param=where)
    if tool.get("type") not in _LOADABLE:
        return False
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise InvalidRequestError(f"'{where}.name' must be a non-empty string.", param=f"{where}.name")
    return True


def tool_search_found(tools: Any, where: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(recipient, tool) of each function and custom tool a ``tool_search_output``'s ``tools`` loads, namespaces
    opened (``NS.NAME``; ``functions.NAME`` for one outside a namespace); other tool kinds are skipped."""
    if not isinstance(tools, list):
        raise InvalidRequestError(f"'{where}' must be a list of tools.", param=where)
    found: list[tuple[str, Mapping[str, Any]]] = []
    for j, tool in enumerate(tools):
        at = f"{where}[{j}]"
        if isinstance(tool, Mapping) and tool.get("type") == "namespace":
            name = _require_str(tool, "name", at)
            members = tool.get("tools")
            if not isinstance(members, list):
                raise InvalidRequestError(f"'{at}.tools' must be a list.", param=f"{at}.tools")
            found.extend(
                (f"{name}.{m['name']}", m) for k, m in enumerate(members) if _loadable(m, f"{at}.tools[{k}]")
            )
        elif _loadable(tool, at):
            found.append((f"{FUNCTIONS_NAMESPACE}.{tool['name']}", tool))
    return found


def _convert_tool_search_output(
    item: Mapping[str, Any], where: str, calls: Mapping[str, str], out: ConvertedInput
) -> None:
    """What a tool search found, read by the model as JSON from ``functions.tool_search`` (docs/tools.md#tool-search);
    each tool it loaded is kept in the conversation's ``calls`` (:data:`LOADED_TOOL`), callable from now on."""
    loaded = []
    for recipient, tool in tool_search_found(item.get("tools"), f"{where}.tools"):
        entry: dict[str, Any] = {"call": recipient, "description": tool.get("description") or ""}
        if tool.get("type") == "custom":
            entry["input"] = "freeform text"
        else:
            entry["parameters"] = tool.get("parameters") or {"type": "object"}
        loaded.append(entry)
        kept = {k: tool[k] for k in ("type", "description", "parameters") if k in tool}
        out.calls[LOADED_TOOL + recipient] = orjson.dumps(kept).decode()
    out.messages.append(
        tool_output_message(_SEARCH_RECIPIENT, orjson.dumps({"loaded_tools": loaded}).decode())
    )


_Converter = Callable[[Mapping[str, Any], str, Mapping[str, str], ConvertedInput], None]
_INPUT_CONVERTERS: dict[type[InputItem], _Converter] = {
    ConfigurationUpdate: _convert_configuration_update,
    MessageItem: _convert_message,
    FunctionCall: _convert_function_call,
    FunctionCallOutput: _convert_function_call_output,
    CustomToolCall: _convert_custom_tool_call,
    CustomToolCallOutput: _convert_custom_tool_call_output,
    Reasoning: _convert_reasoning,
    WebSearchCall: _convert_web_search_call,
    CodeInterpreterCall: _convert_code_interpreter_call,
    McpCall: _convert_mcp_call,
    McpListTools: _convert_mcp_list_tools,
    McpApprovalRequest: _convert_mcp_approval_request,
    McpApprovalResponse: _convert_mcp_approval_response,
    MultiAgentCall: _convert_multi_agent_call,
    MultiAgentCallOutput: _convert_multi_agent_call_output,
    AgentMessage: _convert_agent_message,
    ToolSearchCall: _convert_tool_search_call,
    ToolSearchOutput: _convert_tool_search_output,
}
