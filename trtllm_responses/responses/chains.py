"""What a ``previous_response_id`` continues: its conversation so far and its session key.

:class:`Chains` finds it in a connection's own responses first (a WebSocket's, or a sub-agent team's:
a :data:`~.sessions.HistoryLookup`), then in the histories this process stored or read, then in the
store. A stored response never changes, so continuing one this process remembers only asks the store
whether it is still there (``touch``), whatever its length
(docs/agents-and-long-sessions.md#long-agent-loops).
"""

from __future__ import annotations

from ..adapter import ConversationHistory
from ..core import ByteBoundedCache, InvalidRequestError, NotFoundError, check_id
from ..ops import trace_attrs, tracing
from ..store import ResponseStore, scoped
from ..tenants import OPEN, Tenant
from .sessions import Chain, HistoryLookup

__all__ = ["CHAIN_HISTORY_CACHE_BYTES", "Chains"]

#: Bytes of stored responses' histories remembered in this process, so that continuing one
#: (``previous_response_id``) reads none of its history from the store
#: (docs/agents-and-long-sessions.md#long-agent-loops).
CHAIN_HISTORY_CACHE_BYTES = 128 << 20


def _found(where: str) -> None:
    """Say on the current span (``prepare.continue_chain``) where the continued history was found: the
    connection's own responses, this process's remembered histories (a cache hit), or the store."""
    if tracing.enabled():
        tracing.current_span().set_attributes(
            {trace_attrs.CHAIN_SOURCE: where, trace_attrs.CACHE_HIT: where != "store"}
        )


class Chains:
    """The continuations ``previous_response_id`` names, remembered up to ``cache_bytes`` of histories (by
    tenant's scope and id)."""

    def __init__(self, store: ResponseStore, cache_bytes: int = CHAIN_HISTORY_CACHE_BYTES) -> None:
        self.store = store
        #: The histories (and session keys) of responses this process stored or read, by id.
        self.cache: ByteBoundedCache[Chain] = ByteBoundedCache(cache_bytes)

    async def history_of(
        self, response_id: str, lookup: HistoryLookup | None = None, tenant: Tenant = OPEN
    ) -> ConversationHistory:
        """The conversation a ``previous_response_id`` of ``tenant``'s names; NotFoundError if none does."""
        return (await self.chain_of(response_id, lookup, tenant)).history

    async def chain_of(
        self, response_id: str, lookup: HistoryLookup | None = None, tenant: Tenant = OPEN
    ) -> Chain:
        """The conversation and session key a ``previous_response_id`` names among ``tenant``'s responses
        (another tenant's reads as unknown: docs/tenants.md#isolation); NotFoundError if none does
        (over HTTP: a 404), ``previous_response_not_found`` (a 400) where ``lookup`` was asked first.

        Its session key was stored with it, so the root of a chain is known without walking the chain,
        even when another process or replica stored it.
        """
        check_id(response_id, "previous_response_id", "resp")
        if lookup is not None:
            local = lookup(response_id)
            if local is not None:
                _found("connection")
                return local
        store, key = scoped(self.store, tenant.scope), tenant.scope + response_id
        remembered = self.cache.get(key)
        if remembered is not None and await store.touch(response_id):
            _found("cache")
            return remembered
        _found("store")
        previous = await store.get(response_id)
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
        self.cache.admit(key, chain, previous.history.nbytes)
        return chain
