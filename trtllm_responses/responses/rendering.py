"""A request's prompt: its conversation so far, its encrypted items opened, its server-run tools, its input.

:class:`Renderer` renders as create does, for ``prepare`` (``prepare.py``), for a compaction's
summarization (``compaction.py``) and for a conversation's history (``conversations.py``). What is new
in a request is rendered on the event loop when small (``inline_render_bytes``, ≈1 ms of tokenizing),
else in the render workers (``harmony/render_pool.py``), off the loop; a replayed history's items the
item cache holds are not rendered again (``adapter/item_renders.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..adapter import EMPTY_HISTORY, ConversationHistory, HarmonyAdapter, Prompt, RenderedMessage
from ..core import LoopSteps, Stepped, letting_go
from ..harmony import RenderPool
from ..ops import trace_attrs, tracing
from ..request import MULTI_AGENT_NAMESPACE, ResponsesRequest
from ..tenants import OPEN, Tenant
from ..tools import Coordinator, MultiAgentProvider, ServerTools, ToolSettings, prepare_server_tools
from .chains import Chains
from .sealing import ContentSealer, unsealing_input
from .sessions import HistoryLookup

__all__ = ["INLINE_RENDER_BYTES", "Renderer"]

#: Requests up to this size render on the event loop (≈1 ms of tokenizing); larger ones in the worker.
INLINE_RENDER_BYTES = 16 << 10


@dataclass(frozen=True, slots=True)
class Renderer:
    """Renders requests into prompts with the service's adapter, tools, sealer and render workers;
    ``chains`` finds the conversation a ``previous_response_id`` continues."""

    adapter: HarmonyAdapter
    chains: Chains
    tool_settings: ToolSettings
    sealer: ContentSealer | None
    render_pool: RenderPool
    inline_render_bytes: int = INLINE_RENDER_BYTES

    async def render(
        self,
        request: ResponsesRequest,
        *,
        thinking: bool = False,
        lookup: HistoryLookup | None = None,
        size: int = 0,
        tools: ServerTools | None = None,
        prepare_tools: bool = True,
        history: ConversationHistory | None = None,
        steps: LoopSteps | None = None,
        coordinator: Coordinator | None = None,
        tenant: Tenant = OPEN,
    ) -> tuple[Prompt, ServerTools | None]:
        """The prompt ``request`` builds (its conversation so far, encrypted items opened, its input),
        and its server-run tools (prepared here unless ``prepare_tools`` is False: then ``tools``);
        with ``coordinator``, the multi-agent actions among them. ``size``: the request's bytes so far
        (its budget's ``spent``), which with what is new decides where it is rendered. ``tenant``: who asks:
        its ``previous_response_id`` is looked up in its part of the store, its encrypted items open only if
        sealed for it (as Messages thinking signatures when ``thinking``), and the item cache's renders are
        its own (docs/tenants.md#isolation)."""
        scope = tenant.scope
        if history is None:  # else: the conversation's (``conversation=``), or the previous response's
            history = EMPTY_HISTORY
            if request.previous_response_id is not None:
                history = await self.chains.history_of(request.previous_response_id, lookup, tenant)
        if prepare_tools:
            tools = await prepare_server_tools(request, history.calls, self.tool_settings)
        if coordinator is not None:
            tools = tools or ServerTools()
            tools.providers[MULTI_AGENT_NAMESPACE] = MultiAgentProvider(coordinator)
        namespaces = [ns.as_json() for ns in tools.namespaces] if tools is not None else []
        # The built-in tools shown ({} hides every declared one: their backends are off).
        builtin = tools.builtin if tools is not None else {}
        steps = steps or LoopSteps()
        if self.sealer is not None and not isinstance(request.input, str):
            opened = await steps.through(unsealing_input(request.input, self.sealer.bound(scope, thinking)))
            if opened is not request.input:
                request = request.model_copy(update={"input": opened})
        prompt = await self.build_prompt(request, history, size, namespaces, builtin, steps, scope=scope)
        return prompt, tools

    async def build_prompt(
        self,
        request: ResponsesRequest,
        history: ConversationHistory,
        size: int,
        namespaces: Sequence[Mapping[str, Any]] = (),
        builtin: Mapping[str, str] | None = None,
        steps: LoopSteps | None = None,
        scope: str = "",
    ) -> Prompt:
        """The prompt; a large request's new messages are rendered in the worker process, off the event loop.

        What is large is what is new: a replayed history's items the item cache holds are not rendered
        again (``adapter/item_renders.py``), so only the rest counts.
        """
        adapter = self.adapter
        steps = steps or LoopSteps()
        # Work proportional to the input's items runs in steps (20,000 items: ~0.4 s of it in all).
        draft = await steps.through(adapter.drafting(request, history, namespaces, builtin, scope))
        inline = min(size, draft.render_bytes) <= self.inline_render_bytes or not draft.to_render
        if tracing.enabled():
            _rendered(len(draft.to_render), draft.layout, draft.renders_developer, inline)
        if inline:
            return adapter.finish_prompt(draft, adapter.render_messages(draft.to_render))
        sources = await steps.through(_sources(draft.to_render))
        renders = await self.render_pool.render_sources(sources, steps)
        rendered = await steps.through(_renders(adapter, draft.to_render, sources, renders))
        # What the renders replaced, let go in steps (20,000 pydantic messages): ``core.letting_go``.
        await steps.through(letting_go(draft.to_render))
        await steps.through(letting_go(renders))
        return await steps.through(adapter.finishing(draft, rendered))

    async def render_history(self, messages: list[Any], size: int) -> list[RenderedMessage]:
        """Render a conversation's messages: in the worker process when large, as :meth:`build_prompt` does."""
        if size <= self.inline_render_bytes:
            return self.adapter.render_messages(messages)
        renders = await self.render_pool.render(messages)
        return [self.adapter.rendered(m, tokens) for m, tokens in zip(messages, renders, strict=True)]


def _sources(messages: Sequence[Any]) -> Stepped[list[str]]:
    """Each message's JSON (what the render workers read, and what a rendered message keeps), in steps."""
    out = []
    for message in messages:
        yield
        out.append(message.to_json())
    return out


def _renders(
    adapter: HarmonyAdapter, messages: Sequence[Any], sources: Sequence[str], renders: Sequence[list[int]]
) -> Stepped[list[RenderedMessage]]:
    """The rendered messages of ``messages`` (their JSON ``sources``, their tokens ``renders``), in steps."""
    out = []
    for message, source, tokens in zip(messages, sources, renders, strict=True):
        yield
        out.append(adapter.rendered(message, tokens, source))
    return out


def _rendered(
    to_render: int, layout: Sequence[RenderedMessage | int] | None, renders_developer: bool, inline: bool
) -> None:
    """Say on the current span (``prepare.render_prompt``) where the ``to_render`` new messages render, how
    many of the input's the item cache already held (``layout``: ``adapter/item_renders.py``), and whether
    anything was found again (those, or the developer message: not ``renders_developer``)."""
    cached = sum(1 for m in layout if not isinstance(m, int)) if layout is not None else 0
    tracing.current_span().set_attributes(
        {
            trace_attrs.RENDER_WORKER: not inline,
            trace_attrs.RENDER_MESSAGES: to_render,
            trace_attrs.RENDER_CACHED: cached,
            trace_attrs.CACHE_HIT: cached > 0 or not renders_developer,
        }
    )
