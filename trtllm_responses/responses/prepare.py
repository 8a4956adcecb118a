"""``ResponsesService.prepare`` as named stages over one small value, a :class:`Preparation`.

A request comes in as one body shape, its parsed body (``request.JsonBody``), and an :class:`Origin`:
what its transport knows besides the body. ``ResponsesService.prepare`` runs the stages below in the
order it lists them, which is the order in which everything a client can get wrong is checked (each
stage's own errors, in order, before the next stage starts), before any generation:

1. :func:`open_request`: the body's size within ``--max_input_bytes`` (an :class:`~.budget.InputBudget`
   opened on it, carried through every later stage), then its fields;
2. :func:`apply_template`: a stored prompt template expanded (``prompts.py``), its bytes spent;
3. :func:`form_team`: the sub-agents of a multi-agent request (the beta surface, ``subagents.py``);
4. :func:`check_options`: the logprobs bound, the store reachable, the reasoning summary options;
5. :func:`read_conversation`: a ``conversation``'s history so far (``conversations.py``);
6. :func:`read_input`: ``item_reference`` items expanded (``references.py``), a final ``compaction_trigger``
   taken off;
7. :func:`continue_chain`: what ``previous_response_id`` continues (``chains.py``), the response's id and
   its session key (``sessions.py``);
8. :func:`render_prompt`: the prompt and the server-run tools (``rendering.py``);
9. :func:`compact_if_asked`: the conversation compacted first when asked or past its threshold
   (``compaction.py``), the window rendered in its place;
10. :func:`fit_window`: ``truncation: "auto"``, the context window, the engine's limits; :func:`admit_prompt`
    and :func:`keep_input`: the prompt admitted to the caches, the input items made ready for the store
    (each in steps: work proportional to the item count);
11. :func:`generation_of`, :func:`first_snapshot` and :func:`freeze`: the generation request, the
    in_progress response, and the frozen :class:`~.prepared.PreparedResponse`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import orjson
from openai.types.responses import Response

from ..adapter import ConversationHistory, HarmonyAdapter, Prompt
from ..core import InvalidRequestError, LoopSteps, Stepped, at_once, exact_bytes, new_id, to_dict
from ..executors import Executor, GenerationRequest
from ..ops import trace_attrs
from ..request import (
    NO_IDENTITY,
    InputItem,
    ItemReference,
    JsonBody,
    ResponsesRequest,
    SessionIdentity,
    input_as_items,
    normalized_item,
    parse_items,
    parse_multi_agent,
    parsing_request,
)
from ..store import ResponseStore
from ..tenants import OPEN, Tenant
from ..tools import Coordinator, ServerTools
from .budget import InputBudget
from .cache_diagnostics import prompt_cache_diagnostics
from .chains import Chains
from .compaction import Compaction, Compactor, compact_threshold, compaction_triggered, window_for_turn
from .conversations import ConversationsService, conversation_id
from .gate import capped_tier
from .prepared import (
    ENCRYPTED_REASONING,
    PreparedResponse,
    cache_retention_seconds,
    initial_response,
    logprob_token_limit,
    logprobs_wanted,
    service_tier,
)
from .prompts import PromptTemplates
from .references import ConversationItems, expand_references
from .rendering import Renderer
from .sampling import SamplingDefaults, sampling_notes, sampling_settings
from .sealing import ContentSealer
from .sessions import Chain, HistoryLookup, session_of
from .spans import stage as _stage
from .subagent_limits import SubagentHost, SubagentPool
from .subagents import Team
from .summaries import summary_cutoff, summary_mode
from .truncation import truncate_prompt

__all__ = [
    "Origin",
    "Preparation",
    "admit_prompt",
    "apply_template",
    "check_options",
    "compact_if_asked",
    "continue_chain",
    "first_snapshot",
    "fit_window",
    "form_team",
    "freeze",
    "generation_of",
    "keep_input",
    "open_request",
    "read_conversation",
    "read_input",
    "render_prompt",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """What a request's transport knows of it besides its body."""

    #: ``time.perf_counter()`` when its body was read (None: when ``prepare`` starts).
    received_at: float | None = None
    #: The session the client's headers name (``request/affinity.py``: key, parent, end); the response's own
    #: key is decided by ``sessions.py``.
    identity: SessionIdentity = NO_IDENTITY
    #: It came with ``openai-beta: responses_multi_agent=v1``: its ``multi_agent`` is read, and when enabled
    #: the response gets a team of sub-agents (``subagents.py``).
    multi_agent_beta: bool = False
    #: The size of the body the client sent, when the body is a translation of it (Chat Completions,
    #: Messages): ``--max_input_bytes`` applies to what the client sent, not to the translated form (which
    #: is larger: ids, types and defaults of each item).
    sent_bytes: int | None = None
    #: The generations that will be made of it (chat's ``n``), for the logprobs bound.
    choices: int = 1
    #: Asked for ``previous_response_id`` before the store (a WebSocket's connection-local state, a
    #: sub-agent team's): an id neither knows is then ``previous_response_not_found``, a 404 over HTTP.
    lookup: HistoryLookup | None = None
    #: False (WebSocket ``generate: false``): the response prefills its prompt, no output.
    generate: bool = True
    #: A ``context_management`` threshold the prompt exceeds (or a ``compaction_trigger``) compacts the
    #: conversation first (a summarization generation); False: never (counting tokens, Messages).
    compact: bool = True
    #: A sub-agent's turn is shown the multi-agent actions of its own seat in its team.
    coordinator: Coordinator | None = None
    #: Who asked (the tenant its key names; docs/tenants.md): what it reads and stores is its own, what is
    #: sealed for it opens for it alone, its prompts' KV-cache blocks are salted with its ``salt``.
    tenant: Tenant = OPEN
    #: It came through ``/v1/messages``: its reasoning is sealed and opened as thinking signatures (kind
    #: ``thinking``), which never open as a Responses ``encrypted_content``, nor those as signatures.
    thinking_signatures: bool = False
    #: The request's work on the event loop so far, in steps (a Messages translation's), which its
    #: preparation continues; None: the preparation starts its own (``core/loop_steps.py``).
    steps: LoopSteps | None = None

    def sealer(self, sealer: ContentSealer | None) -> ContentSealer | None:
        """``sealer`` bound to this request's tenant and API (None without one)."""
        return None if sealer is None else sealer.bound(self.tenant.scope, self.thinking_signatures)


@dataclass(slots=True)
class Preparation:
    """What the stages have decided so far about one request (each stage fills in its own fields)."""

    body: JsonBody
    origin: Origin
    budget: InputBudget
    request: ResponsesRequest
    received_at: float
    #: The preparation's work on the event loop, in steps of a few ms (``core/loop_steps.py``).
    steps: LoopSteps
    coordinator: Coordinator | None = None
    team: Team | None = None
    logprob_tokens: int | None = None  # the output tokens logprobs allow (None: none asked for)
    summaries: str | None = None
    summary_cutoff: bool = False
    conversation: str | None = None
    seen: tuple[int, str | None] = (0, None)  # the conversation's item count and last id, as rendered
    history: ConversationHistory | None = None  # the conversation so far (None: none, or not read yet)
    conversation_items: ConversationItems | None = None  # what reads them, if an item_reference needs them
    compaction_asked: bool = False  # a final compaction_trigger item was taken off the input
    previous: Chain | None = None
    tools: ServerTools | None = None
    compaction: Compaction | None = None
    truncated: int = 0  # messages truncation left out
    sampling_notes: dict[str, str] = field(
        default_factory=dict
    )  # what a setting sent guarantees (sampling_notes)
    response_id: str = field(init=False)  # set by continue_chain
    session: SessionIdentity = field(init=False)  # set by continue_chain
    prompt: Prompt = field(init=False)  # set by render_prompt
    #: The input items as they will be stored, and their JSON (set by keep_input; None: not made yet).
    stored_items: tuple[tuple[str, ...], tuple[bytes, ...]] | None = None
    minted_ids: tuple[str, ...] = ()  # the stored items' ids the server minted (set with stored_items)


async def open_request(body: JsonBody, origin: Origin, limit: int, window: int) -> Preparation:
    """Open the request's budget on its body (a 400 if what the client sent is over ``limit`` bytes),
    then parse its fields (``request.parse_request``: a 400 naming the first one wrong), in steps."""
    received = origin.received_at if origin.received_at is not None else time.perf_counter()
    steps = origin.steps or LoopSteps()
    budget = InputBudget(limit, window, spent=body.size)
    budget.check(body.size if origin.sent_bytes is None else origin.sent_bytes)
    request = capped_tier(await steps.through(parsing_request(body)), origin.tenant)
    return Preparation(body, origin, budget, request, received, steps, coordinator=origin.coordinator)


async def apply_template(p: Preparation, prompts: PromptTemplates) -> None:
    """Expand a stored prompt template (``prompt``), refused past what the budget has left."""
    p.request, added = await prompts.apply(p.request, p.budget.left)
    p.budget.spend(added)


def form_team(p: Preparation, host: SubagentHost, pool: SubagentPool, tool_timeout: float) -> None:
    """With the multi-agent beta header, read ``multi_agent``; enabled, the response gets a team of
    sub-agents (run by ``host`` within ``pool``), whose coordinator its tools show."""
    config = parse_multi_agent(p.request.multi_agent) if p.origin.multi_agent_beta else None
    if config is not None:
        p.team = Team(host, pool, config, p.body.data, tool_timeout, p.origin.tenant)
        p.coordinator = p.team.coordinator()


async def check_options(p: Preparation, store: ResponseStore) -> None:
    """Refuse what no prompt needs to show wrong: logprobs past their bound (400), a store that cannot keep
    a stored response (503 now, not a generated response that cannot be kept), an unknown summary option."""
    p.logprob_tokens = logprob_token_limit(p.request, p.origin.choices)
    if p.request.store:
        await store.ping()
    p.summaries = summary_mode(p.request)
    p.summary_cutoff = summary_cutoff(p.request)


async def read_conversation(p: Preparation, conversations: ConversationsService) -> None:
    """A ``conversation``'s history so far and what was rendered of it, bounded with the input's bytes
    (``ConversationsService.history``), and what reads its items for an ``item_reference``."""
    if p.request.conversation is None:
        return
    p.conversation = conversation_id(p.request.conversation)
    given = [  # new items' ids (an item_reference's id names an item that is there already)
        i.data["id"]
        for i in p.request.input
        if not isinstance(i, (str, ItemReference)) and isinstance(i.data.get("id"), str)
    ]
    tenant = p.origin.tenant
    with _stage("read_conversation") as live:
        p.history, p.seen, stored = await conversations.history(p.conversation, given, p.budget.spent, tenant)
        live.set_attribute(trace_attrs.ITEMS, p.seen[0])
    p.conversation_items = conversations.items_reader(p.conversation, stored, tenant)


async def read_input(p: Preparation, store: ResponseStore) -> None:
    """Expand ``item_reference`` items (their bytes spent from the budget; ``store``: the tenant's view),
    then take a final ``compaction_trigger`` off the input (anywhere else, a 400)."""
    p.request = await expand_references(p.request, store, p.budget, p.conversation_items)
    await p.steps.boundary()  # each a pass over the items' types (~1 ms for 20,000)
    p.request, p.compaction_asked = compaction_triggered(p.request)
    await p.steps.boundary()


async def continue_chain(p: Preparation, chains: Chains) -> None:
    """What ``previous_response_id`` continues (its history is the conversation so far), then the
    response's id and session key (``sessions.py``)."""
    if p.request.previous_response_id is not None:
        with _stage("continue_chain"):  # where it was found: chains.chain_of says
            p.previous = await chains.chain_of(
                p.request.previous_response_id, p.origin.lookup, p.origin.tenant
            )
        p.history = p.previous.history
    p.response_id = new_id("resp")
    # Whether a later turn can continue it by previous_response_id: stored, or on a WebSocket.
    continuable = p.request.store or p.origin.lookup is not None
    p.session = session_of(
        p.request,
        identity=p.origin.identity,
        conversation=p.conversation,
        previous=p.previous,
        own_id=p.response_id if continuable else None,
    )
    if p.team is not None:  # its sub-agents' spans name it (subagents.py)
        p.team.session_key = p.session.key


async def render_prompt(p: Preparation, renderer: Renderer) -> None:
    """The prompt (the conversation so far, then the input) and the server-run tools; the request as its
    ``configuration_update`` items leave it (the response says what it used)."""
    with _stage("render_prompt") as live:  # where and what it rendered: Renderer.build_prompt says
        await _render(p, renderer)
        live.set_attribute(trace_attrs.PROMPT_TOKENS, len(p.prompt.token_ids))


async def _render(p: Preparation, renderer: Renderer) -> None:
    p.prompt, p.tools = await renderer.render(
        p.request,
        tenant=p.origin.tenant,
        thinking=p.origin.thinking_signatures,
        lookup=p.origin.lookup,
        size=p.budget.spent,
        history=p.history,
        steps=p.steps,
        coordinator=p.coordinator,
    )
    if p.prompt.configuration:
        p.request = p.request.model_copy(update=p.prompt.configuration)
    await p.steps.boundary()


async def compact_if_asked(p: Preparation, compactor: Compactor) -> None:
    """Compact the conversation first (``compaction.py``) when a ``compaction_trigger`` asked, or the prompt
    is past the request's ``context_management`` threshold; the compacted window is rendered instead."""
    threshold = compact_threshold(p.request)
    over = threshold is not None and len(p.prompt.token_ids) > threshold
    if not p.origin.compact or not (p.compaction_asked or over):
        return
    with _stage("compact_if_asked"):
        await _compact(p, compactor)


async def _compact(p: Preparation, compactor: Compactor) -> None:
    request = p.request
    tenant = p.origin.tenant
    p.compaction = await compactor.compact(
        request, tenant=tenant, lookup=p.origin.lookup, size=p.budget.spent, session=p.session
    )
    window = request.model_copy(
        update={"input": parse_items(window_for_turn(p.compaction, request)), "previous_response_id": None}
    )
    before = p.prompt.token_ids
    p.prompt, _ = await compactor.renderer.render(
        window, tenant=tenant, size=p.budget.spent, tools=p.tools, prepare_tools=False
    )
    # The history compacted away is nobody's prefix now: released past what the window still starts with.
    compactor.executor.release(
        p.session.key, before, tenant.salt, keep=_common_prefix(before, p.prompt.token_ids), why="ended"
    )


def _common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens ``a`` and ``b`` start with alike."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def fit_window(p: Preparation, executor: Executor, adapter: HarmonyAdapter) -> None:
    """Fit the prompt to the context window (``truncation: "auto"`` drops its oldest messages), and refuse it
    when it does not fit or asks for a constraint the engine cannot apply (400s); ``admit_prompt`` then
    admits it to the adapter's caches."""
    room = executor.max_seq_len - len(p.prompt.token_ids)
    if room < 1 and p.request.truncation == "auto":
        limit = executor.max_seq_len
        with _stage("fit_window") as live:
            cut = truncate_prompt(adapter, p.prompt, limit, p.request.max_output_tokens or limit // 8)
            if cut is not None:
                p.prompt, p.truncated = cut
                live.set_attribute(trace_attrs.TRUNCATED, p.truncated)
    # The context window, and the engine's own limit on one prompt (max_num_tokens without chunked prefill).
    refusal = executor.prompt_refusal(len(p.prompt.token_ids))
    if refusal is not None:
        raise InvalidRequestError(refusal, param="input", code="context_length_exceeded")
    constraint = p.prompt.constraint
    if constraint is not None and executor.constraint_refusal is not None:
        raise InvalidRequestError(
            executor.constraint_refusal + ".",
            param=_constrained_by(constraint.final, constraint.call_required),
            code="unsupported_parameter",
        )


async def admit_prompt(p: Preparation, adapter: HarmonyAdapter) -> None:
    """Admit the accepted prompt to the adapter's caches (its developer message, its new items' renders),
    in steps: 20,000 new items are 20,000 entries."""
    await p.steps.through(adapter.admitting(p.prompt))


async def keep_input(p: Preparation) -> None:
    """The input items as they will be stored, their ids minted and their JSON made (what cannot be stored
    fails as a 400), in steps; nothing when the response is stored nowhere."""
    request = p.request
    if not (request.store or p.conversation):
        p.stored_items = ((), ())
        return
    p.stored_items, p.minted_ids = await p.steps.through(_kept(request.input))


def _kept(
    input: str | tuple[InputItem, ...],
) -> Stepped[tuple[tuple[tuple[str, ...], tuple[bytes, ...]], tuple[str, ...]]]:
    """Each of ``input``'s items as it will be stored, one at a time (``core.Stepped``): its id and its
    JSON (an exact-size copy, as the store keeps it: ``store.StoredResponse``); and the ids the server
    minted (those the client gave none for: docs/tenants.md#isolation). Each normalized item is let go
    in its own step (20,000 of them freed together held the loop ~8 ms)."""
    ids, dumped, minted = [], [], []
    for typed in input_as_items(input):
        yield
        item = normalized_item(typed)
        item_id = str(item["id"])
        ids.append(item_id)
        dumped.append(exact_bytes(orjson.dumps(item)))
        if "id" not in typed.data:
            minted.append(item_id)
    return (tuple(ids), tuple(dumped)), tuple(minted)


def generation_of(
    p: Preparation, executor: Executor, adapter: HarmonyAdapter, defaults: SamplingDefaults
) -> GenerationRequest:
    """The generation the executor is asked for: the prompt, sampled as asked (else as ``defaults``), for
    at most the room left in the window (and what logprobs allow)."""
    request, prompt = p.request, p.prompt
    room = executor.max_seq_len - len(prompt.token_ids)
    max_tokens = min(request.max_output_tokens or room, room, p.logprob_tokens or room)
    sampling = sampling_settings(
        request,
        defaults,
        max_tokens=max_tokens,
        stop_token_ids=adapter.stop_token_ids,
        logprobs=logprobs_wanted(request),
        unapplied=executor.unapplied_sampling,
    )
    p.sampling_notes = sampling_notes(sampling, executor.seed_note)
    return GenerationRequest(
        request_id=p.response_id,
        prompt_token_ids=prompt.token_ids,
        sampling=sampling,
        constraint=prompt.constraint,
        priority=service_tier(request)[1],
        cache_retention_seconds=cache_retention_seconds(request),
        session_key=p.session.key,
        session_parent=p.session.parent,
        session_final=p.session.final,
        cache_salt=p.origin.tenant.salt,
        client_tools=_client_tools(p),
    )


def _client_tools(p: Preparation) -> bool:
    """Whether the turn may end in a call the client runs: a tool shown to the model that no server-run provider
    serves (docs/sessions-and-kv-cache.md#retention)."""
    tools = p.prompt.tools
    served = p.tools.providers if p.tools is not None else {}
    return any(tool.namespace not in served for tool in (*tools.tools, *tools.loaded))


async def first_snapshot(
    p: Preparation,
    generation: GenerationRequest,
    model_name: str,
    store: ResponseStore,
    adapter: HarmonyAdapter,
) -> Response:
    """The in_progress response (``initial_response``), with ``prompt_cache_diagnostics`` against the stored
    response ``prompt_cache_options.comparison_response_id`` names, when it names one (in ``store``: the
    tenant's view)."""
    request = p.request
    response = initial_response(
        p.response_id,
        request,
        model_name,
        p.conversation,
        p.truncated,
        sampling=generation.sampling,
        notes=p.sampling_notes,
    )
    options = request.prompt_cache_options
    if options is not None and options.comparison_response_id is not None:
        compared = await store.get(options.comparison_response_id)
        echoed = to_dict(response)
        echoed["prompt_cache_diagnostics"] = prompt_cache_diagnostics(adapter, p.prompt, echoed, compared)
        response = type(response).model_validate(echoed)
    return response


def freeze(
    p: Preparation,
    generation: GenerationRequest,
    response: Response,
    sealer: ContentSealer | None,
    redact_reasoning: bool,
    tool_timeout: float,
) -> PreparedResponse:
    """What was decided, frozen: the input items as they will be stored (serialized now: what cannot be
    stored fails as a 400), and how reasoning and tool reads are sealed (asked for with ``include``, or
    ``redact_reasoning``)."""
    request = p.request
    if p.stored_items is None:  # keep_input did not run (a caller of the stages alone)
        kept = request.store or p.conversation
        p.stored_items, p.minted_ids = at_once(_kept(request.input)) if kept else (((), ()), ())
    item_ids, items_json = p.stored_items
    sealer = p.origin.sealer(sealer)
    encrypted = sealer is not None and (redact_reasoning or ENCRYPTED_REASONING in (request.include or ()))
    return PreparedResponse(
        prompt=p.prompt,
        request=request,
        generation=generation,
        response=response,
        received_at=p.received_at,
        input_item_ids=item_ids,
        input_items_json=items_json,
        sealer=sealer,
        minted_input_ids=p.minted_ids,
        seal_reasoning=sealer.seal_reasoning if sealer is not None and encrypted else None,
        seal_tool_read=sealer.seal_tool_read if sealer is not None and encrypted else None,
        compaction=p.compaction,
        summary_mode=p.summaries,
        summary_cutoff=p.summary_cutoff,
        conversation_id=p.conversation,
        conversation_seen=p.seen if p.conversation else (0, None),
        tools=p.tools,
        tool_timeout=tool_timeout,
        generate=p.origin.generate,
        previous_history=p.previous.history if p.previous and request.previous_response_id else None,
        session_key=p.session.key,
        session_parent=p.session.parent,
        session_final=p.session.final,
        team=p.team,
        owner=p.origin.tenant,
    )


def _constrained_by(final: str, call_required: bool) -> str:
    """The request field that asked for a constraint: the structured-output format (the final answer is JSON), a
    required tool choice, or a tool with a grammar."""
    if final == "json":
        return "text.format"
    return "tool_choice" if call_required else "tools"
