"""tensorrt_llm/grpc/openengine/control.py, faked: ``OpenEngineControlServicer``.

As there (NVIDIA/TensorRT-LLM ``control.py`` at ``06cb2191b0be3da4297abb13d5082a5e39b3b460``):

- ``GetServerInfo``: ``engine_name`` "tensorrt_llm", ``engine_version`` the release played, ``engine_role``
  UNSPECIFIED (the role is per request), the served model, tensor/pipeline parallel sizes, ``schema_revision``,
  ``minimum_client_revision``, ``schema_release`` (the manifest's), ``capacity.kv_block_size`` and
  ``max_running_requests``; ``kv_connector`` only where ``cache_transceiver_config`` is set: ``enabled``, the
  backend, ``supports_remote_prefill`` true, ``supports_decode_pull`` false and ``supports_abort_cleanup``
  **false** (``Abort(kv_session)`` cannot be served: a session's id is the context request id, not a
  ``Generate`` request id).
- ``GetModelInfo``: the served name, ``max_context_length`` = ``max_seq_len`` where set, token-id input, output
  logprobs by top-n, the guided-decoding modes of the grammar backend, cache salt supported, priority and
  prefix-cache bypass not. No vocabulary size (the schema has none).
- ``GetLoad``: ``running_requests`` = the requests whose streams run (no ``--openengine-enable-load-metrics``).
- ``Health``: READY with a ``scheduler`` check while ``llm._check_health()``, else NOT_READY with its message;
  an inference probe is not run (the flag is ignored).
- ``Abort``: by ``request_id``: ABORTED when its stream runs, else ALREADY_FINISHED (so after a context leg's
  ``PrefillReady``); an engine that refuses is ``INTERNAL``; by ``kv_session``: ``UNIMPLEMENTED`` "aborting by
  kv_session is not supported; abort by request_id"; ``all_requests``: every active one; no target:
  ``INVALID_ARGUMENT``. The fake records each Abort by id in ``FAKE_TRTLLM_LOG`` (``abort_rpc``: the id, the
  answer), a record of its own.
- LoRA RPCs, ``GetKvEventSources`` and ``SubscribeKvEvents``: ``UNIMPLEMENTED``, as when KV events are off.

Left out: node discovery, the multi-frontend coordinator, KV events and load metrics.
"""

import uuid
from typing import Any

import grpc

from .bindings import (
    MINIMUM_CLIENT_REVISION,
    SCHEMA_RELEASE,
    SCHEMA_REVISION,
    kv_pb2,
    lifecycle_pb2,
    model_pb2,
    openengine_pb2_grpc,
    server_pb2,
)
from .errors import AbortFailedError
from .request_mapping import supported_guides

_GUIDE_MODES = {
    "json_schema": model_pb2.GUIDED_DECODING_MODE_JSON_SCHEMA,
    "regex": model_pb2.GUIDED_DECODING_MODE_REGEX,
    "ebnf_grammar": model_pb2.GUIDED_DECODING_MODE_EBNF_GRAMMAR,
    "structural_tag": model_pb2.GUIDED_DECODING_MODE_STRUCTURAL_TAG,
    "json_object": model_pb2.GUIDED_DECODING_MODE_JSON_OBJECT,
}


class OpenEngineControlServicer(openengine_pb2_grpc.ControlServicer):
    """``openengine.v1.Control`` over one fake ``LLM`` and its inference servicer (module docstring)."""

    def __init__(self, llm: Any, inference: Any, model: str, kv_transfer_backend: str = "") -> None:
        self._llm = llm
        self._inference = inference
        self._model = model
        self._kv_transfer_backend = kv_transfer_backend
        self._instance_id = str(uuid.uuid4())

    async def GetServerInfo(self, request: Any, context: Any) -> Any:
        import tensorrt_llm

        args = self._llm.args
        info = server_pb2.ServerInfo(
            engine_name="tensorrt_llm",
            engine_version=str(tensorrt_llm.__version__),
            engine_role=server_pb2.ENGINE_ROLE_UNSPECIFIED,
            instance_id=self._instance_id,
            supported_models=[self._model],
            parallelism=server_pb2.ParallelismInfo(
                tensor_parallel_size=args.tensor_parallel_size,
                pipeline_parallel_size=args.pipeline_parallel_size,
            ),
            schema_revision=SCHEMA_REVISION,
            minimum_client_revision=MINIMUM_CLIENT_REVISION,
            schema_release=SCHEMA_RELEASE,
            capacity=server_pb2.DeploymentCapacity(
                kv_block_size=args.kv_cache_config.tokens_per_block,
                max_running_requests=args.max_batch_size or 0,
            ),
        )
        if args.cache_transceiver_config is not None:
            info.kv_connector.CopyFrom(
                kv_pb2.KvConnectorInfo(
                    enabled=True,
                    transfer_backend=self._kv_transfer_backend,
                    supports_remote_prefill=True,
                    supports_decode_pull=False,
                    supports_abort_cleanup=False,
                )
            )
        return info

    async def GetModelInfo(self, request: Any, context: Any) -> Any:
        args = self._llm.args
        modes = [_GUIDE_MODES[name] for name in sorted(supported_guides(args.guided_decoding_backend))]
        info = model_pb2.ModelInfo(
            model_id=self._model,
            served_model_name=self._model,
            supports_text_input=False,
            supports_token_ids_input=True,
            supports_lora=False,
            supports_multimodal=False,
            generation=model_pb2.GenerationCapabilities(
                output_logprobs=model_pb2.LogprobCapabilities(
                    supported=True, candidate_selection_modes=[model_pb2.CANDIDATE_TOKEN_SELECTION_MODE_TOP_N]
                ),
                guided_decoding=model_pb2.GuidedDecodingCapabilities(supported=bool(modes), modes=modes),
                max_num_sequences=1,
                supports_priority=False,
                supports_stop_in_output=True,
                supports_cache_salt=True,
                supports_prefix_cache_bypass=False,
            ),
        )
        if args.max_seq_len:
            info.max_context_length = args.max_seq_len
        return info

    async def GetLoad(self, request: Any, context: Any) -> Any:
        return server_pb2.LoadInfo(
            instance_id=self._instance_id, running_requests=self._inference.active_request_count()
        )

    async def Health(self, request: Any, context: Any) -> Any:
        if self._llm._check_health():
            check = lifecycle_pb2.HealthCheck(name="scheduler", state=lifecycle_pb2.HEALTH_STATE_READY)
            return lifecycle_pb2.HealthResponse(state=lifecycle_pb2.HEALTH_STATE_READY, checks=[check])
        check = lifecycle_pb2.HealthCheck(
            name="scheduler",
            state=lifecycle_pb2.HEALTH_STATE_NOT_READY,
            message="the executor is not healthy",
        )
        return lifecycle_pb2.HealthResponse(state=lifecycle_pb2.HEALTH_STATE_NOT_READY, checks=[check])

    async def Abort(self, request: Any, context: Any) -> Any:
        target = request.WhichOneof("target")
        if target == "request_id":
            try:
                aborted = self._inference.abort_request_by_id(request.request_id)
            except AbortFailedError as error:
                await context.abort(grpc.StatusCode.INTERNAL, str(error))
                return None
            status = (
                lifecycle_pb2.ABORT_STATUS_ABORTED if aborted else lifecycle_pb2.ABORT_STATUS_ALREADY_FINISHED
            )
            # The fake's own record (none copied): which Abort reached it, and what it answered.
            self._llm._log(
                {
                    "event": "abort_rpc",
                    "request_id": request.request_id,
                    "status": lifecycle_pb2.AbortStatus.Name(status),
                }
            )
            return lifecycle_pb2.AbortResponse(status=status)
        if target == "kv_session":
            await context.abort(
                grpc.StatusCode.UNIMPLEMENTED, "aborting by kv_session is not supported; abort by request_id"
            )
            return None
        if target == "all_requests":
            aborted, failed = self._inference.abort_all_requests()
            if failed:
                await context.abort(grpc.StatusCode.INTERNAL, f"failed to abort {failed} request(s)")
                return None
            return lifecycle_pb2.AbortResponse(
                status=lifecycle_pb2.ABORT_STATUS_ABORTED, message=f"aborted {aborted} request(s)"
            )
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Abort needs a target")
        return None

    async def _unimplemented(self, context: Any, what: str) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{what} is not supported")

    async def LoadLora(self, request: Any, context: Any) -> Any:
        await self._unimplemented(context, "LoRA lifecycle")

    async def UnloadLora(self, request: Any, context: Any) -> Any:
        await self._unimplemented(context, "LoRA lifecycle")

    async def ListLoras(self, request: Any, context: Any) -> Any:
        await self._unimplemented(context, "LoRA lifecycle")

    async def GetKvEventSources(self, request: Any, context: Any) -> Any:
        await self._unimplemented(context, "KV events")

    async def SubscribeKvEvents(self, request: Any, context: Any) -> Any:
        await self._unimplemented(context, "KV events")


__all__ = ["OpenEngineControlServicer"]
