"""The in-response tool loop: server-run tool calls, their outputs, and the generations between them.

One piece of code for every server-run tool, knowing providers only through ``ToolProvider``:
it runs the call a generation stopped on (a failure is a failed item the model reads), renders
the turn's items onto the prompt (a prefix extension: the KV cache is reused) and generates
again, until a generation ends any other way. Approvals, ``max_tool_calls``, cancellation and
usage: docs/server-run-tools.md#server-run-tools-remote-mcp-servers; calls to tools nobody runs (at most
:data:`MAX_RECOVERIES`): "What the model may write". Message boundaries only: the per-token path
is untouched.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping

import anyio
from openai.types.responses import ResponseStreamEvent

from ..adapter import HarmonyAdapter, Prompt, RenderedMessage
from ..core import new_id, to_dict
from ..executors import GenerationRequest
from ..harmony import ItemKind, ItemTarget, items_to_messages, recipient_candidates
from ..stream import TokenStreamProcessor
from ..tools import (
    UNAVAILABLE_KINDS,
    ServerTools,
    ToolOutcome,
    ToolProvider,
    UnavailableTool,
    finish_tool_span,
    tool_span,
)
from .prepared import ClientLeft

__all__ = ["Generate", "ToolLoop"]

logger = logging.getLogger(__name__)

Deliver = Callable[[list[ResponseStreamEvent]], Awaitable[None]]
#: Runs one generation through the processor; returns its last, undelivered events.
Generate = Callable[
    [GenerationRequest, TokenStreamProcessor, "Deliver | None"], Awaitable[list[ResponseStreamEvent]]
]

TIMEOUT_CODE = -32001
#: Calls to tools nobody runs answered to the model in one response; one more ends it ``incomplete``.
MAX_RECOVERIES = 3
#: The SDK's reasons are a closed set (max_output_tokens, max_messages, content_filter, steered): the
#: response ran out of the turns it may take.
RECOVERY_LIMIT_REASON = "max_messages"
CANCELLED = "The response was cancelled while a tool call ran."


def _listed(provider: ToolProvider) -> set[str]:
    described = provider.describe()
    return {str(t.get("name")) for t in described.tools} if described is not None else set()


class ToolLoop:
    """Drives one response's generations and server-run tool calls (see the module docstring)."""

    def __init__(
        self,
        *,
        tools: ServerTools,
        adapter: HarmonyAdapter,
        processor: TokenStreamProcessor,
        generation: GenerationRequest,
        prompt: Prompt,
        calls: Mapping[str, str],
        max_seq_len: int,
        prompt_refusal: Callable[[int], str | None],
        max_output_tokens: int | None,
        max_tool_calls: int | None,
        tool_timeout: float,
        include: frozenset[str] = frozenset(),
        client_tools: tuple[str, ...] = (),
    ) -> None:
        self._tools = tools
        self._adapter = adapter
        self._processor = processor
        self._stream = processor.stream
        self._first = generation
        self._token_ids = generation.prompt_token_ids
        self._prompt = prompt
        self._messages: list[RenderedMessage] = []  # rendered since the prompt
        self._history_calls = calls  # the conversation's (shared): copied once a later turn adds to it
        self._calls: dict[str, str] | None = None
        self._max_seq_len = max_seq_len
        #: The executor's ``prompt_refusal``: a turn whose prompt the engine would refuse (past the window, or
        #: past max_num_tokens without chunked prefill) ends the response incomplete rather than failing in it.
        self._prompt_refusal = prompt_refusal
        self._max_output_tokens = max_output_tokens
        self._max_tool_calls = max_tool_calls
        self._timeout = tool_timeout
        self._turn_start = 0  # output index where the items not yet in the prompt begin
        self._turns = 0
        self._executed = 0
        self._told_limit = False
        self._include = include
        self._running: anyio.CancelScope | None = None  # the tool call running now
        self._cancelled = False
        self._recoveries = 0
        self._client_tools = client_tools  # recipients of the declared client tools (for the error)
        self._unavailable: UnavailableTool | None = None
        #: Calls to undeclared functions answered in this turn, as input items: rendered for the model's
        #: next turn, never output (``tools/unavailable.py``).
        self._unshown: list[dict[str, str]] = []
        self._stream.hold_calls(tools.held_kinds | UNAVAILABLE_KINDS, self._resolve, self._runs)
        for provider in tools.providers.values():
            provider.resume(calls)
            rewriter = provider.text_rewriter()
            if rewriter is not None:  # the browser: citations in messages become url_citation annotations
                self._stream.rewrite_messages(rewriter)

    def cancel(self) -> None:
        """End the response: cancel the running tool call; no further generation starts."""
        self._cancelled = True
        if self._running is not None:
            self._running.cancel()

    def _runs(self, recipient: str) -> bool:
        """Whether ``recipient`` (a stray word where the recipient goes) names a tool the server runs here."""
        providers = self._tools.providers
        for candidate in recipient_candidates(recipient):
            namespace, _, name = candidate.partition(".")
            provider = providers.get(namespace)
            if provider is not None:
                if provider.item_kind is not ItemKind.MCP_CALL or name in _listed(provider):
                    return True
            elif not name and self._listed_by_one(namespace) is not None:
                return True
        return False

    def _listed_by_one(self, name: str) -> ToolProvider | None:
        """The one MCP server that lists a tool named ``name`` (None: none or several)."""
        owners = [
            p
            for p in self._tools.providers.values()
            if p.item_kind is ItemKind.MCP_CALL and name in _listed(p)
        ]
        return owners[0] if len(owners) == 1 else None

    def _resolve(self, target: ItemTarget) -> ItemTarget:
        """A call that needs the client's approval becomes an ``mcp_approval_request`` (ends the response).

        A bare name no server serves (or an undeclared function) that names exactly one listed MCP tool is
        a call to it.
        """
        provider = self._tools.provider_for(target)
        if provider is not None:
            target = provider.target(target)
        bare = target.kind is ItemKind.MCP_CALL and target.name == target.namespace
        if provider is None and (bare or target.kind is ItemKind.UNDECLARED_FUNCTION):
            provider = self._listed_by_one(target.name or "")
            if provider is not None:
                target = ItemTarget(ItemKind.MCP_CALL, name=target.name, namespace=provider.namespace)
        if provider is not None and target.name is not None and provider.needs_approval(target.name):
            return ItemTarget(ItemKind.MCP_APPROVAL_REQUEST, name=target.name, namespace=target.namespace)
        return target

    def opening(self) -> list[ResponseStreamEvent]:
        """The items the response opens with (``mcp_list_tools``), after response.in_progress."""
        events: list[ResponseStreamEvent] = []
        for item in self._tools.opening_items:
            events += self._stream.list_tools_item(item)  # type: ignore[arg-type]
        return events

    async def run(self, generate: Generate, deliver: Deliver | None) -> list[ResponseStreamEvent]:
        """Generate and run tools until the response ends; return the last, undelivered events.

        The providers are closed when it returns or raises (cancelled: the client went away).
        """
        try:
            return await self._run(generate, deliver)
        except ClientLeft:  # nobody to tell: the run stops (its generation aborted), no bug to log
            raise
        except Exception:  # a bug here must still end the stream with a terminal event
            if self._stream.final_response is not None:
                raise
            logger.exception("The tool loop failed")
            return self._processor.fail("The server had an error while running a tool.")
        finally:
            # The stream held this loop's _resolve: a cycle (loop → processor → stream → loop) that left
            # every finished response's prompt to the cyclic GC. Nothing is held once the loop ends.
            self._stream.hold_calls(frozenset())
            for provider in self._tools.providers.values():
                try:
                    await provider.aclose()
                except Exception:
                    logger.exception("Closing tool provider %s", provider.namespace)

    async def _run(self, generate: Generate, deliver: Deliver | None) -> list[ResponseStreamEvent]:
        stream = self._stream
        pending: list[ResponseStreamEvent] = []
        generation: GenerationRequest | None = self._first
        for call in self._tools.approved:
            pending += stream.tool_item(
                call.target, call.arguments, approval_request_id=call.approval_request_id
            )
            pending, _ = await self._execute(pending, deliver)
            if self._cancelled:
                return pending + self._processor.interrupted(CANCELLED)
        if self._tools.approved:
            previous = len(self._token_ids)
            generation = self._next_generation()
            if generation is None:
                return pending + stream.incomplete(self._processor.usage())
            self._processor.add_prompt_tokens(len(generation.prompt_token_ids) - previous)
        assert generation is not None
        while True:
            if pending and deliver is not None:
                await deliver(pending)
            events = await generate(generation, self._processor, deliver)
            if not self._processor.awaiting_tool:
                return events
            pending, stop = await self._execute(events, deliver)
            if self._stream.final_response is not None:  # ended by _refuse
                return pending
            if self._cancelled:
                return pending + self._processor.interrupted(CANCELLED)
            if stop:
                self._processor.done = True
                return pending + stream.complete(self._processor.usage())
            generation = self._next_generation()
            if generation is None:
                return pending + stream.incomplete(self._processor.usage())
            self._processor.next_turn(len(generation.prompt_token_ids))

    async def _execute(
        self, events: list[ResponseStreamEvent], deliver: Deliver | None
    ) -> tuple[list[ResponseStreamEvent], bool]:
        """Run the held call; return its closing events (undelivered) and whether the response must end."""
        stream = self._stream
        held = stream.held
        assert held is not None
        target, item_id, arguments = held
        provider = self._tools.provider_for(target)
        if provider is None:
            return self._refuse(target, events)
        stop = False
        if self._max_tool_calls is not None and self._executed >= self._max_tool_calls:
            stop, self._told_limit = self._told_limit, True
            outcome = provider.failure(
                f"This response has reached max_tool_calls ({self._max_tool_calls}): no more tool calls "
                "will run. Answer with what you have."
            )
        else:
            events = events + stream.tool_started()
            if deliver is not None:
                await deliver(events)
            events = []
            self._executed += 1
            name = target.name or ""
            mcp = provider.item_kind is ItemKind.MCP_CALL
            with tool_span(provider.namespace, name, mcp=mcp, call_id=item_id, arguments=arguments) as span:
                outcome = await self._call(provider, name, arguments)
                finish_tool_span(span, outcome)
        shown = dict(outcome.fields)
        internal = dict(outcome.fields)
        for name, overrides in outcome.optional.items():
            internal.update(overrides)
            if name in self._include:
                shown.update(overrides)
        internal.update(outcome.internal)
        status = "failed" if outcome.failed else "completed"
        events = events + stream.tool_finished(
            status, internal=internal if internal != shown else None, **shown
        )
        if outcome.items:  # what else the call produced (a multi-agent call's messages, sub-agents' items)
            events += stream.add_items(outcome.items)
        return events, stop

    def _refuse(
        self, target: ItemTarget, events: list[ResponseStreamEvent]
    ) -> tuple[list[ResponseStreamEvent], bool]:
        """Answer a call to a tool nobody runs (see the module docstring): its failed item, or the end."""
        self._recoveries += 1
        over_calls = self._max_tool_calls is not None and self._executed >= self._max_tool_calls
        if self._recoveries > MAX_RECOVERIES or over_calls:
            logger.info(
                "Ending a response after %d calls to tools nobody runs (max_tool_calls %s)",
                self._recoveries,
                self._max_tool_calls,
            )
            self._processor.done = True
            return events + self._stream.incomplete(self._processor.usage(), RECOVERY_LIMIT_REASON), True
        self._executed += 1
        if self._unavailable is None:
            self._unavailable = UnavailableTool(self._available())
        logger.info("The model called %s, which nobody runs: answered with an error", target)
        if target.kind is ItemKind.UNDECLARED_FUNCTION:  # no item: the model reads the function's output
            _, arguments = self._stream.drop_held()
            call_id = new_id("call")
            name = target.name or ""
            self._unshown += [
                {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments},
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": self._unavailable.answer(target),
                },
            ]
            return events, False
        outcome = self._unavailable.refuse(target)
        shown, internal = dict(outcome.fields), {**outcome.fields, **outcome.internal}
        events = events + self._stream.tool_finished(
            "failed", internal=internal if internal != shown else None, ran=False, **shown
        )
        return events, False

    def _available(self) -> list[str]:
        """The recipients the model may call in this response: client tools, then server-run ones."""
        names = list(self._client_tools)
        for provider in self._tools.providers.values():
            described = provider.describe()
            if provider.namespace == "python":
                names.append("python")
            elif provider.namespace == "browser":
                names += ["browser.search", "browser.open", "browser.find"]
            elif described is not None:
                names += [f"{described.name}.{tool.get('name')}" for tool in described.tools]
        return names

    async def _call(self, provider: ToolProvider, name: str, arguments: str) -> ToolOutcome:
        refused = provider.check(name, arguments)
        if refused is not None:
            return refused
        # In this task (anyio's cancel scope, not a wait_for task): the provider's connection is
        # entered and left by the same task, around (never inside) the call's timeout scope.
        try:
            connect_failed = await provider.connect()
            if connect_failed is not None:
                return connect_failed
            with anyio.CancelScope() as self._running:  # cancel() cancels it from another task
                if self._cancelled:
                    self._running.cancel()
                with anyio.fail_after(self._timeout):
                    return await provider.call(name, arguments)
            await provider.reset()  # cancelled (cancel()): the call may have been cut mid-way
            failed = provider.failure("The call was cancelled: the response was cancelled.")
            return dataclasses.replace(failed, error_type="cancelled")
        except TimeoutError:
            await provider.reset()
            failed = provider.failure(f"The tool call timed out after {self._timeout:g} s.", TIMEOUT_CODE)
            return dataclasses.replace(failed, error_type="timeout")
        except Exception as exc:  # a provider bug: the model reads it, the response goes on
            logger.exception("Tool %s.%s raised", provider.namespace, name)
            await provider.reset()
            failed = provider.failure(f"The tool failed: {type(exc).__name__}: {exc}")
            return dataclasses.replace(failed, error_type=type(exc).__qualname__)
        finally:
            self._running = None

    def _next_generation(self) -> GenerationRequest | None:
        """The next turn's generation: the prompt plus the finished items rendered back (None: no budget left)."""
        output = self._stream.model_output
        items = [to_dict(item, logprobs=False) for item in output[self._turn_start :]] + self._unshown
        self._turn_start = len(output)
        self._unshown = []
        if self._calls is None:
            self._calls = dict(self._history_calls)
        converted = items_to_messages(items, self._calls, param="output")
        self._calls.update(converted.calls)
        rendered = self._adapter.render_messages(converted.messages)
        self._messages += rendered
        if any(m.is_final for m in rendered):  # a final before the call: earlier analysis is dropped now
            self._token_ids = self._adapter.prompt_with(self._prompt, self._messages)
        else:
            self._token_ids = self._adapter.extend_prompt(self._token_ids, rendered)
        room = self._max_seq_len - len(self._token_ids)
        if self._max_output_tokens is not None:
            room = min(room, self._max_output_tokens - self._processor.output_tokens)
        if room < 1 or self._prompt_refusal(len(self._token_ids)) is not None:
            return None
        self._turns += 1
        first = self._first
        return GenerationRequest(
            request_id=f"{first.request_id}.{self._turns}",
            prompt_token_ids=self._token_ids,
            sampling=dataclasses.replace(first.sampling, max_tokens=room),
            # A call was made: a required one no longer is; a structured-output format still holds.
            constraint=first.constraint.after_call() if first.constraint is not None else None,
            session_key=first.session_key,  # the same session: its prompt extends the first one's
            session_parent=first.session_parent,
            session_final=first.session_final,
            cache_salt=first.cache_salt,
            client_tools=first.client_tools,
        )
