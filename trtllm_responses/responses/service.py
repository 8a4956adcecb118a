"""ResponsesService: the Responses API, transport-free (docs/architecture.md#the-runs-life).

``prepare`` turns a request body into a frozen :class:`~.prepared.PreparedResponse` (everything a
client can get wrong is checked before any generation starts), in the named stages of ``prepare.py``,
rendering with ``rendering.py``; ``run`` makes the one handle on it
(:class:`~.run.ResponseRun`), which a transport drives in its own task, or ``start_background``
drives in one of the service's; its registry (``runs``, ``runs.py``) finds a running one by id and
keeps background ones for their grace period. Each result is kept (stored, appended to its
conversation: ``keeping.py``) before the terminal event leaves. ``retrieve``, ``replay``, ``cancel``,
``delete`` and ``input_items`` serve responses by id; ``compact`` and ``count_input_tokens`` the loop
endpoints.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import orjson

from ..adapter import ConversationHistory, HarmonyAdapter
from ..core import InvalidRequestError, LoopSteps, NotFoundError, to_dict
from ..executors import Executor
from ..harmony import RenderPool
from ..ops import ServerMetrics, trace_attrs, tracing
from ..request import (
    DEFAULT_REPLAY_PREFIX_BYTES,
    MAX_JSON_VALUES,
    NO_IDENTITY,
    BodyDecoder,
    JsonBody,
    ReplayPrefixes,
    SessionIdentity,
    checking_depth,
    list_page_json,
    service_tier,
)
from ..store import ResponseStore, scoped
from ..tenants import OPEN, Tenant
from ..tools import Coordinator, ToolSettings
from .background import BackgroundLimits, BackgroundRun, Framing
from .budget import check_size
from .chains import CHAIN_HISTORY_CACHE_BYTES, Chains
from .compaction import Compactor, compacted_response_json
from .conversations import ConversationsService
from .gate import Admission, AdmissionLimits, Gate
from .generation import Generator
from .keeping import Keeper
from .kv_release import release_deleted
from .prepare import (
    Origin,
    admit_prompt,
    apply_template,
    check_options,
    compact_if_asked,
    continue_chain,
    first_snapshot,
    fit_window,
    form_team,
    freeze,
    generation_of,
    keep_input,
    open_request,
    read_conversation,
    read_input,
    render_prompt,
)
from .prepared import Deliver, HistoryLookup, PreparedResponse, default_max_input_bytes
from .prompts import PromptTemplates
from .references import expand_references
from .rendering import INLINE_RENDER_BYTES, Renderer
from .run import ResponseRun
from .runs import Runs
from .sampling import SamplingDefaults
from .sealing import ContentSealer
from .sessions import Chain
from .spans import prepared_attributes
from .subagent_limits import SubagentLimits, SubagentPool
from .summaries import Summarizer

__all__ = [
    "Admission",
    "AdmissionLimits",
    "Deliver",
    "HistoryLookup",
    "Origin",
    "PreparedResponse",
    "ResponsesService",
    "default_max_input_bytes",
]


logger = logging.getLogger(__name__)

#: What ``prepare`` takes when the transport knows nothing besides the body.
NO_ORIGIN = Origin()


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
        admission_limits: AdmissionLimits | None = None,
    ) -> None:
        """``framing`` (the transport's, ``server/sse.py``) is what background runs record their events as;
        ``background_limits`` bound what is kept of them. Without ``framing`` no run starts in the background.
        ``admission_limits``: how full the engine gets and how long a turn waits for it (``gate.py``).
        """
        self.prompts = prompts or PromptTemplates(None)
        #: What requests that do not say are sampled with (``serve --temperature`` …).
        self.sampling_defaults = sampling_defaults or SamplingDefaults()
        self.executor = executor
        #: Requests being decoded, translated or prepared now (``working``): the GC schedule counts them as
        #: work, not idle time.
        self.preparing = 0
        self.sealer = sealer
        self.redact_reasoning = redact_reasoning and sealer is not None
        self.store = store
        self.adapter = adapter
        self.model_name = model_name
        self.metrics = metrics or ServerMetrics()
        self._aborting = False  # abort_all was called: the server is ending every response
        self.max_input_bytes = max_input_bytes or default_max_input_bytes(executor.max_seq_len)
        self.render_pool = render_pool or RenderPool()
        #: Parses request bodies once, their shape bounded, large ones off the event loop (``request/body.py``).
        self.decoder = BodyDecoder(
            max_json_values, prefixes=ReplayPrefixes(replay_prefix_bytes) if replay_prefix_bytes > 0 else None
        )
        #: What ``previous_response_id`` continues (``chains.py``); ``chain_histories``, the histories it remembers.
        self.chains = Chains(store, chain_history_cache_bytes)
        self.chain_histories = self.chains.cache
        self.renderer = Renderer(
            adapter,
            self.chains,
            tool_settings or ToolSettings(),
            sealer,
            self.render_pool,
            inline_render_bytes,
        )
        self.compactor = Compactor(self.renderer, executor, self.sampling_defaults, model_name)
        self.conversations = ConversationsService(
            store, adapter, self.renderer.render_history, self.max_input_bytes, self.decoder
        )
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
        #: Tenants' limits and the fair share of a full engine: every turn passes it (``admit``).
        self.gate = Gate(store, self.metrics, admission_limits or AdmissionLimits())

    @property
    def tool_settings(self) -> ToolSettings:
        """The operator's servers and limits for server-run tools (``serve``'s flags), fixed for the service's
        life: the renderer prepares a request's tools with them, the run's tool loop times calls by them."""
        return self.renderer.tool_settings

    def check_input_size(self, size: int) -> None:
        """Refuse a request body of ``size`` bytes before reading further, if it exceeds ``max_input_bytes``."""
        check_size(size, self.max_input_bytes, self.executor.max_seq_len)

    @contextmanager
    def working(self) -> Iterator[None]:
        """A request's work before it generates (its body decoded, a dialect's translation, its preparation)
        under way: not idle time for the GC schedule (``server/app.py``), whose full collection met its
        steps when it ran between them (a 20,000-message translation's)."""
        self.preparing += 1
        try:
            yield
        finally:
            self.preparing -= 1

    async def decode(self, raw: bytes | str, scope: str = "") -> JsonBody:
        """A request body parsed and checked once (size, shape, depth), off the event loop when large; a
        replay decoded from what the same tenant (``scope``, its ``Tenant.scope``) sent before."""
        with self.working(), tracing.span("request.parse") as live:
            live.set_attribute(trace_attrs.BYTES, len(raw))
            self.check_input_size(len(raw))
            return await self.decoder.decode(raw, scope)

    async def body_of(self, data: dict[str, Any], origin: Origin = NO_ORIGIN) -> JsonBody:
        """A body built in this process (a Chat or Messages translation, a steered WebSocket message, a
        sub-agent's turn) as ``prepare`` takes it, checked as ``decode`` checks one received: its size
        within --max_input_bytes (``origin.sent_bytes`` for a translation: what the client sent), then its
        depth (``request.checking_depth``, in ``origin.steps``: one step an item)."""
        raw = orjson.dumps(data)
        self.check_input_size(len(raw) if origin.sent_bytes is None else origin.sent_bytes)
        await (origin.steps or LoopSteps()).through(checking_depth(data))
        # Its values are not counted (a pass over the bytes a turn would pay): its length bounds them.
        return JsonBody(data, len(raw), len(raw))

    # -- create ----------------------------------------------------------------------------

    async def prepare(self, body: JsonBody, origin: Origin = NO_ORIGIN) -> PreparedResponse:
        """Check a request body and render its prompt: the stages of ``prepare.py``, in this order, each
        refusing what it checks (APIError) before the next starts, all before any generation.

        ``origin``: what the transport knows of the request besides its body (``prepare.Origin``).
        """
        # its stages that can take time are spans of their own
        with self.working(), tracing.span("prepare") as live:
            p = await open_request(body, origin, self.max_input_bytes, self.executor.max_seq_len)
            store = scoped(self.store, origin.tenant.scope)  # what it reads is its tenant's
            await apply_template(p, self.prompts)
            form_team(p, self, self.subagents, self.tool_settings.tool_timeout)
            await check_options(p, store)
            await read_conversation(p, self.conversations)
            await read_input(p, store)
            await continue_chain(p, self.chains)
            await render_prompt(p, self.renderer)
            await compact_if_asked(p, self.compactor)
            fit_window(p, self.executor, self.adapter)
            await admit_prompt(p, self.adapter)
            await keep_input(p)
            generation = generation_of(p, self.executor, self.adapter, self.sampling_defaults)
            response = await first_snapshot(p, generation, self.model_name, store, self.adapter)
            if live.is_recording():
                live.set_attributes(prepared_attributes(p.response_id, p.prompt, p.session, p.conversation))
            return freeze(
                p,
                generation,
                response,
                self.sealer,
                self.redact_reasoning,
                self.tool_settings.tool_timeout,
            )

    async def count_input_tokens(self, body: bytes, tenant: Tenant = OPEN) -> bytes:
        """``POST /v1/responses/input_tokens``: the length of the prompt the same create by ``tenant`` would
        send.

        Counting never generates: with ``context_management`` it is the prompt before any
        compaction, the number the threshold is compared with. ``tenant``: who asks (its sealed items open).
        """
        origin = Origin(compact=False, tenant=tenant)
        prepared = await self.prepare(await self.decode(body, tenant.scope), origin)
        count = len(prepared.prompt.token_ids)
        return orjson.dumps({"object": "response.input_tokens", "input_tokens": count})

    # -- run -----------------------------------------------------------------------------------

    async def admit(self, prepared: PreparedResponse, tenant: Tenant) -> Admission:
        """Let a prepared turn of ``tenant`` in (``gate.py``): its limits counted, its place in the engine's
        queue taken; RateLimitError (429) otherwise. A foreground turn then waits for its slot
        (``admission.turn()``) before it answers anything; a background one waits in its run. Its runs
        (``run(prepared, admission)``) give it back when they end."""
        request = prepared.request
        tokens = len(prepared.prompt.token_ids)
        tier = service_tier(request.service_tier)[0]
        return await self.gate.admit(
            tenant,
            prepared.response.id,
            tier,
            tokens,
            background=bool(request.background),
            stores=bool(request.store),
        )

    def run(self, prepared: PreparedResponse, admission: Admission | None = None) -> ResponseRun:
        """The handle on ``prepared``'s response: drive it (``run.drive``) or ``start_background`` it; it holds
        ``admission`` (``admit``) until it ends.

        After ``abort_all`` (the server's shutdown timeout) a new run is aborted from the start.
        """
        run = ResponseRun(
            prepared, self.generator, self.runs, on_abort=self.metrics.record_abort, admission=admission
        )
        if self._aborting:
            run.abort()
        return run

    async def run_subagent_turn(
        self,
        body: dict[str, Any],
        lookup: HistoryLookup,
        coordinator: Coordinator | None,
        tenant: Tenant = OPEN,
    ) -> tuple[dict[str, Any], str | None, Chain | None]:
        """One turn of a sub-agent (``subagents.SubagentHost``): prepared and driven here, not stored, as
        ``tenant``'s (its parent's: sealed, KV-salted and cached as the parent is).

        Returns its final response, its id and its continuation (None: it failed). Raises APIError.
        """
        origin = Origin(lookup=lookup, coordinator=coordinator, tenant=tenant)
        prepared = await self.prepare(await self.body_of(body, origin), origin)
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

    def find(self, response_id: str, tenant: Tenant = OPEN) -> ResponseRun | None:
        """``tenant``'s run of ``response_id`` if it is being driven in this process."""
        return self.runs.find(response_id, tenant)

    async def start_background(self, run: ResponseRun) -> BackgroundRun:
        """Drive ``run`` in a task of the service's, its events kept for replay; return at once.

        429 past ``max_running`` background responses; 503 if the shared store cannot announce it (the
        run then gives its turn back: it will never be driven).
        """
        try:
            return await self.runs.start(run)
        except BaseException:
            run.abandon()
            raise

    def history_after(
        self, prepared: PreparedResponse, output: Sequence[Mapping[str, Any]]
    ) -> ConversationHistory:
        """The conversation after a response: its prompt's plus its ``output`` items (``keeping.py``)."""
        return self.keeper.history_after(prepared, output)

    # -- stored responses --------------------------------------------------------------------

    async def compact(
        self, body: bytes, tenant: Tenant = OPEN, identity: SessionIdentity = NO_IDENTITY
    ) -> bytes:
        """``POST /v1/responses/compact``: the conversation as user messages plus an encrypted summary, sealed
        for ``tenant`` (whose sealed items, alone, open); its generation in the session ``identity`` names."""
        origin = Origin(tenant=tenant)
        p = await open_request(
            await self.decode(body, tenant.scope), origin, self.max_input_bytes, self.executor.max_seq_len
        )
        if p.request.model is None:  # required here, as in the SDK's ResponseCompactParams
            raise InvalidRequestError(
                "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
            )
        await apply_template(p, self.prompts)
        request = await expand_references(p.request, scoped(self.store, tenant.scope), p.budget)
        compaction = await self.compactor.compact(
            request, tenant=tenant, size=p.budget.spent, session=identity
        )
        return orjson.dumps(compacted_response_json(compaction))

    async def retrieve(self, response_id: str, tenant: Tenant = OPEN) -> bytes:
        """``GET``: the response's JSON: ``queued``, its live snapshot while it is generated (here or, through
        the relay, elsewhere), else the stored one. NotFoundError if ``tenant`` knows none (another tenant's
        id reads as unknown: docs/tenants.md#isolation; so for every method below)."""
        return await self.runs.retrieve(response_id, tenant)

    async def replay(
        self, response_id: str, starting_after: int | None, tenant: Tenant = OPEN
    ) -> AsyncIterator[bytes]:
        """``GET ?stream=true``: a background response's event frames after ``starting_after``, live until its
        end. InvalidRequestError (before any byte) if they are not kept; NotFoundError if it is unknown."""
        return await self.runs.replay(response_id, starting_after, tenant)

    async def cancel(self, response_id: str, tenant: Tenant = OPEN) -> bytes:
        """Cancel a background response (wherever it runs) and return it once it ended (idempotent)."""
        return await self.runs.cancel(response_id, tenant)

    async def delete(self, response_id: str, tenant: Tenant = OPEN) -> bytes:
        """Delete a response (a running background one is cancelled first, then forgotten everywhere); the
        deletion confirmation as JSON. NotFoundError if none is known. Its KV cache is released
        (docs/sessions-and-kv-cache.md#retention)."""
        entry = await scoped(self.store, tenant.scope).get(response_id) if self.executor.releases_kv else None
        body = await self.runs.delete(response_id, tenant)
        if entry is not None:
            await release_deleted(self.executor, self.renderer, entry, tenant)
        return body

    async def input_items(
        self, response_id: str, *, after: str | None, limit: int, order: str, tenant: Tenant = OPEN
    ) -> bytes:
        """A page of the stored response's input items, as a ``list`` object."""
        entry = await scoped(self.store, tenant.scope).get(response_id)
        if entry is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.")
        items = zip(entry.input_item_ids, entry.input_items_json, strict=True)
        return list_page_json(tuple(items), after=after, limit=limit, order=order, where="this response")
