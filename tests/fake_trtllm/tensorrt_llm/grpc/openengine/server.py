"""tensorrt_llm/grpc/openengine/server.py, faked: ``launch_server``, the OpenEngine gRPC server's lifecycle.

As there (NVIDIA/TensorRT-LLM ``server.py`` at ``06cb2191b0be3da4297abb13d5082a5e39b3b460``): a backend other
than pytorch is refused; the ``LLM`` from ``llm_args``; both servicers registered on a ``grpc.aio`` server
(plaintext h2c, no authentication: a warning when bound to a non-loopback address); the KV transfer backend
from ``cache_transceiver_config`` (its presence decides, not ``backend``: unset is "DEFAULT"); "Server is ready
to accept requests" once served; SIGTERM or SIGINT stops it with a 5 s grace and shuts the LLM down. Left out:
``--num_serve_frontends`` for this protocol, load metrics, subagent affinity keys.
"""

import asyncio
import logging
import signal
from typing import Any, Optional

import grpc

from ... import LLM
from .bindings import openengine_pb2_grpc
from .control import OpenEngineControlServicer
from .servicer import OpenEngineInferenceServicer

logger = logging.getLogger("tensorrt_llm")

_MAX_MESSAGE_LENGTH_BYTES = 32 * 1024 * 1024


def _kv_transfer_backend(llm: Any) -> str:
    config = llm.args.cache_transceiver_config
    if config is None:
        return ""
    return str(config.backend or "DEFAULT")


async def _serve(host: str, port: int, llm_args: dict[str, Any], served_model_name: Optional[str]) -> None:
    if llm_args.get("backend", "pytorch") != "pytorch":
        raise ValueError(
            f"{llm_args.get('backend')} is not a known backend, check help for available options."
        )
    llm_args.pop("build_config", None)
    llm = LLM(**llm_args)
    model = served_model_name or llm_args.get("model", "")
    backend = _kv_transfer_backend(llm)
    inference = OpenEngineInferenceServicer(llm, model, kv_transfer_backend=backend)
    control = OpenEngineControlServicer(llm, inference, model, kv_transfer_backend=backend)
    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", _MAX_MESSAGE_LENGTH_BYTES),
            ("grpc.max_receive_message_length", _MAX_MESSAGE_LENGTH_BYTES),
        ]
    )
    openengine_pb2_grpc.add_InferenceServicer_to_server(inference, server)
    openengine_pb2_grpc.add_ControlServicer_to_server(control, server)
    address = f"{host}:{port}"
    server.add_insecure_port(address)
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("The OpenEngine gRPC listener on %s is plaintext h2c with no authentication", address)
    await server.start()
    logger.info("TensorRT-LLM OpenEngine gRPC server started on %s", address)
    logger.info("Server is ready to accept requests")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop(grace=5.0)
        llm.shutdown()
        logger.info("Shutdown complete")


def launch_server(
    host: str, port: int, llm_args: dict[str, Any], served_model_name: Optional[str] = None
) -> None:
    """Serve ``openengine.v1.Inference`` and ``openengine.v1.Control`` on ``host:port`` until SIGTERM or SIGINT."""
    asyncio.run(_serve(host, port, llm_args, served_model_name))
