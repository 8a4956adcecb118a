"""ResponsesService: the Responses API, transport-free (README, "Layout": the run's life).

``prepare`` turns a request body into a frozen :class:`~.prepared.PreparedResponse` (everything a
client can get wrong is checked before any generation starts); ``run`` makes the one handle on it
(:class:`~.run.ResponseRun`), which a transport drives in its own task, or ``start_background``
drives in one of the service's; its registry (``runs``, ``runs.py``) finds a running one by id and
keeps background ones for their grace period. Each result is kept (stored, appended to its
conversation: ``keeping.py``) before the terminal event leaves. ``retrieve``, ``replay``, ``cancel``,
``delete`` and ``input_items`` serve responses by id; ``compact`` and ``count_input_tokens`` the loop
endpoints.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import orjson

from ..adapter import EMPTY_HISTORY, ConversationHistory, HarmonyAdapter, Prompt, RenderedMessage
from ..core import (
    ByteBoundedCache,
    InvalidRequestError,
    LoopSteps,
    NotFoundError,
    check_id,
    new_id,
    to_dict,
)
from ..executors import Executor, GenerationRequest
from ..harmony import RenderPool
from ..ops import ServerMetrics
from ..request import (
    DEFAULT_REPLAY_PREFIX_BYTES,
    MAX_JSON_VALUES,
    MULTI_AGENT_NAMESPACE,
    BodyDecoder,
    ItemReference,
    JsonBody,
    ReplayPrefixes,
    ResponsesRequest,
    list_page_json,
    normalize_input_items,
    parse_items,
    parse_multi_agent,
    parse_request,
)
from ..store import ResponseStore, StoredResponse
from ..tools import Coordinator, MultiAgentProvider, ServerTools, ToolSettings, prepare_server_tools
from .background import BackgroundLimits, BackgroundRun, Framing
from .cache_diagnostics import prompt_cache_diagnostics
from .compaction import (
    Compaction,
    compact_conversation,
    compact_threshold,
    compacted_response_json,
    compaction_triggered,
    window_for_turn,
)
from .conversations import ConversationsService, conversation_id
from .generation import Generator
from .keeping import Keeper
from .prepared import (
    ENCRYPTED_REASONING,
    Deliver,
    HistoryLookup,
    PreparedResponse,
    cache_retention_seconds,
    default_max_input_bytes,
    initial_response,
    logprob_token_limit,
    logprobs_wanted,
    service_tier,
)
from .prompts import PromptTemplates
from .references import ConversationItems, has_references, resolve_references
from .run import ResponseRun
from .runs import Runs
from .sampling import SamplingDefaults, sampling_settings
from .sealing import ContentSealer, unseal_input
from .sessions import Chain, session_key
from .subagent_limits import SubagentLimits, SubagentPool
from .subagents import Team
from .summaries import Summarizer, summary_cutoff, summary_mode
from .truncation import truncate_prompt

__all__ = [
    "Deliver",
    "HistoryLookup",
    "PreparedResponse",
    "ResponsesService",
    "default_max_input_bytes",
]


logger = logging.getLogger(__name__)

#: Requests up to this size render on the event loop (≈1 ms of tokenizing); larger ones in the worker.
INLINE_RENDER_BYTES = 16 << 10
#: Bytes of stored responses' histories remembered in this process, so that continuing one
#: (``previous_response_id``) reads none of its history from the store (README, "Long agent loops").
CHAIN_HISTORY_CACHE_BYTES = 128 << 20


class ResponsesService:
    """Creates, streams, stores, retrieves and deletes responses."""

    def __init__(
        self,
        *,
        executor: Executor,
        store: ResponseStore,
        adapter: HarmonyAdapter,
        model_name: str,
        metrics: ServerMetrics | None = None,
        sealer: ContentSealer | None = None,
        redact_reasoning: bool = False,
        reasoning_summaries: bool = True,
        max_input_bytes: int | None = None,
        inline_render_bytes: int = INLINE_RENDER_BYTES,
        render_pool: RenderPool | None = None,
        tool_settings: ToolSettings | None = None,
        prompts: PromptTemplates | None = None,
        sampling_defaults: SamplingDefaults | None = None,
        chain_history_cache_bytes: int = CHAIN_HISTORY_CACHE_BYTES,
        subagent_limits: SubagentLimits | None = None,
        max_json_values: int = MAX_JSON_VALUES,
        replay_prefix_bytes: int = DEFAULT_REPLAY_PREFIX_BYTES,
        background_limits: BackgroundLimits | None = None,
        framing: Framing | None = None,
    ) -> None:
        """``framing`` (the transport's, ``server/sse.py``) is what background runs record their events as;
        ``background_limits`` bound what is kept of them. Without ``framing`` no run starts in the background.
        """
        self.prompts = prompts or PromptTemplates(None)
        self.tool_settings = tool_settings or ToolSettings()
        #: What requests that do not say are sampled with (``serve --temperature`` …).
        self.sampling_defaults = sampling_defaults or SamplingDefaults()
        self.executor = executor
        self.sealer = sealer
        self.redact_reasoning = redact_reasoning and sealer is not None
        self.store = store
        self.adapter = adapter
        self.model_name = model_name
        self.metrics = metrics or ServerMetrics()
        self._aborting = False  # abort_all was called: the server is ending every response
        self.max_input_bytes = max_input_bytes or default_max_input_bytes(executor.max_seq_len)
        self.inline_render_bytes = inline_render_bytes
        self.render_pool = render_pool or RenderPool()
        #: Parses request bodies once, their shape bounded, large ones off the event loop (``request/body.py``).
        self.decoder = BodyDecoder(
            max_json_values, prefixes=ReplayPrefixes(replay_prefix_bytes) if replay_prefix_bytes > 0 else None
        )
        self.conversations = ConversationsService(
            store, adapter, self._render_history, self.max_input_bytes, self.decoder
        )
        # The histories (and session keys) of responses this process stored or read, by id: a stored
        # response never changes, so continuing one only asks the store whether it is still there
        # (``touch``), whatever its length.
        self.chain_histories: ByteBoundedCache[Chain] = ByteBoundedCache(chain_history_cache_bytes)
        #: The process's running sub-agents (the beta multi-agent surface, ``subagents.py``), and their budgets.
        self.subagents = SubagentPool(subagent_limits)
        self.keeper = Keeper(
            store=store,
            conversations=self.conversations,
            chain_histories=self.chain_histories,
            adapter=adapter,
            metrics=self.metrics,
            sealer=sealer,
            redact_reasoning=self.redact_reasoning,
        )
        self.generator = Generator(
            executor=executor,
            adapter=adapter,
            metrics=self.metrics,
            keeper=self.keeper,
            redact_reasoning=self.redact_reasoning,
            summarizer=Summarizer(adapter) if reasoning_summaries else None,
        )
        #: This process's runs: the live ones by id, the background ones kept for their grace period.
        self.runs = Runs(store, self.metrics, limits=background_limits or BackgroundLimits(), framing=framing)

    def check_input_size(self, size: int) -> None:
        """Refuse a request body of ``size`` bytes before reading further, if it exceeds ``max_input_bytes``."""
        if size > self.max_input_bytes:
            raise InvalidRequestError(
                f"The request is larger than {self.max_input_bytes} bytes, more than this model's context "
                f"window of {self.executor.max_seq_len} tokens can hold (--max_input_bytes).",
                param="input",
                code="context_length_exceeded",
            )

    async def decode(self, raw: bytes | str) -> JsonBody:
        """A request body parsed and checked once (size, shape, depth), off the event loop when large."""
        self.check_input_size(len(raw))
        return await self.decoder.decode(raw)

    # -- create ----------------------------------------------------------------------------

    async def prepare(
        self,
        body: bytes | dict[str, Any] | JsonBody,
        received_at: float | None = None,
        *,
        lookup: HistoryLookup | None = None,
        compact: bool = True,
        generate: bool = True,
        affinity: str | None = None,
        multi_agent_beta: bool = False,
        coordinator: Coordinator | None = None,
        sent_bytes: int | None = None,
        choices: int = 1,
    ) -> PreparedResponse:
        """Check a request body and render its prompt. Raises APIError for anything wrong.

        ``sent_bytes``: the size of the body the client sent, when ``body`` is a translation of it
        (Chat Completions, Messages): ``--max_input_bytes`` applies to what the client sent, not to
        the translated form (which is larger: ids, types and defaults of each item). ``choices``: the
        generations that will be made of it (chat's ``n``), for the logprobs budget.

        ``affinity``: the session key the client's headers give (``request/affinity.py``), if any; the
        response's own key is decided here (``sessions.py``).

        ``generate`` False (WebSocket ``generate: false``): the response prefills its prompt, no output.

        ``multi_agent_beta`` (the request came with ``openai-beta: responses_multi_agent=v1``): its
        ``multi_agent`` is read, and when enabled the response gets a team of sub-agents (``subagents.py``).
        ``coordinator``: a sub-agent's turn is shown the multi-agent actions of its own seat in its team.

        With ``compact`` (the default), a ``context_management`` threshold the prompt
        exceeds compacts the conversation first (a summarization generation).

        ``lookup`` is asked for ``previous_response_id`` before the store (a WebSocket's
        connection-local state); an id neither knows is ``previous_response_not_found``
        there, a 404 over HTTP.
        """
        received = received_at if received_at is not None else time.perf_counter()
        steps = LoopSteps()  # its work on the event loop, in steps of a few ms (core/loop_steps.py)
        if isinstance(body, bytes):
            body = await self.decode(body)
        size = body.size if isinstance(body, JsonBody) else len(orjson.dumps(body))
        self.check_input_size(size if sent_bytes is None else sent_bytes)
        # Every expansion is measured before it is made and counted in ``size``: refused past
        # --max_input_bytes, and deciding where the input is rendered (``_build_prompt``).
        request, templated = await self.prompts.apply(parse_request(body), self.max_input_bytes - size)
        size += templated
        team = None
        config = parse_multi_agent(request.multi_agent) if multi_agent_beta else None
        if config is not None:
            template = body.data if isinstance(body, JsonBody) else body
            team = Team(self, self.subagents, config, template, self.tool_settings.tool_timeout)
            coordinator = team.coordinator()
        logprob_tokens = logprob_token_limit(request, choices)  # 400 now if logprobs would overflow it
        if request.store:
            await self.store.ping()  # 503 now, not a generated response that cannot be kept
        summaries = summary_mode(request)
        cutoff = summary_cutoff(request)
        conversation = None
        seen: tuple[int, str | None] = (0, None)
        conversation_history = None
        conversation_items = None  # what reads the conversation's items, if an item_reference needs them
        if request.conversation is not None:
            conversation = conversation_id(request.conversation)
            given = [  # new items' ids (an item_reference's id names an item that is there already)
                i.data["id"]
                for i in request.input
                if not isinstance(i, (str, ItemReference)) and isinstance(i.data.get("id"), str)
            ]
            conversation_history, seen, stored_items = await self.conversations.history(
                conversation, given, size
            )
            conversation_items = self.conversations.items_reader(conversation, stored_items)
        request, referenced = await self.resolve_references(request, conversation_items, size)
        size += referenced
        request, triggered = compaction_triggered(request)
        previous = None
        if request.previous_response_id is not None:
            previous = await self.chain_of(request.previous_response_id, lookup)
            conversation_history = previous.history
        response_id = new_id("resp")
        # Whether a later turn can continue it by previous_response_id: stored, or on a WebSocket.
        continuable = request.store or lookup is not None
        session = session_key(
            request,
            header=affinity,
            conversation=conversation,
            previous=previous,
            own_id=response_id if continuable else None,
        )
        prompt, tools = await self.render(
            request,
            lookup=lookup,
            size=size,
            history=conversation_history,
            steps=steps,
            coordinator=coordinator,
        )
        if prompt.configuration:  # configuration_update items: the response says what it used
            request = request.model_copy(update=prompt.configuration)
        await steps.boundary()
        compaction = None
        threshold = compact_threshold(request)
        if compact and (triggered or (threshold is not None and len(prompt.token_ids) > threshold)):
            compaction = await self._compact(request, lookup=lookup, size=size, session_key=session)
            window = request.model_copy(
                update={
                    "input": parse_items(window_for_turn(compaction, request)),
                    "previous_response_id": None,
                }
            )
            prompt, _ = await self.render(window, size=size, tools=tools, prepare_tools=False)
        room = self.executor.max_seq_len - len(prompt.token_ids)
        truncated = 0
        if room < 1 and request.truncation == "auto":
            limit = self.executor.max_seq_len
            cut = truncate_prompt(self.adapter, prompt, limit, request.max_output_tokens or limit // 8)
            if cut is not None:
                prompt, truncated = cut
        # The context window, and the engine's own limit on one prompt (max_num_tokens without chunked prefill).
        refusal = self.executor.prompt_refusal(len(prompt.token_ids))
        if refusal is not None:
            raise InvalidRequestError(refusal, param="input", code="context_length_exceeded")
        room = self.executor.max_seq_len - len(prompt.token_ids)
        if prompt.constraint is not None and self.executor.constraint_refusal is not None:
            raise InvalidRequestError(
                self.executor.constraint_refusal + ".",
                param=_constrained_by(prompt.constraint.final, prompt.constraint.call_required),
                code="unsupported_parameter",
            )
        self.adapter.admit(prompt)
        max_tokens = min(request.max_output_tokens or room, room, logprob_tokens or room)
        generation = GenerationRequest(
            request_id=response_id,
            prompt_token_ids=prompt.token_ids,
            sampling=sampling_settings(
                request,
                self.sampling_defaults,
                max_tokens=max_tokens,
                stop_token_ids=self.adapter.stop_token_ids,
                logprobs=logprobs_wanted(request),
                unapplied=self.executor.unapplied_sampling,
            ),
            constraint=prompt.constraint,
            priority=service_tier(request)[1],
            cache_retention_seconds=cache_retention_seconds(request),
            session_key=session,
        )
        response = initial_response(
            response_id, request, self.model_name, conversation, truncated, sampling=generation.sampling
        )
        options = request.prompt_cache_options
        if options is not None and options.comparison_response_id is not None:
            compared = await self.store.get(options.comparison_response_id)
            echoed = to_dict(response)
            echoed["prompt_cache_diagnostics"] = prompt_cache_diagnostics(
                self.adapter, prompt, echoed, compared
            )
            response = type(response).model_validate(echoed)
        items = normalize_input_items(request.input) if request.store or conversation else []
        sealer = self.sealer
        include = request.include or ()
        encrypted = sealer is not None and (self.redact_reasoning or ENCRYPTED_REASONING in include)
        seal = sealer.seal_reasoning if sealer is not None and encrypted else None
        return PreparedResponse(
            request=request,
            prompt=prompt,
            generation=generation,
            response=response,
            received_at=received,
            input_item_ids=tuple(item["id"] for item in items),
            input_items_json=tuple(orjson.dumps(item) for item in items),
            seal_reasoning=seal,
            seal_tool_read=sealer.seal_tool_read if sealer is not None and encrypted else None,
            compaction=compaction,
            summary_mode=summaries,
            summary_cutoff=cutoff,
            conversation_id=conversation,
            conversation_seen=seen if conversation else (0, None),
            tools=tools,
            tool_timeout=self.tool_settings.tool_timeout,
            generate=generate,
            session_key=session,
            team=team,
        )

    async def resolve_references(
        self, request: ResponsesRequest, conversation_items: ConversationItems | None = None, size: int = 0
    ) -> tuple[ResponsesRequest, int]:
        """``request`` with its ``item_reference`` items replaced by the items they name (``references.py``),
        and the bytes that added; a 400 if the request, ``size`` bytes so far, would pass --max_input_bytes.

        ``conversation_items``: what reads its conversation's items (None: no conversation), called
        only when a reference is not found among the input's own items.
        """
        if not has_references(request.input):
            return request, 0
        resolved, added = await resolve_references(
            request.input,  # type: ignore[arg-type]
            store=self.store,
            previous_response_id=request.previous_response_id,
            conversation_items=conversation_items,
            budget=self.max_input_bytes - size,
        )
        return request.model_copy(update={"input": resolved}), added

    async def _render_history(self, messages: list[Any], size: int) -> list[RenderedMessage]:
        """Render a conversation's messages: in the worker process when large, as ``_build_prompt`` does."""
        if size <= self.inline_render_bytes:
            return self.adapter.render_messages(messages)
        renders = await self.render_pool.render(messages)
        return [self.adapter.rendered(m, tokens) for m, tokens in zip(messages, renders, strict=True)]

    async def history_of(self, response_id: str, lookup: HistoryLookup | None = None) -> ConversationHistory:
        """The conversation a ``previous_response_id`` names; NotFoundError if none does."""
        return (await self.chain_of(response_id, lookup)).history

    async def chain_of(self, response_id: str, lookup: HistoryLookup | None = None) -> Chain:
        """The conversation and session key a ``previous_response_id`` names; NotFoundError if none does.

        Its session key was stored with it, so the root of a chain is known without walking the chain,
        even when another process or replica stored it.
        """
        check_id(response_id, "previous_response_id", "resp")
        if lookup is not None:
            local = lookup(response_id)
            if local is not None:
                return local
        remembered = self.chain_histories.get(response_id)
        if remembered is not None and await self.store.touch(response_id):
            return remembered
        previous = await self.store.get(response_id)
        if previous is None:
            if lookup is not None:
                raise InvalidRequestError(
                    f"Previous response with id '{response_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            raise NotFoundError(
                f"Previous response with id '{response_id}' not found.", param="previous_response_id"
            )
        chain = Chain(previous.history, previous.session_key)
        self.chain_histories.admit(response_id, chain, previous.history.nbytes)
        return chain

    async def render(
        self,
        request: ResponsesRequest,
        *,
        lookup: HistoryLookup | None = None,
        size: int = 0,
        tools: ServerTools | None = None,
        prepare_tools: bool = True,
        history: ConversationHistory | None = None,
        steps: LoopSteps | None = None,
        coordinator: Coordinator | None = None,
    ) -> tuple[Prompt, ServerTools | None]:
        """The prompt ``request`` builds (its conversation so far, encrypted items opened, its input),
        and its server-run tools (prepared here unless ``prepare_tools`` is False: then ``tools``);
        with ``coordinator``, the multi-agent actions among them."""
        if history is None:  # else: the conversation's (``conversation=``), or the previous response's
            history = EMPTY_HISTORY
            if request.previous_response_id is not None:
                history = await self.history_of(request.previous_response_id, lookup)
        if prepare_tools:
            tools = await prepare_server_tools(request, history.calls, self.tool_settings)
        if coordinator is not None:
            tools = tools or ServerTools()
            tools.providers[MULTI_AGENT_NAMESPACE] = MultiAgentProvider(coordinator)
        namespaces = [ns.as_json() for ns in tools.namespaces] if tools is not None else []
        # The built-in tools shown ({} hides every declared one: their backends are off).
        builtin = tools.builtin if tools is not None else {}
        if self.sealer is not None and not isinstance(request.input, str):
            opened = unseal_input(request.input, self.sealer)
            if opened is not request.input:
                request = request.model_copy(update={"input": opened})
        prompt = await self._build_prompt(request, history, size, namespaces, builtin, steps or LoopSteps())
        return prompt, tools

    async def count_input_tokens(self, body: bytes) -> bytes:
        """``POST /v1/responses/input_tokens``: the length of the prompt the same create would send.

        Counting never generates: with ``context_management`` it is the prompt before any
        compaction, the number the threshold is compared with.
        """
        prepared = await self.prepare(body, compact=False)
        count = len(prepared.prompt.token_ids)
        return orjson.dumps({"object": "response.input_tokens", "input_tokens": count})

    async def _build_prompt(
        self,
        request: ResponsesRequest,
        history: ConversationHistory,
        size: int,
        namespaces: Sequence[Mapping[str, Any]] = (),
        builtin: Mapping[str, str] | None = None,
        steps: LoopSteps | None = None,
    ) -> Prompt:
        """The prompt; a large request's new messages are rendered in the worker process, off the event loop.

        What is large is what is new: a replayed history's items the item cache holds are not rendered
        again (``adapter/item_renders.py``), so only the rest counts.
        """
        adapter = self.adapter
        draft = adapter.draft_prompt(request, history, namespaces, builtin)
        if min(size, draft.render_bytes) <= self.inline_render_bytes or not draft.to_render:
            return adapter.finish_prompt(draft, adapter.render_messages(draft.to_render))
        steps = steps or LoopSteps()
        renders = await self.render_pool.render(draft.to_render)
        steps.restart()  # waiting for the worker let the loop run
        rendered = [adapter.rendered(m, tokens) for m, tokens in zip(draft.to_render, renders, strict=True)]
        await steps.boundary()
        return adapter.finish_prompt(draft, rendered)

    # -- run -----------------------------------------------------------------------------------

    def run(self, prepared: PreparedResponse) -> ResponseRun:
        """The handle on ``prepared``'s response: drive it (``run.drive``) or ``start_background`` it.

        After ``abort_all`` (the server's shutdown timeout) a new run is aborted from the start.
        """
        run = ResponseRun(prepared, self.generator, self.runs, on_abort=self.metrics.record_abort)
        if self._aborting:
            run.abort()
        return run

    async def run_subagent_turn(
        self, body: dict[str, Any], lookup: HistoryLookup, coordinator: Coordinator | None
    ) -> tuple[dict[str, Any], str | None, Chain | None]:
        """One turn of a sub-agent (``subagents.SubagentHost``): prepared and driven here, not stored.

        Returns its final response, its id and its continuation (None: it failed). Raises APIError.
        """
        prepared = await self.prepare(body, lookup=lookup, coordinator=coordinator)
        run = self.run(prepared)
        final = orjson.loads(await run.drive())
        stream = run.stream
        if final.get("status") == "failed" or stream is None:
            return final, None, None
        history = self.history_after(
            prepared, [to_dict(item, logprobs=False) for item in stream.model_output]
        )
        return final, run.id, Chain(history, prepared.session_key)

    def abort_all(self) -> int:
        """End every run now and every run made from now on (shutdown): each ends ``failed`` with a
        terminal event. How many were being driven."""
        self._aborting = True
        return self.runs.abort_all()

    def find(self, response_id: str) -> ResponseRun | None:
        """The run of ``response_id`` if it is being driven in this process."""
        return self.runs.find(response_id)

    async def start_background(self, run: ResponseRun) -> BackgroundRun:
        """Drive ``run`` in a task of the service's, its events kept for replay; return at once.

        429 past ``max_running`` background responses; 503 if the shared store cannot announce it.
        """
        return await self.runs.start(run)

    def history_after(
        self, prepared: PreparedResponse, output: Sequence[Mapping[str, Any]]
    ) -> ConversationHistory:
        """The conversation after a response: its prompt's plus its ``output`` items (``keeping.py``)."""
        return self.keeper.history_after(prepared, output)

    # -- stored responses --------------------------------------------------------------------

    async def compact(self, body: bytes) -> bytes:
        """``POST /v1/responses/compact``: the conversation as user messages plus an encrypted summary."""
        request = parse_request(await self.decode(body))
        if request.model is None:  # required here, as in the SDK's ResponseCompactParams
            raise InvalidRequestError(
                "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
            )
        size = len(body)
        request, templated = await self.prompts.apply(request, self.max_input_bytes - size)
        request, referenced = await self.resolve_references(request, size=size + templated)
        compaction = await self._compact(request, size=size + templated + referenced)
        return orjson.dumps(compacted_response_json(compaction))

    async def _compact(
        self,
        request: ResponsesRequest,
        *,
        lookup: HistoryLookup | None = None,
        size: int = 0,
        session_key: str | None = None,
    ) -> Compaction:
        """Summarize ``request``'s conversation (``compaction.py``), rendering as create would.

        ``size`` is the request body's, which decides where its new messages are rendered.
        """

        async def render(summarizing: ResponsesRequest) -> Prompt:
            prompt, _ = await self.render(summarizing, lookup=lookup, size=size)
            return prompt

        return await compact_conversation(
            request,
            render=render,
            executor=self.executor,
            adapter=self.adapter,
            sampling_defaults=self.sampling_defaults,
            sealer=self.sealer,
            model_name=self.model_name,
            session_key=session_key,
        )

    async def retrieve(self, response_id: str) -> bytes:
        """``GET``: the response's JSON: ``queued``, its live snapshot while it is generated (here or, through
        the relay, elsewhere), else the stored one. NotFoundError if none is known."""
        return await self.runs.retrieve(response_id)

    async def replay(self, response_id: str, starting_after: int | None) -> AsyncIterator[bytes]:
        """``GET ?stream=true``: a background response's event frames after ``starting_after``, live until its
        end. InvalidRequestError (before any byte) if they are not kept; NotFoundError if it is unknown."""
        return await self.runs.replay(response_id, starting_after)

    async def cancel(self, response_id: str) -> bytes:
        """Cancel a background response (wherever it runs) and return it once it ended (idempotent)."""
        return await self.runs.cancel(response_id)

    async def delete(self, response_id: str) -> bytes:
        """Delete a response (a running background one is cancelled first, then forgotten everywhere); the
        deletion confirmation as JSON. NotFoundError if none is known."""
        return await self.runs.delete(response_id)

    async def input_items(self, response_id: str, *, after: str | None, limit: int, order: str) -> bytes:
        """A page of the stored response's input items, as a ``list`` object."""
        entry = await self._get(response_id)
        items = zip(entry.input_item_ids, entry.input_items_json, strict=True)
        return list_page_json(tuple(items), after=after, limit=limit, order=order, where="this response")

    async def _get(self, response_id: str) -> StoredResponse:
        entry = await self.store.get(response_id)
        if entry is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.")
        return entry


def _constrained_by(final: str, call_required: bool) -> str:
    """The request field that asked for a constraint: the structured-output format (the final answer is JSON), a
    required tool choice, or a tool with a grammar."""
    if final == "json":
        return "text.format"
    return "tool_choice" if call_required else "tools"
