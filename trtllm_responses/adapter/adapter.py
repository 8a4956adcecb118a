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
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson
from openai_harmony import (
    DeveloperContent,
    Message,
    ReasoningEffort,
    RenderOptions,
    Role,
    SystemContent,
    ToolNamespaceConfig,
)

from ..constraints import build_constraint, check_grammar, parse_text_format
from ..core import ByteBoundedCache, Stepped, at_once
from ..harmony import (
    CONFIG_EFFORT,
    CONFIG_TEXT,
    ChosenTools,
    HarmonyEncoding,
    choose_tools,
    developer_message,
    developer_spec,
    items_to_messages,
    loaded_tools,
)
from ..request import EFFORT_LEVELS, ReasoningParam, ResponsesRequest, choice_data, parse_text, tools_data
from .item_renders import DEFAULT_RENDER_CACHE_BYTES, ItemRenders, converted_items
from .prompt import (
    EMPTY_HISTORY,
    CachedItem,
    ConversationHistory,
    ItemKey,
    Prompt,
    PromptDraft,
    RenderedMessage,
)

__all__ = [
    "EMPTY_HISTORY",
    "ConversationHistory",
    "HarmonyAdapter",
    "Prompt",
    "PromptDraft",
    "RenderedMessage",
]

#: Messages a prompt's finishing steps take between two pauses (``HarmonyAdapter.finishing``): ~1 ms of work.
_STEP_MESSAGES = 256
#: The request's effort → gpt-oss's level (the table both routes share: ``request/shared_fields.py``).
_EFFORTS = {effort: ReasoningEffort[level.upper()] for effort, level in EFFORT_LEVELS.items()}
#: ``text.verbosity`` as gpt-oss understands it: a sentence after the developer instructions (none for medium).
VERBOSITY = {
    "low": "Be concise: answer in as few words as the question allows.",
    "high": "Be thorough: answer in detail, explaining your reasoning and giving examples where they help.",
}
#: Byte budget of the rendered developer messages cache (instructions and tools are client text).
DEVELOPER_CACHE_BYTES = 32 << 20


def _today() -> str:
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()


def configured_fields(request: ResponsesRequest, calls: Mapping[str, str]) -> dict[str, Any]:
    """The request fields the conversation's latest ``configuration_update`` items set (they win over the request's)."""
    out: dict[str, Any] = {}
    effort = calls.get(CONFIG_EFFORT)
    if effort is not None:
        reasoning = request.reasoning or ReasoningParam()
        out["reasoning"] = reasoning.model_copy(update={"effort": effort})
    text = calls.get(CONFIG_TEXT)
    if text is not None:
        out["text"] = parse_text({**(request.text.data if request.text else {}), **orjson.loads(text)})
    return out


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
        render_cache_bytes: int = DEFAULT_RENDER_CACHE_BYTES,
    ) -> None:
        self.encoding = encoding
        self._model_identity = model_identity
        self._today = today
        self._hidden_logged: set[str] = set()  # hosted tool types already logged as not shown
        self._assistant_start = tuple(encoding.encode("<|start|>assistant"))
        self._final_start = tuple(encoding.encode("<|start|>assistant<|channel|>final<|message|>"))
        # Keyed by the server's own instructions (a few) and the date.
        self._side_heads: dict[tuple[str, str], tuple[int, ...]] = {}
        # Keyed by a handful of small values: bounded by count.
        self._render_system = lru_cache(maxsize=64)(self._render_system_uncached)
        # Keyed by client text (instructions, tools): bounded by bytes, filled only by accepted prompts.
        self._developers: ByteBoundedCache[RenderedMessage] = ByteBoundedCache(developer_cache_bytes)
        #: Input items' renders by content (replayed histories render only what is new); 0 bytes: off.
        self.item_renders = ItemRenders(render_cache_bytes) if render_cache_bytes > 0 else None

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """What generation must stop at: Harmony's assistant-action stops."""
        return self.encoding.assistant_action_stops

    # -- rendering -------------------------------------------------------------------------

    def render_message(self, message: Message) -> RenderedMessage:
        """Render one message (developer, user, assistant or tool) in this thread."""
        return self.rendered(message, self.encoding.render(message))

    def rendered(self, message: Message, tokens: Sequence[int], source: str | None = None) -> RenderedMessage:
        """The RenderedMessage of ``message``, whose render (done here or elsewhere) is ``tokens``; ``source``:
        its JSON (``message.to_json()``), when already made."""
        is_assistant = message.author.role == Role.ASSISTANT and not message.recipient
        return RenderedMessage(
            source=message.to_json() if source is None else source,
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

    def side_prompt(self, instructions: str, text: str) -> list[int]:
        """A side generation's prompt: system (low effort, no tools), developer ``instructions``, user
        ``text``, and the assistant's ``final`` channel already opened (the model writes only the answer).

        For work the server asks of the model beside a response (reasoning summaries).
        """
        key = (instructions, self._today())
        head = self._side_heads.get(key)
        if head is None:
            if len(self._side_heads) >= 8:  # yesterday's
                self._side_heads.clear()
            system = self._render_system(ReasoningEffort.LOW, key[1], False, False, False)
            developer = Message.from_role_and_content(
                Role.DEVELOPER, DeveloperContent.new().with_instructions(instructions)
            )
            head = self._side_heads[key] = (*system.tokens, *self.encoding.render(developer))
        user = self.encoding.render(Message.from_role_and_content(Role.USER, text))
        return [*head, *user, *self._final_start]

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
        scope: str = "",
    ) -> PromptDraft:
        """Everything of the prompt but the rendering of its new messages (``draft.to_render``).

        ``namespaces`` are the server-run tool namespaces (``{"name", "description",
        "tools"}``, e.g. listed MCP servers), shown after the function tools.
        ``builtin``, when given, is what the server runs of gpt-oss's built-in tools
        (``{"browser"|"python": instruction text}``): a declared built-in tool is shown
        only when it is there, with that text (None: the server runs none, so none is shown).

        ``scope``: the requesting tenant's (``Tenant.scope``): the renders it finds in the caches (input
        items, developer messages) are its own, so how fast a prompt renders says nothing of another's.

        Checks the request's input and tools (InvalidRequestError); cheap: harmony
        tokenizes nothing here except the small, cached system message.
        """
        return at_once(self.drafting(request, history, namespaces, builtin, scope))

    def drafting(
        self,
        request: ResponsesRequest,
        history: ConversationHistory = EMPTY_HISTORY,
        namespaces: Sequence[Mapping[str, Any]] = (),
        builtin: Mapping[str, str] | None = None,
        scope: str = "",
    ) -> Stepped[PromptDraft]:
        """:meth:`draft_prompt` as work that pauses after each input item (``core.Stepped``)."""
        items = yield from converted_items(request.input, history.calls, self.item_renders, scope=scope)
        converted = items.converted
        calls = {**history.calls, **converted.calls}
        configuration = configured_fields(request, calls)
        if configuration:
            request = request.model_copy(update=configuration)
        chosen = self._choose_tools(request, namespaces, builtin, calls)
        tools, namespaces = chosen.tools, chosen.namespaces
        response_format = parse_text_format(request.text)
        effort = (
            _EFFORTS[request.reasoning.effort]
            if request.reasoning and request.reasoning.effort
            else ReasoningEffort.MEDIUM
        )
        system = self._render_system(
            effort, self._today(), chosen.browser, chosen.python, bool(tools.tools or namespaces)
        )

        parts = [request.instructions] if request.instructions else []
        parts.extend(converted.instructions)
        verbosity = VERBOSITY.get((request.text.verbosity if request.text else None) or "medium")
        if verbosity:  # gpt-oss has no verbosity control: it reads the wish in its instructions
            parts.append(verbosity)
        instructions = "\n\n".join(parts) if parts else None
        # The request's own tools, choice and format, and the server-run namespaces, determine the rest of
        # the message: their JSON is the key (cheap); the spec (schemas rewritten) is built only on a miss.
        developer_key = (
            scope,
            instructions,
            orjson.dumps(
                [
                    tools_data(request.tools),
                    choice_data(request.tool_choice),
                    request.text.data if request.text else None,
                    list(namespaces),
                ]
            ).decode(),
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
            constraint=build_constraint(chosen.calls, chosen.required, response_format),
            configuration=configuration,
            layout=tuple(items.layout) if items.hits else None,
            pending=tuple(items.pending),
            new_bytes=items.new_bytes,
        )

    def _choose_tools(
        self,
        request: ResponsesRequest,
        namespaces: Sequence[Mapping[str, Any]],
        builtin: Mapping[str, str] | None,
        calls: Mapping[str, str],
    ) -> ChosenTools:
        """What ``request``'s ``tool_choice`` shows and requires (``harmony/tool_choice.py``), with the
        tools the conversation's ``calls`` loaded and the hosted types logged once per adapter."""
        return choose_tools(
            request.tools,
            request.tool_choice,
            namespaces,
            builtin,
            check_grammar=check_grammar,
            logged=self._hidden_logged,
            loaded=loaded_tools(calls),
        )

    def finish_prompt(self, draft: PromptDraft, rendered: Sequence[RenderedMessage]) -> Prompt:
        """The prompt, from its draft and the renders of ``draft.to_render`` (in order)."""
        return at_once(self.finishing(draft, rendered))

    def finishing(self, draft: PromptDraft, rendered: Sequence[RenderedMessage]) -> Stepped[Prompt]:
        """:meth:`finish_prompt` as work that pauses every :data:`_STEP_MESSAGES` messages (``core.Stepped``)."""
        developer = draft.developer
        if draft.renders_developer:
            developer, rendered = rendered[0], rendered[1:]
        pending: list[tuple[ItemKey, CachedItem]] = []
        for i, (key, start, count, calls) in enumerate(draft.pending):
            if not i % _STEP_MESSAGES:
                yield
            pending.append((key, CachedItem(tuple(rendered[start : start + count]), calls)))
        item_renders = tuple(pending)
        if draft.layout is not None:  # cached renders where their items were
            placed: list[RenderedMessage] = []
            for i, m in enumerate(draft.layout):
                if not i % _STEP_MESSAGES:
                    yield
                placed.append(rendered[m] if isinstance(m, int) else m)
            rendered = placed
        full_history = draft.history.extended(rendered, draft.calls)
        yield
        tokens = list(draft.system.tokens)
        if developer is not None:
            tokens += developer.tokens
        # into the prompt: one copy of 100k tokens
        yield from self._conversation_tokens(full_history.messages, tokens)
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
            configuration=draft.configuration,
            item_renders=item_renders,
        )

    def admit(self, prompt: Prompt) -> None:
        """Cache the prompt's developer message for the requests that repeat its instructions and tools,
        and its new input items' renders for the turns that replay them."""
        at_once(self.admitting(prompt))

    def admitting(self, prompt: Prompt) -> Stepped[None]:
        """:meth:`admit` as work that pauses after each input item (``core.Stepped``)."""
        if self.item_renders is not None and prompt.item_renders:
            yield from self.item_renders.admitting(prompt.item_renders)
        developer = prompt.developer
        if developer is not None and self._developers.get(prompt.developer_key) is None:
            _, instructions, functions_json = prompt.developer_key
            key_bytes = sys.getsizeof(instructions) + sys.getsizeof(functions_json)
            self._developers.admit(prompt.developer_key, developer, developer.nbytes + key_bytes)

    @classmethod
    def conversation_tokens(
        cls, messages: Sequence[RenderedMessage], out: list[int] | None = None
    ) -> list[int]:
        """Concatenate message tokens, dropping analysis before the last final (Harmony's rule); onto
        ``out`` when given."""
        return at_once(cls._conversation_tokens(messages, [] if out is None else out))

    @staticmethod
    def _conversation_tokens(messages: Sequence[RenderedMessage], out: list[int]) -> Stepped[list[int]]:
        """:meth:`conversation_tokens` as work that pauses every :data:`_STEP_MESSAGES` messages."""
        last_final = -1
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].is_final:
                last_final = i
                break
        for i, m in enumerate(messages):
            if not i % _STEP_MESSAGES:
                yield
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
        converted = items_to_messages(output_items, prompt.history.calls, param="output")
        return prompt.history.extended(self.render_messages(converted.messages), converted.calls)
