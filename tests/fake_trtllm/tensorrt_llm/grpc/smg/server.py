"""tensorrt_llm/grpc/smg/server.py, faked: ``launch_server``, the SMG gRPC server's lifecycle.

As there: the ``LLM`` built from ``llm_args`` (the PyTorch backend; another is refused), a
``GrpcRequestManager`` and ``TrtllmServiceServicer`` over it, a ``grpc.aio`` server with 32 MiB message limits
and keepalive (30 s, timeout 10 s, pings without calls permitted), an insecure port on ``host:port``; the log
lines "TensorRT-LLM SMG gRPC server started on HOST:PORT" and "Server is ready to accept requests"; SIGTERM or
SIGINT stops the server with a 5 s grace (running streams end) and shuts the LLM down. Not copied: uvloop (the
default event loop serves), server reflection.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any, Optional

import grpc

from ... import LLM
from .bindings import trtllm_service_pb2_grpc
from .request_manager import GrpcRequestManager
from .servicer import TrtllmServiceServicer

__all__ = ["launch_server"]

logger = logging.getLogger("tensorrt_llm")

_MAX_MESSAGE_LENGTH_BYTES = 32 * 1024 * 1024


async def _serve(host: str, port: int, llm_args: dict[str, Any], served_model_name: Optional[str]) -> None:
    if llm_args.get("backend", "pytorch") != "pytorch":
        raise ValueError(
            f"{llm_args.get('backend')} is not a known backend, check help for available options."
        )
    llm_args.pop("build_config", None)
    llm = LLM(**llm_args)
    manager = GrpcRequestManager(llm)
    servicer = TrtllmServiceServicer(manager, model_path=served_model_name or llm_args.get("model", ""))
    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", _MAX_MESSAGE_LENGTH_BYTES),
            ("grpc.max_receive_message_length", _MAX_MESSAGE_LENGTH_BYTES),
            ("grpc.keepalive_time_ms", 30000),
            ("grpc.keepalive_timeout_ms", 10000),
            ("grpc.keepalive_permit_without_calls", True),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10000),
        ]
    )
    trtllm_service_pb2_grpc.add_TrtllmServiceServicer_to_server(servicer, server)
    address = f"{host}:{port}"
    server.add_insecure_port(address)
    await server.start()
    logger.info("TensorRT-LLM SMG gRPC server started on %s", address)
    logger.info("Server is ready to accept requests")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        logger.info("Shutting down TensorRT-LLM SMG gRPC server...")
        await server.stop(grace=5.0)
        llm.shutdown()
        logger.info("Shutdown complete")


def launch_server(
    host: str, port: int, llm_args: dict[str, Any], served_model_name: Optional[str] = None
) -> None:
    """Serve ``trtllm.TrtllmService`` on ``host:port`` until SIGTERM or SIGINT."""
    asyncio.run(_serve(host, port, llm_args, served_model_name))
