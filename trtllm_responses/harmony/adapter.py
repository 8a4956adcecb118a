"""HarmonyAdapter: a Responses request (plus stored history) → Harmony messages → prompt token ids.

The prompt is::

    system(identity, reasoning effort, date, built-in tool namespaces)
    developer(instructions, function tools)        -- only when there are any
    history messages                               -- stored conversation
    new input messages
    <|start|>assistant

Harmony renders a conversation as the concatenation of its messages' renders.
Chain of thought follows gpt-oss's documented rule: the ``analysis`` messages
that come before the last ``final`` one (finished turns) are dropped; those of a
turn still calling tools are kept until its final. (openai-harmony 0.0.8's
``auto_drop_analysis`` only drops analysis before the *first* final, which keeps
the reasoning of every later turn; we apply the documented rule ourselves.) So each message is rendered
once, its tokens kept with it (:class:`RenderedMessage`), and a prompt is built
by concatenating token lists: continuing a 100k-token conversation costs a copy,
not a re-render. Tests check this equals openai-harmony's full render.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import orjson
from openai_harmony import (
    Message,
    ReasoningEffort,
    RenderOptions,
    Role,
    SystemContent,
    ToolNamespaceConfig,
)

from ..bounded_cache import ByteBoundedCache
from ..constraints import CallOption, Constraint, build_constraint, call_options, parse_text_format
from ..errors import InvalidRequestError
from ..protocol import ResponsesRequest
from .developer import developer_message, developer_spec
from .encoding import HarmonyEncoding
from .input_messages import input_to_messages
from .tools import RequestTools, select_tools, server_call_options

EMPTY_TOOLS = RequestTools()

__all__ = [
    "EMPTY_HISTORY",
    "ConversationHistory",
    "HarmonyAdapter",
    "Prompt",
    "PromptDraft",
    "RenderedMessage",
]

_EFFORTS = {
    "none": ReasoningEffort.LOW,
    "minimal": ReasoningEffort.LOW,
    "low": ReasoningEffort.LOW,
    "medium": ReasoningEffort.MEDIUM,
    "high": ReasoningEffort.HIGH,
    "xhigh": ReasoningEffort.HIGH,
}
_WEB_SEARCH_TOOLS = frozenset(
    {"web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"}
)
_CODE_TOOLS = frozenset({"code_interpreter"})
_HOSTED_CHOICES = _WEB_SEARCH_TOOLS | _CODE_TOOLS
#: Byte budget of the rendered developer messages cache (instructions and tools are client text).
DEVELOPER_CACHE_BYTES = 32 << 20
# A RenderedMessage's own object (4 slots) with headroom for allocator rounding.
_MESSAGE_OVERHEAD = 96
# A ConversationHistory object (4 slots) and its mapping proxy.
_HISTORY_OVERHEAD = 160


@dataclass(frozen=True, slots=True)
class RenderedMessage:
    """A Harmony message, kept compact, and its rendered token ids (rendered once, shared by every prompt).

    Stored conversations hold many of these, so the message is kept as harmony's
    own JSON of it (a pydantic ``Message`` tree costs kilobytes even for a word)
    and the token ids are the encoding's interned ints (a tuple slot each).
    """

    source: str  # harmony's JSON of the message
    tokens: tuple[int, ...]
    is_analysis: bool
    is_final: bool

    @property
    def message(self) -> Message:
        """The harmony Message (rebuilt on demand; nothing on the serving path asks)."""
        return Message.from_dict(json.loads(self.source))

    @property
    def nbytes(self) -> int:
        """Memory this message holds: its slots object, JSON text and token tuple (the ints are shared)."""
        return _MESSAGE_OVERHEAD + sys.getsizeof(self.source) + sys.getsizeof(self.tokens)


@dataclass(frozen=True, slots=True)
class ConversationHistory:
    """The Harmony messages of a conversation so far (no system/developer), immutable.

    ``calls`` maps each function call id in it to its function name, so a
    ``function_call_output`` in a later turn finds its call.
    """

    messages: tuple[RenderedMessage, ...] = ()
    calls: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    nbytes: int = 0  # this history's memory, messages shared with other histories included
    message_bytes: int = 0  # the messages' part of it

    def extended(self, messages: Sequence[RenderedMessage], calls: Mapping[str, str]) -> ConversationHistory:
        """A new history with ``messages`` appended; this one is unchanged.

        ``nbytes`` counts the whole conversation (messages shared with earlier
        histories included) and this history's own containers, so a store adding
        up entries' ``nbytes`` never counts less than what they keep alive.
        """
        merged = dict(self.calls)
        merged.update(calls)
        all_messages = self.messages + tuple(messages)
        message_bytes = self.message_bytes + sum(m.nbytes for m in messages)
        own = sys.getsizeof(all_messages) + sys.getsizeof(merged) + _HISTORY_OVERHEAD
        own += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in merged.items())
        return ConversationHistory(
            messages=all_messages,
            calls=MappingProxyType(merged),
            nbytes=message_bytes + own,
            message_bytes=message_bytes,
        )

    @property
    def num_tokens(self) -> int:
        """Tokens in the history as stored (before analysis is dropped)."""
        return sum(len(m.tokens) for m in self.messages)


EMPTY_HISTORY = ConversationHistory()


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered request: the token ids to generate from, and the conversation they came from."""

    token_ids: list[int]
    system: RenderedMessage
    developer: RenderedMessage | None
    history: ConversationHistory  # history including this request's input
    instructions: str | None  # effective instructions (request + system/developer input messages)
    developer_key: tuple[str | None, str] = (None, "[]")  # (instructions, JSON of tools, tool_choice, text): the cache key
    tools: RequestTools = EMPTY_TOOLS  # the tools shown to the model: how its calls read back
    constraint: Constraint | None = None  # what the output must obey (executors enforce it)

    @property
    def messages(self) -> list[Message]:
        """Every Harmony message of the prompt, in order (analysis included, as stored)."""
        head = [self.system.message] + ([self.developer.message] if self.developer else [])
        return head + [m.message for m in self.history.messages]


@dataclass(frozen=True, slots=True)
class PromptDraft:
    """A prompt before its new messages are rendered: what ``HarmonyAdapter.finish_prompt`` completes.

    ``to_render`` holds the developer message first when it was not cached
    (``renders_developer``), then the request's input messages.
    """

    system: RenderedMessage
    developer: RenderedMessage | None
    developer_key: tuple[str | None, str]
    renders_developer: bool
    to_render: list[Message]
    history: ConversationHistory
    calls: dict[str, str]
    instructions: str | None
    tools: RequestTools = EMPTY_TOOLS
    constraint: Constraint | None = None


def _today() -> str:
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()


class HarmonyAdapter:
    """Builds Harmony prompts from Responses requests, and histories from their outputs.

    Holds no per-request state: one adapter serves every request of a process.
    ``today`` gives the conversation start date (injectable for tests).
    """

    def __init__(
        self,
        encoding: HarmonyEncoding,
        *,
        model_identity: str | None = None,
        today: Callable[[], str] = _today,
        developer_cache_bytes: int = DEVELOPER_CACHE_BYTES,
    ) -> None:
        self.encoding = encoding
        self._model_identity = model_identity
        self._today = today
        self._hidden_logged: set[str] = set()  # hosted tool types already logged as not shown
        self._assistant_start = tuple(encoding.encode("<|start|>assistant"))
        # Keyed by a handful of small values: bounded by count.
        self._render_system = lru_cache(maxsize=64)(self._render_system_uncached)
        # Keyed by client text (instructions, tools): bounded by bytes, filled only by accepted prompts.
        self._developers: ByteBoundedCache[RenderedMessage] = ByteBoundedCache(developer_cache_bytes)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """What generation must stop at: Harmony's assistant-action stops."""
        return self.encoding.assistant_action_stops

    # -- rendering -------------------------------------------------------------------------

    def render_message(self, message: Message) -> RenderedMessage:
        """Render one message (developer, user, assistant or tool) in this thread."""
        return self.rendered(message, self.encoding.render(message))

    def rendered(self, message: Message, tokens: Sequence[int]) -> RenderedMessage:
        """The RenderedMessage of ``message``, whose render (done here or elsewhere) is ``tokens``."""
        is_assistant = message.author.role == Role.ASSISTANT and not message.recipient
        return RenderedMessage(
            source=message.to_json(),
            tokens=self.encoding.intern(tokens),
            is_analysis=message.author.role == Role.ASSISTANT and message.channel == "analysis",
            is_final=is_assistant and message.channel == "final",
        )

    def render_messages(self, messages: Iterable[Message]) -> list[RenderedMessage]:
        """Render several conversation messages."""
        return [self.render_message(m) for m in messages]

    def _render_system_uncached(
        self, effort: ReasoningEffort, date: str, browser: bool | str, python: bool | str, has_functions: bool
    ) -> RenderedMessage:
        """``browser``/``python``: True for Harmony's default tool text, a string for the server's own."""
        content = SystemContent.new().with_reasoning_effort(effort).with_conversation_start_date(date)
        if self._model_identity:
            content = content.with_model_identity(self._model_identity)
        if isinstance(browser, str):
            config = ToolNamespaceConfig.browser()
            config.description = browser
            content = content.with_tools(config)
        elif browser:
            content = content.with_browser_tool()
        if isinstance(python, str):
            content = content.with_tools(ToolNamespaceConfig(name="python", description=python, tools=[]))
        elif python:
            content = content.with_python_tool()
        message = Message.from_role_and_content(Role.SYSTEM, content)
        tokens = self.encoding.harmony.render(
            message, RenderOptions(conversation_has_function_tools=has_functions)
        )
        return RenderedMessage(message.to_json(), self.encoding.intern(tokens), False, False)

    # -- requests --------------------------------------------------------------------------

    def build_prompt(
        self,
        request: ResponsesRequest,
        history: ConversationHistory = EMPTY_HISTORY,
        namespaces: Sequence[Mapping[str, Any]] = (),
        builtin: Mapping[str, str] | None = None,
    ) -> Prompt:
        """Render ``request`` continuing ``history``; raise InvalidRequestError for bad input.

        Instructions, tools and reasoning effort come from ``request`` alone;
        ``history`` contributes its messages and its function call ids. Renders in
        this thread and admits the prompt's developer message into the cache: for
        callers that use every prompt they build (the server drafts, renders where
        it chooses, and admits only accepted prompts).
        """
        draft = self.draft_prompt(request, history, namespaces, builtin)
        prompt = self.finish_prompt(draft, self.render_messages(draft.to_render))
        self.admit(prompt)
        return prompt

    def draft_prompt(
        self,
        request: ResponsesRequest,
        history: ConversationHistory = EMPTY_HISTORY,
        namespaces: Sequence[Mapping[str, Any]] = (),
        builtin: Mapping[str, str] | None = None,
    ) -> PromptDraft:
        """Everything of the prompt but the rendering of its new messages (``draft.to_render``).

        ``namespaces`` are the server-run tool namespaces (``{"name", "description",
        "tools"}``, e.g. listed MCP servers), shown after the function tools.
        ``builtin``, when given, is what the server runs of gpt-oss's built-in tools
        (``{"browser"|"python": instruction text}``): a declared built-in tool is shown
        only when it is there, with that text (None: the server runs none, so none is shown).

        Checks the request's input and tools (InvalidRequestError); cheap: harmony
        tokenizes nothing here except the small, cached system message.
        """
        converted = input_to_messages(request.input, history.calls)
        choice = request.tool_choice
        # Built-in tools (browser, python) are shown only when the server runs them (``builtin``).
        declared = {str(t.get("type")) for t in request.tools}
        browser: bool | str = False
        python: bool | str = False
        if builtin is not None:
            browser = builtin.get("browser", False) if declared & _WEB_SEARCH_TOOLS else False
            python = builtin.get("python", False) if declared & _CODE_TOOLS else False
        tools = select_tools(
            request.tools, choice, self._hidden_logged, server_tools=bool(namespaces or browser or python)
        )
        response_format = parse_text_format(request.text)
        effort = (
            _EFFORTS[request.reasoning.effort]
            if request.reasoning and request.reasoning.effort
            else ReasoningEffort.MEDIUM
        )
        kind = choice.get("type") if isinstance(choice, Mapping) else choice
        if kind == "mcp":
            assert isinstance(choice, Mapping)
            tools = RequestTools((), tools.namespace_descriptions, False, tools.hidden)
            namespaces = _chosen_namespace(choice, namespaces)
        elif kind == "none":
            namespaces = ()
            browser = python = False
        elif kind in _HOSTED_CHOICES:  # a built-in tool chosen: shown alone, if the server runs it
            if kind in _CODE_TOOLS:
                browser = False
            else:
                python = False
            if not (browser or python):
                tool_types = _CODE_TOOLS if kind in _CODE_TOOLS else _WEB_SEARCH_TOOLS
                reason = (
                    "this server does not run it (the operator left "
                    + ("--python_tool" if kind in _CODE_TOOLS else "--browser_backend")
                    + " off)"
                    if declared & tool_types
                    else "'tools' does not declare it"
                )
                raise InvalidRequestError(
                    f"tool_choice names {kind!r}, but {reason}: a call to it cannot be forced.", param="tool_choice"
                )
            tools = RequestTools((), tools.namespace_descriptions, False, tools.hidden)
            namespaces = ()
        builtins = [name for name, shown in (("python", python), ("browser", browser)) if shown]
        calls = call_options(tools.tools) + server_call_options(namespaces, builtins)
        required = _required_calls(choice, tools, calls, namespaces, builtins)
        system = self._render_system(effort, self._today(), browser, python, bool(tools.tools or namespaces))

        parts = [request.instructions] if request.instructions else []
        parts.extend(converted.instructions)
        instructions = "\n\n".join(parts) if parts else None
        # The request's own tools, choice and format, and the server-run namespaces, determine the rest of
        # the message: their JSON is the key (cheap); the spec (schemas rewritten) is built only on a miss.
        developer_key = (
            instructions,
            orjson.dumps([request.tools, request.tool_choice, request.text, list(namespaces)]).decode(),
        )
        developer = self._developers.get(developer_key)
        to_render = list(converted.messages)
        if developer is None:
            spec = developer_spec(instructions, tools, response_format, namespaces)
            message = developer_message(spec, self.encoding)
            if message is not None:
                to_render.insert(0, message)
        return PromptDraft(
            system=system,
            developer=developer,
            developer_key=developer_key,
            renders_developer=developer is None and len(to_render) > len(converted.messages),
            to_render=to_render,
            history=history,
            calls=converted.calls,
            instructions=instructions,
            tools=tools,
            constraint=build_constraint(calls, required, response_format),
        )

    def finish_prompt(self, draft: PromptDraft, rendered: Sequence[RenderedMessage]) -> Prompt:
        """The prompt, from its draft and the renders of ``draft.to_render`` (in order)."""
        developer = draft.developer
        if draft.renders_developer:
            developer, rendered = rendered[0], rendered[1:]
        full_history = draft.history.extended(rendered, draft.calls)
        tokens = list(draft.system.tokens)
        if developer is not None:
            tokens += developer.tokens
        tokens += self.conversation_tokens(full_history.messages)
        tokens += self._assistant_start
        return Prompt(
            token_ids=tokens,
            system=draft.system,
            developer=developer,
            history=full_history,
            instructions=draft.instructions,
            developer_key=draft.developer_key,
            tools=draft.tools,
            constraint=draft.constraint,
        )

    def admit(self, prompt: Prompt) -> None:
        """Cache the prompt's developer message for the requests that repeat its instructions and tools."""
        developer = prompt.developer
        if developer is not None and self._developers.get(prompt.developer_key) is None:
            instructions, functions_json = prompt.developer_key
            key_bytes = sys.getsizeof(instructions) + sys.getsizeof(functions_json)
            self._developers.admit(prompt.developer_key, developer, developer.nbytes + key_bytes)

    @staticmethod
    def conversation_tokens(messages: Sequence[RenderedMessage]) -> list[int]:
        """Concatenate message tokens, dropping analysis before the last final (Harmony's rule)."""
        last_final = -1
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].is_final:
                last_final = i
                break
        out: list[int] = []
        for i, m in enumerate(messages):
            if m.is_analysis and i < last_final:
                continue
            out += m.tokens
        return out

    def extend_prompt(self, token_ids: Sequence[int], messages: Sequence[RenderedMessage]) -> list[int]:
        """The prompt of the next generation in a response: ``token_ids`` (a prompt) plus ``messages``.

        For the in-response tool loop: the model's messages of the last turn and
        the tool's output, none of them a ``final``, so no analysis is dropped and
        the result is exactly what ``build_prompt`` renders for the same
        conversation (O(new tokens) to render; a prefix extension of ``token_ids``).
        """
        if any(m.is_final for m in messages):
            raise ValueError("extend_prompt() takes no final message (it would drop earlier analysis)")
        start = self._assistant_start
        if tuple(token_ids[-len(start) :]) != start:
            raise ValueError("a prompt ends with <|start|>assistant")
        out = list(token_ids[: -len(start)])
        for m in messages:
            out += m.tokens
        out += start
        return out

    def prompt_with(self, prompt: Prompt, messages: Sequence[RenderedMessage]) -> list[int]:
        """The token ids of ``prompt`` continued by ``messages`` (rendered in full: Harmony's analysis rule applied)."""
        tokens = list(prompt.system.tokens)
        if prompt.developer is not None:
            tokens += prompt.developer.tokens
        tokens += self.conversation_tokens(prompt.history.messages + tuple(messages))
        tokens += self._assistant_start
        return tokens

    def continue_history(
        self, prompt: Prompt, output_items: Sequence[Mapping[str, Any]]
    ) -> ConversationHistory:
        """The history after this turn: the prompt's history plus the model's output items.

        Output items go through the same conversion as input items, so a stored
        continuation and a stateless replay of the same items render alike.
        """
        converted = input_to_messages(output_items, prompt.history.calls, param="output")
        return prompt.history.extended(self.render_messages(converted.messages), converted.calls)


def _required_calls(
    choice: str | Mapping[str, Any],
    tools: RequestTools,
    calls: tuple[CallOption, ...],
    namespaces: Sequence[Mapping[str, Any]],
    builtins: Sequence[str],
) -> tuple[CallOption, ...] | None:
    """The calls one of which ``tool_choice`` requires (None: no call is required).

    ``calls`` are every call shown (the request's tools, then the server-run ones);
    ``tools``, ``namespaces`` and ``builtins`` are already narrowed by the choice.
    """
    kind = choice.get("type") if isinstance(choice, Mapping) else choice
    if kind in ("mcp", *_HOSTED_CHOICES):  # shown alone: every call shown is the chosen tool's
        return calls
    if not tools.required:
        return None
    if kind == "required":
        required = calls
    elif kind == "allowed_tools":
        assert isinstance(choice, Mapping)
        allowed = [t for t in choice.get("tools") or [] if isinstance(t, Mapping)]
        labels = {t.get("server_label") for t in allowed if t.get("type") == "mcp"}
        chosen = [ns for ns in namespaces if ns["name"] in labels]
        required = call_options(tools.tools) + server_call_options(chosen, builtins)
    else:  # a named function or custom tool
        required = call_options(tools.tools)
    if not required:
        raise InvalidRequestError(
            "tool_choice requires a call, but none of the tools it allows is declared or run by this server.",
            param="tool_choice",
        )
    return required


def _chosen_namespace(
    choice: Mapping[str, Any], namespaces: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """``tool_choice: {"type": "mcp", "server_label", "name"?}`` shows the model only that server (or tool)."""
    label, name = choice.get("server_label"), choice.get("name")
    chosen = [ns for ns in namespaces if ns["name"] == label]
    if not chosen:
        raise InvalidRequestError(
            f"tool_choice names MCP server {label!r}, which has no listed tools here.",
            param="tool_choice.server_label",
        )
    if name is not None:
        chosen = [{**ns, "tools": [t for t in ns["tools"] if t["name"] == name]} for ns in chosen]
        if not chosen[0]["tools"]:
            raise InvalidRequestError(
                f"tool_choice names tool {name!r}, which MCP server {label!r} does not list.",
                param="tool_choice.name",
            )
    return chosen

