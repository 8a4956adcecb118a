"""tensorrt_llm/executor/proxy.py, faked: ``GenerationExecutorProxy`` and multi-frontend serving's attach.

As on TensorRT-LLM's main branch after PR #16523 (``num_serve_frontends``, merged 2026-07-17;
``tensorrt_llm/serve/_frontend_processes.py``, ``executor/proxy.py``, ``executor/utils.py``):

- an ``LLM(num_serve_frontends=K)`` with K > 1 is the launcher: it owns the engine, and its executor, a
  ``GenerationExecutorProxy``, answers ``multi_frontend_attach_info()`` with what an attached frontend
  needs to reach it (there: the request ingress, one result lane a frontend, HMAC keys; JSON-able; None
  outside multi-frontend mode). trtllm-serve pre-generates the ipc folder and key
  (``TLLM_MULTI_FRONTEND_IPC_DIR``, ``TLLM_MULTI_FRONTEND_HMAC``, ``executor/utils.py:
  get_multi_frontend_ipc_info``) before the executor is made; the fake takes them from there (else makes
  its own);
- trtllm-serve hands that information to each attached frontend in ``TLLM_EXECUTOR_ATTACH_INFO`` (with
  ``TLLM_EXECUTOR_FRONTEND_ID`` and ``TLLM_DISABLE_MPI=1``); an ``LLM`` made where it is set attaches to
  the launcher's engine instead of starting one (``GenerationExecutor.create`` ->
  ``GenerationExecutorFrontendProxy``), and the variable, which carries keys, is deleted once consumed.

Faked: what one engine holds for every frontend is its KV cache. The launcher serves its blocks on a Unix
socket in the ipc folder (``multiprocessing.connection``, authenticated with the key) and an attached
frontend's requests reuse and store blocks there, so ``cached_tokens`` is the one engine's whichever
frontend a turn lands on. The fake model's tokens are computed where the request is: its plan is
deterministic, the same in every process.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Optional

__all__ = ["ATTACH_ENV", "GenerationExecutorProxy", "RemoteKvBlocks"]

ATTACH_ENV = "TLLM_EXECUTOR_ATTACH_INFO"
#: The most frontends ``num_serve_frontends`` takes (PR #16523: "default 1 = off, max 64").
MAX_FRONTENDS = 64


class GenerationExecutorProxy:
    """The launcher's executor: the engine (here, its KV blocks), served to attached frontends when K > 1."""

    def __init__(self, kv: Any, num_frontends: int) -> None:
        self._kv = kv
        self._lock = threading.Lock()
        self.num_frontends = num_frontends
        self._listener: Optional[Listener] = None
        self._info: Optional[dict[str, Any]] = None
        if num_frontends > 1:
            ipc_dir = os.environ.get("TLLM_MULTI_FRONTEND_IPC_DIR") or tempfile.mkdtemp(
                prefix="fake-trtllm-ipc-"
            )
            key = os.environ.get("TLLM_MULTI_FRONTEND_HMAC") or secrets.token_hex(32)
            address = os.path.join(ipc_dir, "request.sock")
            self._listener = Listener(address, family="AF_UNIX", authkey=bytes.fromhex(key))
            self._info = {
                "request_addr": address,
                "result_addrs": [os.path.join(ipc_dir, f"result_{i}.sock") for i in range(num_frontends)],
                "hmac_key": key,
            }
            threading.Thread(target=self._accept, name="fake-engine-ipc", daemon=True).start()

    def multi_frontend_attach_info(self) -> Optional[dict[str, Any]]:
        return self._info

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                connection = self._listener.accept()
            except (OSError, EOFError):
                return  # shut down
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: Connection) -> None:
        with connection:
            while True:
                try:
                    op, args = connection.recv()
                except (EOFError, OSError):
                    return
                with self._lock:
                    connection.send(self._kv.reuse(*args) if op == "reuse" else self._kv.store(*args))

    def shutdown(self) -> None:
        self._shut_down = True
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def is_shutdown(self) -> bool:
        """GenerationExecutor.is_shutdown (``executor/executor.py``): what ``BaseLLM._check_health`` reads."""
        return getattr(self, "_shut_down", False)

    #: GenerationExecutor's ``_fatal_error``: what killed the engine (the ``#crash`` hook sets it).
    _fatal_error: Optional[BaseException] = None

    def check_health(self) -> bool:
        """GenerationExecutor.check_health (``executor/executor.py``): False once the engine is down; what the gRPC
        server's health check asks (``GrpcRequestManager.health_check``, tensorrt_llm/grpc/smg/request_manager.py)."""
        return not self.is_shutdown()


class RemoteKvBlocks:
    """An attached frontend's view of the launcher's KV blocks (``reuse``/``store`` as ``_kv_pool.KvPool``)."""

    def __init__(self, info: dict[str, Any], frontend_id: int) -> None:
        if not 0 < frontend_id < len(info["result_addrs"]):
            # proxy.py: "attached frontends use ids 1..{num_lanes - 1} (id 0 is the launcher)"
            raise ValueError(
                f"frontend_id {frontend_id} out of range: attached frontends use ids "
                f"1..{len(info['result_addrs']) - 1} (id 0 is the launcher)"
            )
        self._connection = Client(
            info["request_addr"], family="AF_UNIX", authkey=bytes.fromhex(info["hmac_key"])
        )
        self._lock = threading.Lock()
        self.frontend_id = frontend_id

    def _call(self, op: str, args: tuple[Any, ...]) -> Any:
        with self._lock:
            self._connection.send((op, args))
            return self._connection.recv()

    def reuse(
        self,
        prompt: list[int],
        salt: Optional[str] = None,
        retention: Any = None,
        max_tokens: Optional[int] = None,
    ) -> Any:
        return self._call("reuse", (list(prompt), salt, retention, max_tokens))

    def store(
        self,
        tokens: list[int],
        salt: Optional[str] = None,
        retention: Any = None,
        prompt_len: Optional[int] = None,
    ) -> None:
        self._call("store", (list(tokens), salt, retention, prompt_len))
