"""Routes agent loops use beside create: token counting, compaction, and cancel.

Thin, like ``routes.py``: read the body, call the service, frame the answer.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..service import ResponsesService
from .responses import JSONBytesResponse

__all__ = ["build_loop_router"]


def build_loop_router(service: ResponsesService) -> APIRouter:
    """``POST /v1/responses/input_tokens``, ``/v1/responses/compact``, ``/v1/responses/{id}/cancel``."""
    router = APIRouter()

    @router.post("/v1/responses/input_tokens")
    async def count_input_tokens(request: Request) -> Response:
        return JSONBytesResponse(await service.count_input_tokens(await request.body()))

    @router.post("/v1/responses/compact")
    async def compact(request: Request) -> Response:
        return JSONBytesResponse(await service.compact(await request.body()))

    @router.post("/v1/responses/{response_id}/cancel")
    async def cancel(response_id: str) -> Response:
        return JSONBytesResponse(await service.cancel(response_id))

    return router
