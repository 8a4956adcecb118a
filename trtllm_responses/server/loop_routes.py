"""Routes agent loops use beside create: token counting and compaction (cancel: ``routes.py``).

Thin, like ``routes.py``: read the body (under create's limits, ``body.py``), call the service, frame the answer.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..request import session_identity
from ..responses import ResponsesService
from .body import model_input, read_body
from .operations import tenant_of
from .responses import JSONBytesResponse

__all__ = ["build_loop_router"]


def build_loop_router(service: ResponsesService) -> APIRouter:
    """``POST /v1/responses/input_tokens`` and ``/v1/responses/compact``."""
    router = APIRouter()

    async def body(request: Request) -> bytes:
        return await read_body(request.receive, request.scope["headers"], model_input(service))

    @router.post("/v1/responses/input_tokens")
    async def count_input_tokens(request: Request) -> Response:
        return JSONBytesResponse(
            await service.count_input_tokens(await body(request), tenant_of(request.scope))
        )

    @router.post("/v1/responses/compact")
    async def compact(request: Request) -> Response:
        identity = session_identity(request.scope["headers"])
        return JSONBytesResponse(
            await service.compact(await body(request), tenant_of(request.scope), identity)
        )

    return router
