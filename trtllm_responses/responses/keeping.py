"""Keeper: a run's result kept before its terminal event leaves (docs/architecture.md#the-runs-life).

A run's driver (``generation.py``) hands it the ended stream: the terminal response is serialized
once, appended to its conversation (``conversation=``) and stored (``store: true``), and the history
it leaves is remembered for the turn that continues it (``previous_response_id``). A store that fails
raises (ServiceUnavailableError, counted): the driver ends the response failed instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from ..adapter import ConversationHistory, HarmonyAdapter
from ..core import ByteBoundedCache, ServerError, ServiceUnavailableError, to_dict, to_json
from ..ops import ServerMetrics, trace_attrs, tracing
from ..store import Parent, ResponseStore, StoredResponse, scoped
from ..stream import ResponseStream
from .conversations import ConversationsService
from .prepared import PreparedResponse
from .sealing import ContentSealer, is_tool_read, unseal_items
from .sessions import Chain

__all__ = ["Keeper"]


@dataclass(frozen=True, slots=True)
class Keeper:
    """Stores ended responses and appends them to their conversations (one per service)."""

    store: ResponseStore
    conversations: ConversationsService
    #: The histories of responses stored here, by id: continuing one reads none of it from the store.
    chain_histories: ByteBoundedCache[Chain]
    adapter: HarmonyAdapter
    metrics: ServerMetrics
    sealer: ContentSealer | None
    #: Reasoning is stored redacted (sealed): its history is opened with the response's own sealer
    #: (``PreparedResponse.sealer``: ``sealer`` bound to its tenant).
    redact_reasoning: bool

    async def keep(self, prepared: PreparedResponse, stream: ResponseStream) -> bytes:
        """Serialize the terminal response once, and store it (when asked) before anyone sees it."""
        final = stream.final_response
        if final is None:
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
                with _store_span("conversation.append", self.store, items=len(items)):
                    await self.conversations.append(
                        prepared.conversation_id, items, turn, prepared.conversation_seen, prepared.owner
                    )
            except ServiceUnavailableError:
                self.metrics.record_store_error()
                raise  # the driver ends the response failed instead
        if prepared.request.store:
            model_output = stream.model_output  # tool items as the model read them
            history = turn or self.history_after(
                prepared, [to_dict(item, logprobs=False) for item in model_output]
            )
            output_ids = _item_ids(final.output)
            previous = prepared.request.previous_response_id
            entry = StoredResponse(
                id=final.id,
                response_json=final_json,
                input_item_ids=prepared.input_item_ids,
                input_items_json=prepared.input_items_json,
                history=history,
                session_key=prepared.session_key,
                output_item_ids=output_ids,
                # Only ids the server minted are found store-wide (docs/tenants.md#isolation).
                indexed_item_ids=(*prepared.minted_input_ids, *output_ids),
                # What it adds to the response it continues is what the store writes (store/base.py).
                parent=None
                if previous is None or prepared.previous_history is None
                else Parent(previous, prepared.previous_history),
            )
            try:
                with _store_span("store.put", self.store, size=len(final_json)):
                    kept = await scoped(self.store, prepared.owner.scope).put(entry)
            except ServiceUnavailableError:
                self.metrics.record_store_error()
                raise  # the driver ends it failed instead: a response asked to be stored never silently is not
            if kept:
                chain = Chain(history, prepared.session_key)
                self.chain_histories.admit(prepared.owner.scope + final.id, chain, history.nbytes)
        return final_json

    def history_after(
        self, prepared: PreparedResponse, output: Sequence[Mapping[str, Any]]
    ) -> ConversationHistory:
        """The conversation after a response: its prompt's plus its ``output`` items (reasoning unredacted).

        A ``compaction`` output item is already in the prompt (as the summary), so it is skipped,
        as are tool-read carriers: ``output`` is the model's (its tool items have their read fields).
        """
        output = [item for item in output if item.get("type") != "compaction" and not is_tool_read(item)]
        if self.redact_reasoning and prepared.sealer is not None:
            output = unseal_items(output, prepared.sealer, "output")  # type: ignore[assignment]
        return self.adapter.continue_history(prepared.prompt, output)


#: The name of each backend (``--store``'s scheme) by its class.
_BACKENDS = {"ConversationHistoryStore": "memory", "SQLiteStore": "sqlite", "RedisStore": "redis"}


def _store_span(
    name: str, store: ResponseStore, *, size: int | None = None, items: int | None = None
) -> AbstractContextManager[tracing.SpanLike]:
    """The span of one store write (``store.put``, ``conversation.append``): its backend, bytes, items."""
    if not tracing.enabled():
        return tracing.span("")
    backend = type(store).__name__
    attributes: dict[str, tracing.AttributeValue] = {
        trace_attrs.STORE_BACKEND: _BACKENDS.get(backend, backend)
    }
    if size is not None:
        attributes[trace_attrs.BYTES] = size
    if items is not None:
        attributes[trace_attrs.ITEMS] = items
    return tracing.span(name, attributes)


def _item_ids(output: Sequence[Any]) -> tuple[str, ...]:
    """The ids of a response's output items (what the store indexes, without reading its JSON back)."""
    return tuple(i for i in (getattr(item, "id", None) for item in output) if isinstance(i, str))
