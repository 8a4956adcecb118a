"""The Conversations API routes. Thin: read what HTTP carries, call ConversationsService, frame the answer."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..core import InvalidRequestError, check_id
from ..responses import ConversationsService
from .responses import JSONBytesResponse
from .routes import page_query

__all__ = ["build_conversation_router"]

_MAX_BODY = 16 << 20


def _too_large() -> InvalidRequestError:
    error = InvalidRequestError(
        f"The request body is larger than {_MAX_BODY >> 20} MiB.", code="request_too_large"
    )
    error.status_code = 413
    return error


async def _read(request: Request) -> bytes:
    """The body, refused on its ``Content-Length`` before reading, and as soon as it grows past the limit."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > _MAX_BODY:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > _MAX_BODY:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def build_conversation_router(conversations: ConversationsService) -> APIRouter:
    """``/v1/conversations…`` bound to one service."""
    router = APIRouter()

    @router.post("/v1/conversations")
    async def create(request: Request) -> Response:
        return JSONBytesResponse(await conversations.create(await _read(request)))

    @router.get("/v1/conversations/{conversation_id}")
    async def retrieve(conversation_id: str) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        return JSONBytesResponse(await conversations.retrieve(conversation_id))

    @router.post("/v1/conversations/{conversation_id}")
    async def update(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        return JSONBytesResponse(await conversations.update(conversation_id, await _read(request)))

    @router.delete("/v1/conversations/{conversation_id}")
    async def delete(conversation_id: str) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        return JSONBytesResponse(await conversations.delete(conversation_id))

    @router.get("/v1/conversations/{conversation_id}/items")
    async def list_items(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        # ``include`` asks for extra fields (logprobs, image urls, …) that these items never hold.
        return JSONBytesResponse(await conversations.list_items(conversation_id, **page_query(request)))

    @router.post("/v1/conversations/{conversation_id}/items")
    async def add_items(conversation_id: str, request: Request) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        return JSONBytesResponse(await conversations.add_items(conversation_id, await _read(request)))

    @router.get("/v1/conversations/{conversation_id}/items/{item_id}")
    async def get_item(conversation_id: str, item_id: str) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        check_id(item_id, "item_id")
        return JSONBytesResponse(await conversations.get_item(conversation_id, item_id))

    @router.delete("/v1/conversations/{conversation_id}/items/{item_id}")
    async def delete_item(conversation_id: str, item_id: str) -> Response:
        check_id(conversation_id, "conversation_id", "conv")
        check_id(item_id, "item_id")
        return JSONBytesResponse(await conversations.delete_item(conversation_id, item_id))

    return router
