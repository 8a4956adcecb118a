"""The tools of a request, as gpt-oss is shown them and as its calls are read back.

A request's typed ``tools`` become :class:`Tool` values (:func:`declare_tools`): functions in Harmony's
``functions`` namespace, ``namespace`` tools beside it, ``custom`` tools declared as a one-string
function, hosted tools nobody runs hidden. What ``tool_choice`` shows and requires of them is decided
once, in ``tool_choice.py``, as one :class:`RequestTools`. The calls allowed (:func:`call_options`,
and :func:`server_call_options` for what the server runs) are the options of the response's
constraint. docs/tools.md#tools-structured-outputs-and-constraints and
the request's ``tools``/``tool_choice`` under "Endpoints".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openai_harmony import ToolNamespaceConfig

from ..core import InvalidRequestError
from ..request import (
    CustomTool,
    FunctionTool,
    HostedTool,
    NamespaceTool,
    RequestTool,
    ToolSearchTool,
    deferred,
)
from .headers import JSON_CONTENT_TYPE, clean_recipient

__all__ = [
    "BUILTIN_CALLS",
    "FUNCTIONS",
    "LOADED_TOOL",
    "TOOL_SEARCH",
    "CallOption",
    "DeclaredTools",
    "GrammarCheck",
    "RequestTools",
    "Tool",
    "call_options",
    "declare_tools",
    "loaded_tools",
    "recipient_candidates",
    "server_call_options",
]

logger = logging.getLogger(__name__)

FUNCTIONS = "functions"
#: The function a client-run ``tool_search`` tool is shown as (``functions.tool_search``).
TOOL_SEARCH = "tool_search"
#: What a ``tool_search`` tool without ``parameters`` takes (Codex's own shape: ``codex-rs`` ``tool_search``).
TOOL_SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Search query for deferred tools."},
        "limit": {"type": "number", "description": "Maximum number of tools to return."},
    },
    "required": ["query"],
    "additionalProperties": False,
}
TOOL_SEARCH_DESCRIPTION = (
    "Searches the tools that were not shown to you upfront and loads the ones that match, so that you can "
    "call them next."
)
#: A conversation's ``calls`` key (``harmony/input_messages.py``) for a tool a ``tool_search_output`` loaded:
#: ``LOADED_TOOL + "NS.NAME"`` → the tool's JSON, so later turns (stored or replayed) can call it.
LOADED_TOOL = "tool_search:"

#: Refuses a custom tool's grammar (syntax, definition, param) with an InvalidRequestError.
GrammarCheck = Callable[[str, str, str], None]


@dataclass(frozen=True, slots=True)
class CallOption:
    """A call the model may make: its recipient, its header, and what its body must be.

    Functions: JSON; ``schema`` is the parameters schema when the tool is strict, else
    None (any JSON object). Custom tools: raw text; ``syntax``/``definition`` a grammar
    (``lark`` or ``regex``), or None (any text).

    The header: ``channel`` and ``content_type`` as gpt-oss writes them for this call
    (``<|channel|>commentary to=functions.f <|constrain|>json``; its built-in tools
    ``<|channel|>analysis to=python code``). ``content_type`` None means the default:
    ``<|constrain|>json`` for JSON bodies, none for raw text.
    """

    recipient: str
    custom: bool
    schema: Mapping[str, Any] | None = None
    syntax: str | None = None
    definition: str | None = None
    parameters: Mapping[str, Any] | None = None  # the declared parameters (strict or not)
    channel: str = "commentary"
    content_type: str | None = None

    @property
    def header_content_type(self) -> str:
        """The content type written in the call's header (``""``: none)."""
        if self.content_type is not None:
            return self.content_type
        return "" if self.custom else JSON_CONTENT_TYPE


#: gpt-oss's built-in tools as calls: the analysis channel, the ``code`` content type; python's body
#: is raw code, the browser's JSON of the parameters Harmony declares for it.
BUILTIN_CALLS: Mapping[str, tuple[CallOption, ...]] = {
    "python": (CallOption("python", custom=True, channel="analysis", content_type="code"),),
    "browser": tuple(
        CallOption(
            f"browser.{tool.name}",
            custom=False,
            parameters=tool.parameters,
            channel="analysis",
            content_type="code",
        )
        for tool in ToolNamespaceConfig.browser().tools
    ),
}


@dataclass(frozen=True, slots=True)
class Tool:
    """One callable tool: a function (JSON arguments) or a custom tool (raw text input)."""

    namespace: str
    name: str
    custom: bool
    description: str
    parameters: dict[str, Any] | None = None  # functions
    strict: bool = False  # functions: strict schema
    syntax: str | None = None  # custom tools with a grammar: "lark" or "regex"
    definition: str | None = None  # ... and the grammar
    search: bool = False  # the client-run tool_search: a call to it is a tool_search_call

    @property
    def recipient(self) -> str:
        """The Harmony recipient of a call to this tool (``functions.get_weather``, ``NS.fn``)."""
        return f"{self.namespace}.{self.name}"


@dataclass(frozen=True)
class RequestTools:
    """The tools shown to the model (after ``tool_choice``), grouped by namespace, and the choice."""

    tools: tuple[Tool, ...] = ()
    namespace_descriptions: Mapping[str, str] = field(default_factory=dict)
    required: bool = False  # the response must end in a call to one of ``tools``
    hidden: tuple[str, ...] = ()  # hosted tool types declared but not shown
    #: Callable but not in the developer message: deferred tools (a client-run tool search finds them) and
    #: tools a ``tool_search_output`` loaded (the model read them there).
    loaded: tuple[Tool, ...] = ()

    def by_recipient(self, recipient: str) -> Tool | None:
        """The shown (or loaded) tool a call to ``recipient`` goes to."""
        for tool in self.tools:
            if tool.recipient == recipient:
                return tool
        for tool in self.loaded:
            if tool.recipient == recipient:
                return tool
        return None

    def resolve(self, recipient: str) -> Tool | None:
        """The shown (or loaded) tool the model meant by ``recipient``, as written or cleaned (None: neither).

        Cleaned: a stray control-token text cut (``exec<|channel|>commentary``), a repeated namespace
        collapsed (``functions.functions.x``), a glued content type dropped (``shelljson``). A bare name
        (``lookup_weather``, as openai/harmony's own ``test_simple_tool_call`` writes it) is the one
        shown tool of that name, if exactly one has it.
        """
        for candidate in recipient_candidates(recipient):
            tool = self.by_recipient(candidate)
            if tool is not None:
                return tool
            if "." not in candidate:
                named = [t for t in (*self.tools, *self.loaded) if t.name == candidate]
                if len(named) == 1:
                    return named[0]
        return None

    @property
    def namespaces(self) -> set[str]:
        """Namespaces with at least one shown tool."""
        return {t.namespace for t in self.tools}

    def render_key(self) -> tuple[Any, ...]:
        """A hashable key of what the developer message shows (for its render cache)."""
        return (
            tuple(
                (t.namespace, t.name, t.custom, t.description, _freeze(t.parameters), t.syntax, t.definition)
                for t in self.tools
            ),
            tuple(sorted((k, v) for k, v in self.namespace_descriptions.items() if k in self.namespaces)),
        )


def recipient_candidates(recipient: str) -> list[str]:
    """``recipient`` and its cleaned forms, most literal first (see :meth:`RequestTools.resolve`)."""
    cleaned = clean_recipient(recipient)
    parts = cleaned.split(".")
    while len(parts) > 2 and parts[0] == parts[1]:
        parts.pop(0)
    collapsed = ".".join(parts)
    candidates = [recipient, cleaned, collapsed]
    for suffix in ("json", "code"):
        if collapsed.lower().endswith(suffix) and len(collapsed) > len(suffix):
            candidates.append(collapsed[: -len(suffix)].rstrip(" ."))
    return list(dict.fromkeys(c for c in candidates if c))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _shown(tool: FunctionTool | CustomTool, where: str, namespace: str, check_grammar: GrammarCheck) -> Tool:
    """A function or custom tool as shown in ``namespace``: a strict schema and a grammar are checked here."""
    if isinstance(tool, CustomTool):
        if tool.syntax is not None and tool.definition is not None:
            check_grammar(tool.syntax, tool.definition, f"{where}.format.definition")
        return Tool(
            namespace, tool.name, True, tool.description, syntax=tool.syntax, definition=tool.definition
        )
    if tool.strict and tool.parameters is not None:
        from .schema import check_strict

        check_strict(tool.parameters, f"{where}.parameters")
    return Tool(namespace, tool.name, False, tool.description, parameters=tool.parameters, strict=tool.strict)


def loaded_tools(calls: Mapping[str, str]) -> tuple[Tool, ...]:
    """The tools ``tool_search_output`` items of a conversation loaded (its ``calls``' :data:`LOADED_TOOL` keys)."""
    out: list[Tool] = []
    for key, value in calls.items():
        if not key.startswith(LOADED_TOOL):
            continue
        namespace, _, name = key[len(LOADED_TOOL) :].rpartition(".")
        data = json.loads(value)
        parameters = data.get("parameters")
        out.append(
            Tool(
                namespace=namespace or FUNCTIONS,
                name=name,
                custom=data.get("type") == "custom",
                description=data.get("description") or "",
                parameters=parameters if isinstance(parameters, dict) else None,
            )
        )
    return tuple(out)


def _search_tool(tool: ToolSearchTool) -> Tool:
    """A client-run ``tool_search`` as the model is shown it: ``functions.tool_search``."""
    return Tool(
        namespace=FUNCTIONS,
        name=TOOL_SEARCH,
        custom=False,
        description=tool.description or TOOL_SEARCH_DESCRIPTION,
        parameters=tool.parameters if tool.parameters is not None else TOOL_SEARCH_PARAMETERS,
        search=True,
    )


@dataclass(frozen=True, slots=True)
class DeclaredTools:
    """A request's tools as gpt-oss is shown them, before ``tool_choice`` narrows them (:func:`declare_tools`)."""

    shown: tuple[Tool, ...]  # functions, custom tools, namespace members, a client-run tool_search, in order
    later: tuple[
        Tool, ...
    ]  # callable, not shown: deferred tools (a client-run search finds them), loaded ones
    descriptions: Mapping[str, str]  # namespace → its description
    hidden: tuple[str, ...]  # hosted tool types declared and not shown


def declare_tools(
    tools: Sequence[RequestTool],
    logged: set[str] | None = None,
    *,
    check_grammar: GrammarCheck,
    loaded: Sequence[Tool] = (),
) -> DeclaredTools:
    """The request's tools as gpt-oss is shown them; raise InvalidRequestError naming the field.

    ``check_grammar(syntax, definition, param)`` refuses a custom tool's grammar that cannot
    become a constraint (``constraints.check_grammar``: grammars belong to the layer above, which
    passes it in); a strict function's schema is checked here (``schema.check_strict``).
    A hosted tool type not shown to the model is logged once per ``logged`` set (the adapter's).
    ``loaded``: tools ``tool_search_output`` items loaded (:func:`loaded_tools`), callable, not shown.

    A client-run ``tool_search`` (``execution: "client"``) is shown as ``functions.tool_search``, and
    deferred tools (``defer_loading: true``) are then callable but not shown: the model finds them with a
    search. With a hosted ``tool_search`` (which this server does not run) deferred tools are shown as any
    other, since nothing else would ever load them (docs/tools.md#tool-search).
    """
    shown: list[Tool] = []
    later: list[Tool] = list(loaded)
    descriptions: dict[str, str] = {}
    hidden: list[str] = []
    searching = any(isinstance(t, ToolSearchTool) and t.execution == "client" for t in tools)
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if isinstance(tool, (FunctionTool, CustomTool)):
            declared = _shown(tool, where, FUNCTIONS, check_grammar)
            (later if searching and deferred(tool) else shown).append(declared)
        elif isinstance(tool, NamespaceTool):
            descriptions[tool.name] = tool.description
            for j, m in enumerate(tool.tools):
                declared = _shown(m, f"{where}.tools[{j}]", tool.name, check_grammar)
                (later if searching and (deferred(tool) or deferred(m)) else shown).append(declared)
        elif isinstance(tool, ToolSearchTool) and tool.execution == "client":
            shown.append(_search_tool(tool))
        elif isinstance(tool, ToolSearchTool):
            hidden.append("tool_search")
            _log_hidden(
                "tool_search",
                logged,
                "A hosted tool_search is not run by this server: deferred tools are shown",
            )
        elif isinstance(tool, HostedTool):
            hidden.append(tool.kind)
            _log_hidden(
                tool.kind,
                logged,
                "Tool type %r is not run by this server: echoed, not shown to the model",
                tool.kind,
            )
        # McpTool: server-run, checked and listed by tools/mcp_request.py, shown as the adapter's namespaces
    seen: set[str] = set()
    for declared in shown:
        if declared.recipient in seen:
            raise InvalidRequestError(f"Tool {declared.recipient!r} is declared twice.", param="tools")
        seen.add(declared.recipient)
    return DeclaredTools(tuple(shown), tuple(later), descriptions, tuple(hidden))


def _log_hidden(kind: str, logged: set[str] | None, message: str, *args: object) -> None:
    """Log ``message % args`` once per ``logged`` set for a hosted tool type ``kind`` not shown."""
    if logged is not None and kind not in logged:
        logged.add(kind)
        logger.info(message, *args)


def call_options(tools: Iterable[Tool]) -> tuple[CallOption, ...]:
    """The calls to the request's own function and custom tools."""
    return tuple(
        CallOption(
            recipient=t.recipient,
            custom=t.custom,
            schema=t.parameters if (t.strict and not t.custom) else None,
            syntax=t.syntax,
            definition=t.definition,
            parameters=t.parameters,
        )
        for t in tools
    )


def server_call_options(
    namespaces: Sequence[Mapping[str, Any]], builtin: Iterable[str] = ()
) -> tuple[CallOption, ...]:
    """The calls the server runs: each listed tool of ``namespaces`` (MCP servers), then ``builtin``'s."""
    options = [
        CallOption(f"{ns['name']}.{tool['name']}", custom=False, parameters=tool.get("parameters"))
        for ns in namespaces
        for tool in ns["tools"]
    ]
    for name in builtin:
        options.extend(BUILTIN_CALLS[name])
    return tuple(options)
