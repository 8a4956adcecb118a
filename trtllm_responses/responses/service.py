"""ResponsesService: the Responses API, transport-free (docs/architecture.md#the-runs-life).

``prepare`` turns a request body into a frozen :class:`~.prepared.PreparedResponse` (everything a
client can get wrong is checked before any generation starts), in the named stages of ``prepare.py``,
rendering with ``rendering.py``; ``run`` makes the one handle on it
(:class:`~.run.ResponseRun`), which a transport drives in its own task, or ``start_background``
drives in one of the service's; ``find`` finds a running one by id. The service keeps each result
(stores it, appends it to its conversation) before the terminal event leaves. ``retrieve``,
``delete`` and ``input_items`` serve stored responses; ``compact`` and ``count_input_tokens`` the
loop endpoints.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ..adapter import ConversationHistory, HarmonyAdapter
from ..core import InvalidRequestError, NotFoundError, ServerError, ServiceUnavailableError, to_dict, to_json
from ..executors import Executor
from ..harmony import RenderPool
from ..ops import ServerMetrics
from ..request import (
    DEFAULT_REPLAY_PREFIX_BYTES,
    MAX_JSON_VALUES,
    BodyDecoder,
    JsonBody,
    ReplayPrefixes,
    check_depth,
    list_page_json,
)
from ..store import ResponseStore, StoredResponse
from ..tools import Coordinator, ToolSettings
from .budget import check_size
from .chains import CHAIN_HISTORY_CACHE_BYTES, Chains
from .compaction import Compactor, compacted_response_json
from .conversations import ConversationsService
from .generation import ResponseGenerator
from .prepare import (
    Origin,
    apply_template,
    check_options,
    compact_if_asked,
    continue_chain,
    first_snapshot,
    fit_window,
    form_team,
    freeze,
    generation_of,
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
from .sampling import SamplingDefaults
from .sealing import ContentSealer, is_tool_read, unseal_items
from .sessions import Chain
from .subagent_limits import SubagentLimits, SubagentPool
from .summaries import Summarizer

__all__ = [
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
    ) -> None:
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
        self.generator = ResponseGenerator(
            executor=executor,
            adapter=adapter,
            metrics=self.metrics,
            keep=self._keep,
            redact_reasoning=self.redact_reasoning,
            summarizer=Summarizer(adapter) if reasoning_summaries else None,
        )
        #: Runs being driven in this process, by id (foreground and background).
        self.runs: Mapping[str, ResponseRun] = self.generator.runs
        self._background: set[asyncio.Task[bytes]] = set()
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
            adapter, self.chains, self.tool_settings, sealer, self.render_pool, inline_render_bytes
        )
        self.compactor = Compactor(self.renderer, executor, self.sampling_defaults, model_name)
        self.conversations = ConversationsService(
            store, adapter, self.renderer.render_history, self.max_input_bytes, self.decoder
        )
        #: The process's running sub-agents (the beta multi-agent surface, ``subagents.py``), and their budgets.
        self.subagents = SubagentPool(subagent_limits)

    def check_input_size(self, size: int) -> None:
        """Refuse a request body of ``size`` bytes before reading further, if it exceeds ``max_input_bytes``."""
        check_size(size, self.max_input_bytes, self.executor.max_seq_len)

    async def decode(self, raw: bytes | str) -> JsonBody:
        """A request body parsed and checked once (size, shape, depth), off the event loop when large."""
        self.check_input_size(len(raw))
        return await self.decoder.decode(raw)

    def body_of(self, data: dict[str, Any], origin: Origin = NO_ORIGIN) -> JsonBody:
        """A body built in this process (a Chat or Messages translation, a steered WebSocket message, a
        sub-agent's turn) as ``prepare`` takes it, checked as ``decode`` checks one received: its size
        within --max_input_bytes (``origin.sent_bytes`` for a translation: what the client sent), then its
        depth (``request.check_depth``)."""
        raw = orjson.dumps(data)
        self.check_input_size(len(raw) if origin.sent_bytes is None else origin.sent_bytes)
        check_depth(data)
        # Its values are not counted (a pass over the bytes a turn would pay): its length bounds them.
        return JsonBody(data, len(raw), len(raw))

    # -- create ----------------------------------------------------------------------------

    async def prepare(self, body: JsonBody, origin: Origin = NO_ORIGIN) -> PreparedResponse:
        """Check a request body and render its prompt: the stages of ``prepare.py``, in this order, each
        refusing what it checks (APIError) before the next starts, all before any generation.

        ``origin``: what the transport knows of the request besides its body (``prepare.Origin``).
        """
        p = open_request(body, origin, self.max_input_bytes, self.executor.max_seq_len)
        await apply_template(p, self.prompts)
        form_team(p, self, self.subagents, self.tool_settings.tool_timeout)
        await check_options(p, self.store)
        await read_conversation(p, self.conversations)
        await read_input(p, self.store)
        await continue_chain(p, self.chains)
        await render_prompt(p, self.renderer)
        await compact_if_asked(p, self.compactor)
        fit_window(p, self.executor, self.adapter)
        generation = generation_of(p, self.executor, self.adapter, self.sampling_defaults)
        response = await first_snapshot(p, generation, self.model_name, self.store, self.adapter)
        return freeze(
            p, generation, response, self.sealer, self.redact_reasoning, self.tool_settings.tool_timeout
        )

    async def count_input_tokens(self, body: bytes) -> bytes:
        """``POST /v1/responses/input_tokens``: the length of the prompt the same create would send.

        Counting never generates: with ``context_management`` it is the prompt before any
        compaction, the number the threshold is compared with.
        """
        prepared = await self.prepare(await self.decode(body), Origin(compact=False))
        count = len(prepared.prompt.token_ids)
        return orjson.dumps({"object": "response.input_tokens", "input_tokens": count})

    # -- run -----------------------------------------------------------------------------------

    def run(self, prepared: PreparedResponse) -> ResponseRun:
        """The handle on ``prepared``'s response: drive it (``run.drive``) or ``start_background`` it.

        After ``abort_all`` (the server's shutdown timeout) a new run is aborted from the start.
        """
        run = ResponseRun(prepared, self.generator.drive, self.executor, on_abort=self.metrics.record_abort)
        if self._aborting:
            run.abort()
        return run

    async def run_subagent_turn(
        self, body: dict[str, Any], lookup: HistoryLookup, coordinator: Coordinator | None
    ) -> tuple[dict[str, Any], str | None, Chain | None]:
        """One turn of a sub-agent (``subagents.SubagentHost``): prepared and driven here, not stored.

        Returns its final response, its id and its continuation (None: it failed). Raises APIError.
        """
        prepared = await self.prepare(self.body_of(body), Origin(lookup=lookup, coordinator=coordinator))
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
        terminal event. How many were running."""
        self._aborting = True
        runs = list(self.generator.runs.values())
        for run in runs:
            run.abort()  # counted in trtllm_executor_aborts_total by the run, for each generation it aborts
        return len(runs)

    def find(self, response_id: str) -> ResponseRun | None:
        """The run of ``response_id`` if it is being driven in this process."""
        return self.generator.runs.get(response_id)

    def start_background(self, run: ResponseRun) -> asyncio.Task[bytes]:
        """Drive ``run`` in a task of the service's (its events go to its subscribers); return the task."""
        task = asyncio.ensure_future(run.drive(run.publish))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- keep ------------------------------------------------------------------------------

    async def _keep(self, run: ResponseRun) -> bytes:
        """Serialize the terminal response once, and store it (when asked) before anyone sees it."""
        prepared = run.prepared
        stream = run.stream
        final = stream.final_response if stream is not None else None
        if stream is None or final is None:
            raise ServerError("The response ended without a terminal event.")
        final_json = to_json(final)
        turn = None
        if prepared.conversation_id is not None and final.status in ("completed", "incomplete"):
            items = list(zip(prepared.input_item_ids, prepared.input_items_json, strict=True))
            items += [(item.id, to_json(item)) for item in final.output if item.id]
            turn = self.history_after(
                prepared, [to_dict(item, logprobs=False) for item in stream.model_output]
            )
            try:
                await self.conversations.append(
                    prepared.conversation_id, items, turn, prepared.conversation_seen
                )
            except ServiceUnavailableError:
                self.metrics.record_store_error()
                raise  # drive ends the response failed instead
        if prepared.request.store:
            model_output = stream.model_output  # tool items as the model read them
            history = turn or self.history_after(
                prepared, [to_dict(item, logprobs=False) for item in model_output]
            )
            entry = StoredResponse(
                id=final.id,
                response_json=final_json,
                input_item_ids=prepared.input_item_ids,
                input_items_json=prepared.input_items_json,
                history=history,
                session_key=prepared.session_key,
                output_item_ids=_item_ids(final.output),
            )
            try:
                kept = await self.store.put(entry)
            except ServiceUnavailableError:
                self.metrics.record_store_error()
                raise  # drive ends the response failed instead: a response asked to be stored never silently is not
            if kept:
                self.chain_histories.admit(final.id, Chain(history, prepared.session_key), history.nbytes)
        return final_json

    def history_after(
        self, prepared: PreparedResponse, output: Sequence[Mapping[str, Any]]
    ) -> ConversationHistory:
        """The conversation after a response: its prompt's plus its ``output`` items (reasoning unredacted).

        A ``compaction`` output item is already in the prompt (as the summary), so it is skipped,
        as are tool-read carriers: ``output`` is the model's (its tool items have their read fields).
        """
        output = [item for item in output if item.get("type") != "compaction" and not is_tool_read(item)]
        if self.redact_reasoning and self.sealer is not None:
            output = unseal_items(output, self.sealer, "output")  # type: ignore[assignment]
        return self.adapter.continue_history(prepared.prompt, output)

    # -- stored responses --------------------------------------------------------------------

    async def compact(self, body: bytes) -> bytes:
        """``POST /v1/responses/compact``: the conversation as user messages plus an encrypted summary."""
        p = open_request(await self.decode(body), NO_ORIGIN, self.max_input_bytes, self.executor.max_seq_len)
        if p.request.model is None:  # required here, as in the SDK's ResponseCompactParams
            raise InvalidRequestError(
                "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
            )
        await apply_template(p, self.prompts)
        request = await expand_references(p.request, self.store, p.budget)
        compaction = await self.compactor.compact(request, size=p.budget.spent)
        return orjson.dumps(compacted_response_json(compaction))

    async def retrieve(self, response_id: str) -> bytes:
        """The response's JSON: its current snapshot while it is generated here, else the stored one."""
        run = self.find(response_id)
        if run is not None and run.stream is not None:
            return to_json(run.stream.snapshot())
        return (await self._get(response_id)).response_json

    async def delete(self, response_id: str) -> bytes:
        """Delete a stored response; the deletion confirmation as JSON."""
        if not await self.store.delete(response_id):
            raise NotFoundError(f"Response with id '{response_id}' not found.")
        return orjson.dumps({"id": response_id, "object": "response.deleted", "deleted": True})

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


def _item_ids(output: Sequence[Any]) -> tuple[str, ...]:
    """The ids of a response's output items (what the store indexes, without reading its JSON back)."""
    return tuple(i for i in (getattr(item, "id", None) for item in output) if isinstance(i, str))
