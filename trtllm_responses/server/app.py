"""create_app: the ASGI app, built from injected collaborators (no globals, no environment reads).

``POST /v1/responses`` (and the other APIs' create routes) are served by ``router.ResponsesApp``
directly (the per-token hot path); the other routes, the lifespan and the error handlers are
a FastAPI app inside it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from ..adapter import HarmonyAdapter
from ..core import build_sdk_models
from ..executors import Executor
from ..harmony import RenderPool
from ..ops import CollectorSchedule, ServerMetrics, tracing
from ..responses import (
    BackgroundLimits,
    ContentSealer,
    PromptTemplates,
    ResponsesService,
    check_defaults,
    load_key,
)
from ..store import ResponseStore
from .config import ServerConfig
from .conversation_routes import build_conversation_router
from .errors import install_error_handlers
from .group import group_metrics_dir
from .loop_routes import build_loop_router
from .openapi import install_openapi
from .operations import GracefulShutdown
from .router import ResponsesApp
from .routes import build_model_router, build_operations_router, build_router
from .sse import SSE_FRAMING

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


def create_app(
    config: ServerConfig,
    executor: Executor,
    store: ResponseStore,
    adapter: HarmonyAdapter,
    sealer: ContentSealer | None = None,
) -> ResponsesApp:
    """An app serving the Responses API with ``executor``; starts and shuts it down with the app.

    ``sealer`` encrypts reasoning and compaction content; by default its key comes from
    ``config.encryption_key_file``, the environment or the cache folder (``sealing.load_key``).
    """
    service = _service(config, executor, store, adapter, sealer)
    shutdown = GracefulShutdown(service, config.shutdown_timeout)
    app = FastAPI(
        title="trtllm-responses", lifespan=_lifespan(config, service, shutdown), docs_url=None, redoc_url=None
    )
    app.state.service = service
    install_error_handlers(app)
    install_openapi(app)
    app.state.shutdown = shutdown
    app.include_router(build_router(service, config))
    app.include_router(build_model_router(config))
    app.include_router(build_operations_router(service, config))
    app.include_router(build_loop_router(service))
    app.include_router(build_conversation_router(service.conversations))
    return ResponsesApp(app, service, config)


def _service(
    config: ServerConfig,
    executor: Executor,
    store: ResponseStore,
    adapter: HarmonyAdapter,
    sealer: ContentSealer | None,
) -> ResponsesService:
    """The service, configured from ``config``; its background runs record SSE frames."""
    metrics = ServerMetrics(
        multiprocess_dir=group_metrics_dir(config.group_dir) if config.group_dir else None,
        frontend=config.frontend_index,
    )
    return ResponsesService(
        executor=executor,
        store=store,
        adapter=adapter,
        model_name=config.served_model_name,
        metrics=metrics,
        sealer=sealer or ContentSealer(load_key(config.encryption_key_file)),
        redact_reasoning=config.redact_reasoning,
        reasoning_summaries=config.reasoning_summaries == "model",
        max_input_bytes=config.max_input_bytes,
        prompts=PromptTemplates(config.prompts),
        tool_settings=config.tools,
        render_pool=RenderPool(config.render_workers or None, config.log_format),
        sampling_defaults=config.sampling,
        subagent_limits=config.subagents,
        replay_prefix_bytes=config.replay_prefix_bytes,
        background_limits=BackgroundLimits(grace=config.background_grace),
        framing=SSE_FRAMING,
        admission_limits=config.admission,
    )


def _lifespan(
    config: ServerConfig, service: ResponsesService, shutdown: GracefulShutdown
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the executor (and what runs beside the responses) with the app; end them with it."""
    executor, metrics = service.executor, service.metrics

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each process of a group traces on its own (after its fork): docs/tracing-and-dashboards.md.
        tracing.configure(config.otlp_traces_endpoint, instance=f"{config.port}/{config.frontend_index}")
        await _start_executor(config, executor)
        if config.start_render_worker:
            await service.render_pool.start()
        build_sdk_models()  # not in the first request of each kind (core/wire.py)
        # Everything alive now (modules, schemas, vocab tables, the model's Python side) lives as long
        # as the process: take it out of the cyclic GC's full collections, which otherwise walk it
        # all and stall the event loop for tens of milliseconds under load. Refcounting still frees.
        gc.collect()
        gc.freeze()
        shutdown.attach(asyncio.get_running_loop())
        # ... and from now on, collect when it cannot stall streams (ops/gc_schedule.py).
        # Idle: no response generating and none being prepared (a 20,000-item body's preparation is
        # seconds of steps: a full collection between two would walk every one of its objects).
        collector = asyncio.ensure_future(
            CollectorSchedule(lambda: metrics.idle() and not service.preparing, metrics.record_gc).run()
        )
        watchdog = asyncio.ensure_future(metrics.watch_event_loop())
        tending = asyncio.ensure_future(service.runs.tend())  # background runs' grace, cancels via Redis
        try:
            yield
        finally:
            watchdog.cancel()
            tending.cancel()
            await shutdown.drain()
            collector.cancel()
            await service.render_pool.aclose()
            service.decoder.close()
            await executor.shutdown()
            await service.store.close()
            tracing.shutdown()

    return lifespan


async def _start_executor(config: ServerConfig, executor: Executor) -> None:
    """Start the executor; refuse (``--unsupported_sampling refuse``) sampling defaults it cannot apply."""
    try:
        await executor.start()
    except Exception as exc:
        logger.error("The %s executor could not start: %s", executor.name, exc)
        raise
    unapplied = check_defaults(config.sampling, executor.unapplied_sampling)
    if unapplied and config.sampling.unsupported == "refuse":
        await executor.shutdown()
        raise RuntimeError("the sampling defaults cannot be applied: " + " ".join(unapplied))
    for reason in unapplied:
        logger.warning("Sampling default dropped (--unsupported_sampling ignore): %s", reason)
    if config.tenants_file is not None and executor.prefix_isolation_refusal is not None:
        # Tenants were promised KV prefixes of their own (docs/tenants.md#sealed-content-kv-prefixes-and-caches).
        await executor.shutdown()
        raise RuntimeError("cannot keep tenants apart: " + executor.prefix_isolation_refusal)
    logger.info("Serving %s with the %s executor", config.served_model_name, executor.name)
