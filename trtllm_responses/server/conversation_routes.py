"""The Conversations API routes. Thin: read what HTTP carries, call ConversationsService as the request's
tenant (another tenant's conversation is a 404: docs/tenants.md#isolation), frame the answer."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..core import check_id
from ..responses import ConversationsService
from .body import MAX_CONVERSATION_BODY_BYTES, BodyLimit, read_body
from .operations import tenant_of
from .responses import JSONBytesResponse
from .routes import page_query

__all__ = ["build_conversation_router"]

_LIMIT = BodyLimit(MAX_CONVERSATION_BODY_BYTES)


async def _read(request: Request) -> bytes:
    """The body, under the Conversations API's limit (``body.py``)."""
    return await read_body(request.receive, request.scope["headers"], _LIMIT)


def build_conversation_router(conversations: ConversationsService) -> APIRouter:
    """``/v1/conversations…`` bound to one service."""
    router = APIRouter()

    @router.post("/v1/conversations")
    async def create(request: Request) -> Response:
        return JSONBytesResponse(await conversations.create(await _read(request), tenant_of(request.scope)))

    @router.get("/v1/conversations/{conversation_id}")
    async def retrieve(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        return JSONBytesResponse(await conversations.retrieve(conversation_id, tenant_of(request.scope)))

    @router.post("/v1/conversations/{conversation_id}")
    async def update(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        tenant = tenant_of(request.scope)
        return JSONBytesResponse(await conversations.update(conversation_id, await _read(request), tenant))

    @router.delete("/v1/conversations/{conversation_id}")
    async def delete(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        return JSONBytesResponse(await conversations.delete(conversation_id, tenant_of(request.scope)))

    @router.get("/v1/conversations/{conversation_id}/items")
    async def list_items(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        # ``include`` asks for extra fields (logprobs, image urls, …) that these items never hold.
        tenant = tenant_of(request.scope)
        return JSONBytesResponse(
            await conversations.list_items(conversation_id, **page_query(request), tenant=tenant)
        )

    @router.post("/v1/conversations/{conversation_id}/items")
    async def add_items(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        tenant = tenant_of(request.scope)
        return JSONBytesResponse(await conversations.add_items(conversation_id, await _read(request), tenant))

    @router.get("/v1/conversations/{conversation_id}/items/{item_id}")
    async def get_item(conversation_id: str, item_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        check_id(item_id, "item_id")
        tenant = tenant_of(request.scope)
        return JSONBytesResponse(await conversations.get_item(conversation_id, item_id, tenant))

    @router.delete("/v1/conversations/{conversation_id}/items/{item_id}")
    async def delete_item(conversation_id: str, item_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        check_id(item_id, "item_id")
        tenant = tenant_of(request.scope)
        return JSONBytesResponse(await conversations.delete_item(conversation_id, item_id, tenant))

    return router
