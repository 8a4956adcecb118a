"""Routes agent loops use beside create: token counting and compaction (cancel: ``routes.py``).

Thin, like ``routes.py``: read the body, call the service, frame the answer.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..core import InvalidRequestError
from ..responses import ResponsesService
from .create import MAX_BODY_BYTES
from .responses import JSONBytesResponse

__all__ = ["build_loop_router"]


async def read_body(request: Request, service: ResponsesService) -> bytes:
    """The body, refused as soon as it grows past what create would take (the same limits)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit():  # refused before any of it is read
        service.check_input_size(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            error = InvalidRequestError(
                f"The request body is larger than {MAX_BODY_BYTES >> 20} MiB.", code="request_too_large"
            )
            error.status_code = 413
            raise error
        service.check_input_size(size)
        chunks.append(chunk)
    return b"".join(chunks)


def build_loop_router(service: ResponsesService) -> APIRouter:
    """``POST /v1/responses/input_tokens`` and ``/v1/responses/compact``."""
    router = APIRouter()

    @router.post("/v1/responses/input_tokens")
    async def count_input_tokens(request: Request) -> Response:
        return JSONBytesResponse(await service.count_input_tokens(await read_body(request, service)))

    @router.post("/v1/responses/compact")
    async def compact(request: Request) -> Response:
        return JSONBytesResponse(await service.compact(await read_body(request, service)))

    return router
