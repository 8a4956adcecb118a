"""The HTTP routes. Thin: parse what HTTP carries, call the service, frame the answer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..core import APIError, AuthenticationError, InvalidRequestError, NotFoundError, check_id
from ..ops import merge_snapshots
from ..request import ReplayPrefixes
from ..responses import ResponsesService
from ..tenants import TenantDirectory
from .config import ServerConfig
from .dialects import anthropic_error_response, anthropic_models
from .errors import error_response
from .group import FORWARDED, NOT_HELD, forward, gather_stats
from .operations import metrics_text, stored_bytes, tenant_of, unauthorized
from .responses import FramesResponse, JSONBytesResponse

__all__ = ["build_model_router", "build_operations_router", "build_router"]


def cache_stats(service: ResponsesService) -> dict[str, object]:
    """This process's caches of what replays repeat: their size, bound and how often they were found."""
    renders = service.adapter.item_renders
    prefixes = service.decoder.prefixes
    return {
        "rendered_items": None
        if renders is None
        else {
            "entries": len(renders),
            "bytes": renders.nbytes,
            "max_bytes": renders.max_bytes,
            "hits": renders.hits,
            "misses": renders.misses,
        },
        "replay_prefixes": None
        if not isinstance(prefixes, ReplayPrefixes)
        else {
            "entries": len(prefixes),
            "bytes": prefixes.bytes,
            "max_bytes": prefixes.max_bytes,
            "hits": prefixes.hits,
            "reused_items": prefixes.reused_items,
        },
    }


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequestError(f"'{name}' must be an integer.", param=name) from None
    if not low <= value <= high:
        raise InvalidRequestError(f"'{name}' must be between {low} and {high}.", param=name)
    return value


def page_query(request: Request) -> dict[str, Any]:
    """``after``, ``limit`` (1-100, default 20) and ``order`` (``asc``, ``desc`` default) of a list route."""
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError("'order' must be 'asc' or 'desc'.", param="order")
    limit = _int_param(request, "limit", 20, 1, 100)
    return {"after": request.query_params.get("after"), "limit": limit, "order": order}


def build_router(service: ResponsesService, config: ServerConfig) -> APIRouter:
    """Routes of stored responses, by id: each one call into the service (``GET``, ``?stream=true``
    replay, ``cancel``, ``DELETE``, ``input_items``) as the request's tenant (another tenant's id is a 404:
    docs/tenants.md#isolation), framed here."""
    router = APIRouter()
    # A group of frontends on a store without a relay (SQLite): a background response runs in one of them;
    # what this frontend cannot find is asked of the others (``group.py``).
    peers = config.group_dir is not None and service.runs.relay is None

    async def or_from_peers(request: Request, answer: Awaitable[Response]) -> Response:
        return await (_or_from_peers(request, answer, config) if peers else answer)

    @router.get("/v1/responses/{response_id}")
    async def retrieve_response(response_id: str, request: Request) -> Response:
        check_id(response_id, "response_id", "resp")
        stream = request.query_params.get("stream", "false").lower()
        if stream not in ("true", "false"):
            raise InvalidRequestError("'stream' must be true or false.", param="stream")
        if stream == "true":
            starting_after = _int_param(request, "starting_after", -1, -1, 1 << 62)
            after = None if starting_after < 0 else starting_after
            replay = service.replay(response_id, after, tenant_of(request.scope))
            return await or_from_peers(request, _frames(replay))
        if "starting_after" in request.query_params:
            raise InvalidRequestError(
                "'starting_after' only applies with stream=true.", param="starting_after"
            )
        return await or_from_peers(request, _json(service.retrieve(response_id, tenant_of(request.scope))))

    @router.post("/v1/responses/{response_id}/cancel")
    async def cancel_response(response_id: str, request: Request) -> Response:
        check_id(response_id, "response_id", "resp")
        return await or_from_peers(request, _json(service.cancel(response_id, tenant_of(request.scope))))

    @router.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str, request: Request) -> Response:
        check_id(response_id, "response_id", "resp")
        return JSONBytesResponse(await service.delete(response_id, tenant_of(request.scope)))

    @router.get("/v1/responses/{response_id}/input_items")
    async def list_input_items(response_id: str, request: Request) -> Response:
        check_id(response_id, "response_id", "resp")
        tenant = tenant_of(request.scope)
        return JSONBytesResponse(await service.input_items(response_id, **page_query(request), tenant=tenant))

    return router


async def _or_from_peers(request: Request, answer: Awaitable[Response], config: ServerConfig) -> Response:
    """``answer``, or, when this frontend does not hold what was asked (an error ``not_held_here``: the
    response is unknown here, or its events are kept elsewhere), the answer of the group's frontend that
    does (``group.forward``), else this frontend's own error. A request already forwarded is not
    forwarded again: such an error is answered marked (``NOT_HELD``), so the asking frontend asks the next."""
    try:
        return await answer
    except APIError as error:
        if not error.not_held_here:
            raise
        if FORWARDED in request.headers:
            return error_response(error, {NOT_HELD: "1"})
        assert config.group_dir is not None
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        found = await forward(
            config.group_dir,
            config.num_serve_frontends,
            config.frontend_index,
            request.method,
            target,
            _identity(request),
        )
        if found is None:
            raise
        return StreamingResponse(found.body, status_code=found.status, media_type=found.content_type)


def _identity(request: Request) -> dict[str, str]:
    """The headers that name a request's tenant (its key, as Bearer or Anthropic's ``x-api-key``): a peer
    frontend identifies it again from them, and answers only what that tenant owns
    (docs/tenants.md#isolation)."""
    names = ("authorization", "x-api-key")
    return {name: request.headers[name] for name in names if name in request.headers}


def build_model_router(config: ServerConfig) -> APIRouter:
    """``/v1/models``: the one served model, in OpenAI's shape or, asked by Anthropic's clients, theirs."""
    router = APIRouter()
    started = int(time.time())
    model = {
        "id": config.served_model_name,
        "object": "model",
        "created": started,
        "owned_by": "trtllm-responses",
    }
    anthropic = anthropic_models(config.served_model_name, config.model_aliases, started)

    @router.get("/v1/models")
    async def list_models(request: Request) -> dict[str, object]:
        if "anthropic-version" in request.headers:  # Anthropic's SDK and Claude Code: its list shape
            return {
                "data": anthropic,
                "has_more": False,
                "first_id": anthropic[0]["id"],
                "last_id": anthropic[-1]["id"],
            }
        return {"object": "list", "data": [model]}

    @router.get("/v1/models/{model_id}")
    async def retrieve_model(model_id: str, request: Request) -> Any:
        if "anthropic-version" in request.headers:
            found = next((m for m in anthropic if m["id"] == model_id), None)
            if found is None:
                error = NotFoundError(f"model: {model_id}", param="model", code="model_not_found")
                return anthropic_error_response(error)
            return found
        if model_id != config.served_model_name:
            raise NotFoundError(
                f"The model '{model_id}' does not exist.", param="model", code="model_not_found"
            )
        return model

    return router


def build_operations_router(service: ResponsesService, config: ServerConfig) -> APIRouter:
    """``/stats``, ``/metrics`` and ``/health``: what an operator reads."""
    router = APIRouter()

    @router.get("/stats")
    async def stats(request: Request) -> dict[str, object]:
        return await _stats(service, config, request)

    @router.get("/metrics")
    async def prometheus_metrics(request: Request) -> Response:
        tenants: TenantDirectory = request.app.state.tenants
        body, content_type = await metrics_text(service, tenants.tenants.tenants.values())
        return Response(body, media_type=content_type)

    @router.get("/health")
    async def health() -> Response:
        # As trtllm-serve's /health (serve/openai_server.py): 200 only while the engine answers its own health
        # check (BaseLLM._check_health), 503 once it is dead, so a balancer or orchestrator takes this replica out.
        status = {"status": "ok", "executor": service.executor.name, "frontend": config.frontend_index}
        if service.executor.healthy():
            return JSONResponse(status)
        error = {
            "message": f"The {service.executor.name} engine is not running (its health check failed): see the server log.",
            "type": "server_error",
            "param": None,
            "code": "engine_unavailable",
        }
        return JSONResponse(status | {"status": "unavailable", "error": error}, status_code=503)

    return router


async def _stats(service: ResponsesService, config: ServerConfig, request: Request) -> dict[str, object]:
    """``/stats``: this frontend's (``scope=frontend``) or its group's metrics, caches and store."""
    # What the caches and windows count crosses tenants (docs/tenants.md#isolation): reading or resetting
    # them needs an admin tenant's key once keys are asked for (a 401, as OpenAI answers a key missing a scope).
    tenants: TenantDirectory = request.app.state.tenants
    tenant = tenants.identify(request.scope["headers"])
    if tenant is None or not tenant.admin:
        raise (
            unauthorized(request.scope)
            if tenant is None
            else AuthenticationError(
                "You have insufficient permissions for this operation: /stats needs an admin tenant's key."
            )
        )
    reset = request.query_params.get("reset") == "1"
    own = request.query_params.get("scope") == "frontend"  # one frontend's own, for the group's view
    group: dict[str, object] = {}
    if config.group_dir is not None and not own:
        others, missing = await gather_stats(
            config.group_dir,
            config.num_serve_frontends,
            config.frontend_index,
            reset,
            request.headers.get("authorization"),
        )
        if reset:
            service.metrics.reset()
        snapshot = merge_snapshots([service.metrics.snapshot(samples=True), *others])
        group = {"frontends": config.num_serve_frontends - len(missing), "frontends_missing": missing}
    else:
        if reset:
            service.metrics.reset()
        snapshot = service.metrics.snapshot(samples=own)
    store = await service.store.stats()
    for name, nbytes in (await stored_bytes(service, tenants.tenants.tenants.values())).items():
        snapshot["tenants"].setdefault(name, {})["stored_bytes"] = nbytes
    return {
        **snapshot,
        **group,
        "caches": cache_stats(service),
        "store": {
            "responses": store.responses,
            "bytes": store.bytes,
            "bytes_per_response": round(store.bytes / store.responses) if store.responses else None,
            "max_responses": store.max_responses,
            "max_bytes": store.max_bytes,
            "evictions": store.evictions,
            "rejected": store.rejected,
        },
    }


async def _frames(frames: Awaitable[AsyncIterator[bytes]]) -> Response:
    return FramesResponse(await frames)


async def _json(answer: Awaitable[bytes]) -> Response:
    return JSONBytesResponse(await answer)
