"""ResponsesService: the Responses API, transport-free.

``prepare`` turns a request body into a prompt (checking everything a client
can get wrong, before any generation starts); ``drive`` generates one
response, handing each engine step's events to a ``deliver`` callback, stores
the result before the terminal event leaves, and returns the terminal response.
Streaming and non-streaming responses both use ``drive``: one code path, one
loop per token (no generator layers between the engine and the socket).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson
from openai.types.responses import Response, ResponseCompactionItem, ResponseStreamEvent

from .compaction import (
    Compaction,
    compact_conversation,
    compact_threshold,
    compacted_response_json,
    window_for_turn,
)
from .conversations import ConversationsService, conversation_id
from .errors import InvalidRequestError, NotFoundError, ServerError, ServiceUnavailableError
from .executors.base import Executor, GenerationRequest, SamplingSettings
from .harmony.adapter import EMPTY_HISTORY, ConversationHistory, HarmonyAdapter, Prompt, RenderedMessage
from .harmony.render_pool import RenderPool
from .ids import new_id
from .input_items import normalize_input_items
from .logprobs import LogprobStreamProcessor
from .metrics import ServerMetrics
from .pagination import list_page_json
from .protocol import ResponsesRequest, parse_request
from .sealing import ContentSealer, is_tool_read, unseal_items
from .store import ResponseStore, StoredResponse
from .stream import ResponseStream, TokenStreamProcessor
from .tool_loop import ToolLoop
from .tools.base import ServerTools
from .tools.prepare import prepare_server_tools
from .tools.settings import ToolSettings
from .wire import to_dict, to_json

__all__ = ["Deliver", "HistoryLookup", "PreparedResponse", "ResponsesService", "default_max_input_bytes"]

#: Receives each engine step's events (the streaming transport writes them out).
Deliver: TypeAlias = Callable[[list[ResponseStreamEvent]], Awaitable[None]]

logger = logging.getLogger(__name__)

#: Requests up to this size render on the event loop (≈1 ms of tokenizing); larger ones in the worker.
INLINE_RENDER_BYTES = 16 << 10
#: Request bytes allowed per token of context window: generous for any text that fits the window
#: (gpt-oss averages ~4 bytes of text per token; JSON escaping and item framing add to it).
INPUT_BYTES_PER_TOKEN = 16


def default_max_input_bytes(max_seq_len: int) -> int:
    """``--max_input_bytes`` when not set: sized to the context window."""
    return INPUT_BYTES_PER_TOKEN * max_seq_len


@dataclass(slots=True)
class PreparedResponse:
    """A checked request, its prompt, and the response it will become."""

    request: ResponsesRequest
    prompt: Prompt
    generation: GenerationRequest
    response: Response  # the in_progress snapshot
    received_at: float
    conversation_id: str | None = None  # conversation=: its items come first; this turn's are appended
    conversation_seen: tuple[int, str | None] = (0, None)  # its item count and last item id, as rendered
    stream: ResponseStream | None = None  # while driven: its state (GET of an in-progress response)
    cancelled: bool = False  # a client cancelled it (background): it ends with status "cancelled"
    # Filled in by drive (for the access log): when the executor's first delta came, final usage.
    first_token_at: float | None = None
    usage: Any = None
    # The input items as stored (serialized before generation: what cannot be stored fails as a 400).
    input_item_ids: tuple[str, ...] = ()
    input_items_json: tuple[bytes, ...] = ()
    #: Seals each reasoning item's ``encrypted_content`` (asked for with ``include``, or redacting).
    seal_reasoning: Callable[[str], str] | None = None
    #: Seals a tool-read carrier (sealing.py) after each server-run tool item the client sees less of.
    seal_tool_read: Callable[[str, dict[str, Any]], str | None] | None = None
    #: Asked at each Harmony message boundary; a reason (e.g. ``steered``) ends the response there.
    stop_requested: Callable[[], str | None] | None = None
    #: The conversation was compacted before this response (``context_management``).
    compaction: Compaction | None = None

    tools: ServerTools | None = None  # server-run tools (MCP servers): the response runs the tool loop
    tool_loop: ToolLoop | None = None  # while driven with server-run tools: its loop (cancelled by abort)


#: Finds the history of a ``previous_response_id`` somewhere other than the store (a WebSocket's own).
HistoryLookup: TypeAlias = Callable[[str], ConversationHistory | None]

ENCRYPTED_REASONING = "reasoning.encrypted_content"


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
        max_input_bytes: int | None = None,
        inline_render_bytes: int = INLINE_RENDER_BYTES,
        render_pool: RenderPool | None = None,
        tool_settings: ToolSettings | None = None,
    ) -> None:
        self.tool_settings = tool_settings or ToolSettings()
        self.executor = executor
        self.sealer = sealer
        self.redact_reasoning = redact_reasoning and sealer is not None
        self.store = store
        self.adapter = adapter
        self.model_name = model_name
        self.metrics = metrics or ServerMetrics()
        #: Responses being generated in this process, by id (foreground and background).
        self.live: dict[str, PreparedResponse] = {}
        #: The executor request id each live response is generating now (the tool loop runs several).
        self.generating: dict[str, str] = {}
        self.max_input_bytes = max_input_bytes or default_max_input_bytes(executor.max_seq_len)
        self.inline_render_bytes = inline_render_bytes
        self.render_pool = render_pool or RenderPool()
        self.conversations = ConversationsService(store, adapter, self._render_history)

    def check_input_size(self, size: int) -> None:
        """Refuse a request body of ``size`` bytes before reading further, if it exceeds ``max_input_bytes``."""
        if size > self.max_input_bytes:
            raise InvalidRequestError(
                f"The request is larger than {self.max_input_bytes} bytes, more than this model's context "
                f"window of {self.executor.max_seq_len} tokens can hold (--max_input_bytes).",
                param="input",
                code="context_length_exceeded",
            )

    # -- create ----------------------------------------------------------------------------

    async def prepare(
        self,
        body: bytes | dict[str, Any],
        received_at: float | None = None,
        *,
        lookup: HistoryLookup | None = None,
        compact: bool = True,
    ) -> PreparedResponse:
        """Check a request body and render its prompt. Raises APIError for anything wrong.

        With ``compact`` (the default), a ``context_management`` threshold the prompt
        exceeds compacts the conversation first (a summarization generation).

        ``lookup`` is asked for ``previous_response_id`` before the store (a WebSocket's
        connection-local state); an id neither knows is ``previous_response_not_found``
        there, a 404 over HTTP.
        """
        received = received_at if received_at is not None else time.perf_counter()
        size = len(body) if isinstance(body, bytes) else len(orjson.dumps(body))
        self.check_input_size(size)
        request = parse_request(body)
        conversation = None
        seen: tuple[int, str | None] = (0, None)
        conversation_history = None
        if request.conversation is not None:
            conversation = conversation_id(request.conversation)
            conversation_history, seen = await self.conversations.history(conversation)
        prompt, tools = await self.render(request, lookup=lookup, size=size, history=conversation_history)
        compaction = None
        threshold = compact_threshold(request)
        if compact and threshold is not None and len(prompt.token_ids) > threshold:
            compaction = await compact_conversation(self, request, lookup=lookup, size=size)
            window = request.model_copy(
                update={"input": window_for_turn(compaction, request), "previous_response_id": None}
            )
            prompt, _ = await self.render(window, size=size, tools=tools, prepare_tools=False)
        room = self.executor.max_seq_len - len(prompt.token_ids)
        if room < 1:
            raise InvalidRequestError(
                f"The input is {len(prompt.token_ids)} tokens; this model's context window is "
                f"{self.executor.max_seq_len} tokens.",
                param="input",
                code="context_length_exceeded",
            )
        self.adapter.admit(prompt)
        max_tokens = min(request.max_output_tokens or room, room)
        response_id = new_id("resp")
        generation = GenerationRequest(
            request_id=response_id,
            prompt_token_ids=prompt.token_ids,
            sampling=SamplingSettings(
                max_tokens=max_tokens,
                stop_token_ids=self.adapter.stop_token_ids,
                temperature=request.temperature,
                top_p=request.top_p,
                seed=request.seed,
                logprobs=_logprobs(request),
            ),
            constraint=prompt.constraint,
        )
        items = normalize_input_items(request.input) if request.store or conversation else []
        sealer = self.sealer
        include = request.include or ()
        encrypted = sealer is not None and (self.redact_reasoning or ENCRYPTED_REASONING in include)
        seal = sealer.seal_reasoning if sealer is not None and encrypted else None
        return PreparedResponse(
            request=request,
            prompt=prompt,
            generation=generation,
            response=self._snapshot(response_id, request, conversation),
            received_at=received,
            input_item_ids=tuple(item["id"] for item in items),
            input_items_json=tuple(orjson.dumps(item) for item in items),
            seal_reasoning=seal,
            seal_tool_read=sealer.seal_tool_read if sealer is not None and encrypted else None,
            compaction=compaction,
            conversation_id=conversation,
            conversation_seen=seen if conversation else (0, None),
            tools=tools,
        )

    async def _render_history(self, messages: list[Any], size: int) -> list[RenderedMessage]:
        """Render a conversation's messages: in the worker process when large, as ``_build_prompt`` does."""
        if size <= self.inline_render_bytes:
            return self.adapter.render_messages(messages)
        renders = await self.render_pool.render(messages)
        return [self.adapter.rendered(m, tokens) for m, tokens in zip(messages, renders, strict=True)]

    async def history_of(self, response_id: str, lookup: HistoryLookup | None = None) -> ConversationHistory:
        """The conversation a ``previous_response_id`` names; NotFoundError if none does."""
        if lookup is not None:
            local = lookup(response_id)
            if local is not None:
                return local
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
        return previous.history

    async def render(
        self,
        request: ResponsesRequest,
        *,
        lookup: HistoryLookup | None = None,
        size: int = 0,
        tools: ServerTools | None = None,
        prepare_tools: bool = True,
        history: ConversationHistory | None = None,
    ) -> tuple[Prompt, ServerTools | None]:
        """The prompt ``request`` builds (its conversation so far, encrypted items opened, its input),
        and its server-run tools (prepared here unless ``prepare_tools`` is False: then ``tools``)."""
        if history is None:  # else: the conversation's (``conversation=``)
            history = EMPTY_HISTORY
        if request.previous_response_id is not None:
            history = await self.history_of(request.previous_response_id, lookup)
        if prepare_tools:
            tools = await prepare_server_tools(request, history.calls, self.tool_settings)
        namespaces = [ns.as_json() for ns in tools.namespaces] if tools is not None else []
        # The built-in tools shown ({} hides every declared one: their backends are off).
        builtin = tools.builtin if tools is not None else {}
        if self.sealer is not None and not isinstance(request.input, str):
            opened = unseal_items(request.input, self.sealer)
            if opened is not request.input:
                request = request.model_copy(update={"input": opened})
        return await self._build_prompt(request, history, size, namespaces, builtin), tools

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
    ) -> Prompt:
        """The prompt; a large request's new messages are rendered in the worker process, off the event loop."""
        adapter = self.adapter
        draft = adapter.draft_prompt(request, history, namespaces, builtin)
        if size <= self.inline_render_bytes or not draft.to_render:
            return adapter.finish_prompt(draft, adapter.render_messages(draft.to_render))
        renders = await self.render_pool.render(draft.to_render)
        rendered = [adapter.rendered(m, tokens) for m, tokens in zip(draft.to_render, renders, strict=True)]
        return adapter.finish_prompt(draft, rendered)

    def _snapshot(
        self, response_id: str, request: ResponsesRequest, conversation: str | None = None
    ) -> Response:
        reasoning = request.reasoning
        data: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "completed_at": None,
            "status": "in_progress",
            "incomplete_details": None,
            "model": self.model_name,
            "previous_response_id": request.previous_response_id,
            "instructions": request.instructions,
            "output": [],
            "error": None,
            "tools": [_echo_tool(t) for t in request.tools],
            "tool_choice": request.tool_choice,
            "truncation": request.truncation or "disabled",
            "parallel_tool_calls": request.parallel_tool_calls,
            "text": _echo_text(request.text),
            "top_p": request.top_p if request.top_p is not None else 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "top_logprobs": request.top_logprobs or 0,
            "temperature": request.temperature if request.temperature is not None else 1.0,
            "reasoning": {
                "effort": (reasoning.effort if reasoning and reasoning.effort else "medium"),
                "summary": reasoning.summary if reasoning else None,
            },
            "usage": None,
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": request.max_tool_calls,
            "store": request.store,
            "background": request.background,
            "service_tier": "default",
            "metadata": request.metadata or {},
            "safety_identifier": request.safety_identifier,
            "prompt_cache_key": request.prompt_cache_key,
            "user": request.user,
            "conversation": {"id": conversation} if conversation else None,
        }
        try:
            return Response.model_validate(data)
        except Exception as exc:  # a field we echo did not fit the SDK's Response
            raise InvalidRequestError(f"The request could not be echoed in a response: {exc}") from exc

    async def drive(self, prepared: PreparedResponse, deliver: Deliver | None = None) -> bytes:
        """Generate one response to its end; return the terminal response as JSON.

        ``deliver`` receives each engine step's events as they happen (streaming);
        without it the events are only used to build the response (non-streaming:
        the same path). An executor failure ends the response with
        ``response.failed``. The response is stored before the terminal event is
        delivered. The executor's generation is aborted whenever this stops before
        the executor finished: client gone (the caller cancels), malformed output,
        a delivery error.
        """
        stream = ResponseStream(
            prepared.response,
            prepared.seal_reasoning,
            self.redact_reasoning,
            tools=prepared.prompt.tools,
            seal_tool_read=prepared.seal_tool_read,
        )
        prompt_tokens = len(prepared.prompt.token_ids)
        top_logprobs = prepared.generation.sampling.logprobs
        processor = (
            TokenStreamProcessor(stream, self.adapter.encoding, prompt_tokens, prepared.stop_requested)
            if top_logprobs is None
            else LogprobStreamProcessor(
                stream, self.adapter.encoding, prompt_tokens, top_logprobs, prepared.stop_requested
            )
        )
        prepared.stream = processor.stream
        response_id = prepared.generation.request_id
        self.live[response_id] = prepared
        try:
            opening = processor.start()
            if prepared.compaction is not None:
                done = prepared.compaction
                processor.count_extra(done.input_tokens, done.output_tokens, done.reasoning_tokens)
                opening += processor.stream.compacted(
                    ResponseCompactionItem.model_validate(done.compaction_item)
                )
            loop = None
            if prepared.tools is not None:
                request = prepared.request
                loop = ToolLoop(
                    tools=prepared.tools,
                    adapter=self.adapter,
                    processor=processor,
                    generation=prepared.generation,
                    prompt=prepared.prompt,
                    calls=dict(prepared.prompt.history.calls),
                    max_seq_len=self.executor.max_seq_len,
                    max_output_tokens=request.max_output_tokens,
                    max_tool_calls=request.max_tool_calls,
                    tool_timeout=self.tool_settings.tool_timeout,
                    include=frozenset(request.include or ()),
                )
                opening += loop.opening()
                prepared.tool_loop = loop
            if deliver is not None:
                await deliver(opening)
        except BaseException:
            self.live.pop(response_id, None)
            raise
        self.metrics.record_handoff(time.perf_counter() - prepared.received_at)
        self.metrics.active += 1
        try:
            if loop is None:
                events = await self._generate(prepared.generation, processor, deliver)
            else:
                events = await loop.run(self._generate, deliver)
            try:
                final_json = await self._keep(prepared, processor.stream)
            except Exception:  # the store or the serializer failed: the client still gets a terminal event
                logger.exception("Could not serialize or store %s", prepared.generation.request_id)
                events[-1] = processor.stream.fail_instead("The server could not store the response.")
                final_json = to_json(processor.stream.final_response)  # type: ignore[arg-type]
            final = processor.stream.final_response
            self.metrics.record_response(
                processor.output_tokens,
                status=final.status if final is not None and final.status else "failed",
                input_tokens=len(prepared.prompt.token_ids),
                cached_tokens=processor.cached_tokens,
                received_at=prepared.received_at,
                first_token_at=processor.first_token_at,
            )
            prepared.first_token_at = processor.first_token_at
            prepared.usage = processor.usage()
            if deliver is not None:
                await deliver(events)
            return final_json
        finally:
            self.live.pop(response_id, None)
            self.metrics.active -= 1

    async def _generate(
        self, generation: GenerationRequest, processor: TokenStreamProcessor, deliver: Deliver | None
    ) -> list[ResponseStreamEvent]:
        """Run one generation through ``processor``, delivering each step's events but the last (returned).

        It ends when the processor is done: a terminal event, or a held server-run
        tool call (the tool loop goes on). The generation is aborted in the
        executor whenever this stops before the executor finished.
        """
        deltas = self.executor.generate(generation)
        executor_finished = False
        response_id = generation.request_id.partition(".")[0]  # the tool loop's turns are <id>.<n>
        self.generating[response_id] = generation.request_id
        first = processor.first_token_at is None  # for the access log; a local flag costs nothing per token
        try:
            while True:
                try:
                    delta = await deltas.__anext__()
                    if first:
                        processor.first_token_at = time.perf_counter()
                        first = False
                except StopAsyncIteration:
                    return processor.fail("The executor ended the stream without a finish reason.")
                except Exception as exc:  # the executor failed: response.failed, never a broken stream
                    logger.exception("Executor failed on %s", generation.request_id)
                    return processor.fail(f"The executor failed: {exc}")
                executor_finished = delta.finish_reason is not None
                try:
                    events = processor.process(delta)
                except Exception:
                    logger.exception("Internal error while streaming %s", generation.request_id)
                    return processor.fail("The server had an error while processing the model's output.")
                if processor.done:
                    return events
                if events and deliver is not None:
                    await deliver(events)
        finally:
            if self.generating.get(response_id) == generation.request_id:
                del self.generating[response_id]
            if not executor_finished:
                self.executor.abort(generation.request_id)
                self.metrics.record_abort()
            await deltas.aclose()

    def abort(self, response_id: str) -> None:
        """Abort the generation ``response_id`` is running now, if any, or its running tool call (its stream then ends)."""
        prepared = self.live.get(response_id)
        if prepared is not None and prepared.tool_loop is not None:
            prepared.tool_loop.cancel()
        self.executor.abort(self.generating.get(response_id, response_id))

    async def _keep(self, prepared: PreparedResponse, stream: ResponseStream) -> bytes:
        """Serialize the terminal response once, and store it (when asked) before anyone sees it."""
        final = stream.final_response
        if final is None:
            raise ServerError("The response ended without a terminal event.")
        if prepared.cancelled and final.status == "failed":
            # The executor stopped because a client cancelled it: the terminal event (the same
            # object) and the stored response both say so.
            final.status = "cancelled"
            final.error = None
        final_json = to_json(final)
        turn = None
        if prepared.conversation_id is not None and final.status in ("completed", "incomplete"):
            items = list(zip(prepared.input_item_ids, prepared.input_items_json, strict=True))
            items += [(item.id, to_json(item)) for item in final.output if item.id]
            turn = self.history_after(prepared, [to_dict(item) for item in stream.model_output])
            try:
                await self.conversations.append(
                    prepared.conversation_id, items, turn, prepared.conversation_seen
                )
            except ServiceUnavailableError:
                self.metrics.record_store_error()
                raise  # drive ends the response failed instead
        if prepared.request.store:
            model_output = stream.model_output  # tool items as the model read them
            history = turn or self.history_after(prepared, [to_dict(item) for item in model_output])
            entry = StoredResponse(
                id=final.id,
                response_json=final_json,
                input_item_ids=prepared.input_item_ids,
                input_items_json=prepared.input_items_json,
                history=history,
            )
            try:
                await self.store.put(entry)
            except ServiceUnavailableError:
                self.metrics.record_store_error()
                raise  # drive ends the response failed instead: a response asked to be stored never silently is not
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
        self.check_input_size(len(body))
        request = parse_request(body)
        if request.model is None:  # required here, as in the SDK's ResponseCompactParams
            raise InvalidRequestError(
                "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
            )
        compaction = await compact_conversation(self, request, size=len(body))
        return orjson.dumps(compacted_response_json(compaction))

    async def retrieve(self, response_id: str) -> bytes:
        """The response's JSON: its current snapshot while it is generated here, else the stored one."""
        live = self.live.get(response_id)
        if live is not None and live.stream is not None:
            return to_json(live.stream.snapshot())
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


def _echo_text(text: dict[str, Any] | None) -> dict[str, Any]:
    """``text`` as the response echoes it: a json_schema format with every field (description, strict)."""
    if not text:
        return {"format": {"type": "text"}}
    fmt = text.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        fmt = {**fmt, "description": fmt.get("description"), "strict": bool(fmt.get("strict"))}
        return {**text, "format": fmt}
    return text


def _logprobs(request: ResponsesRequest) -> int | None:
    """Alternatives per token when logprobs are asked for (``top_logprobs`` or ``include``), else None."""
    wanted = request.include is not None and "message.output_text.logprobs" in request.include
    if request.top_logprobs is None and not wanted:
        return None
    return request.top_logprobs or 0


def _echo_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the response echoes it: function tools with every field the spec requires.

    MCP tools lose ``headers`` and ``authorization``: secrets go to the MCP server only.
    """
    if tool.get("type") == "mcp":
        return {k: (None if k in ("headers", "authorization") else v) for k, v in tool.items()}
    if tool.get("type") != "function":
        return tool
    return {
        "type": "function",
        "name": tool["name"],
        "description": tool.get("description"),
        "parameters": tool.get("parameters"),
        "strict": tool.get("strict", False),
    }
