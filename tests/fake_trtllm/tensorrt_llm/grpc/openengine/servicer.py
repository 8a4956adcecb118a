"""tensorrt_llm/grpc/openengine/servicer.py, faked: ``OpenEngineInferenceServicer.Generate``.

As there (NVIDIA/TensorRT-LLM ``servicer.py`` at ``06cb2191b0be3da4297abb13d5082a5e39b3b460``):

- an empty ``request_id`` or ``model``, a bad field (``request_mapping``, ``disagg``): ``INVALID_ARGUMENT``; an
  id already active: ``ALREADY_EXISTS``; media, ``lora_name``, ``kv.bypass_prefix_cache``, an unsupported guide
  or metadata key: ``UNIMPLEMENTED``; any model name is served;
- ``generate_async(inputs, sampling_params, streaming=True, trace_headers=, scheduling_params=None,
  conversation_params=, cache_salt=kv.cache_salt, priority=DEFAULT_REQUEST_PRIORITY, disaggregated_params=)``;
  a ValueError there is ``INVALID_ARGUMENT``, anything else ``INTERNAL``;
- the request is active (``Control.Abort`` reaches it) from then until its stream ends: it ends when the result
  is finished (a context-only one right after its ``PrefillReady``), so afterwards an ``Abort`` finds nothing;
- a client that cancels the call, or a stream closed before the engine finished, aborts the request
  (``context.add_done_callback``, the ``finally``); a failure after acceptance is an ``EngineError`` event.

The fake's own reading: ``max_tokens`` None (unset) becomes ``max_seq_len`` (131072 when unset) less the prompt,
as ``LLM._deduce_max_tokens`` does; the fake ``SamplingParams`` needs an int. Left out: the 30 s stall
watchdog, subagent affinity, the target-DP-rank hint, text prompts (the fake has no tokenizer:
``INVALID_ARGUMENT``).
"""

import asyncio
import logging
from typing import Any

import grpc

from ...executor.utils import RequestError
from ...llmapi.llm import DEFAULT_REQUEST_PRIORITY
from .bindings import openengine_pb2_grpc
from .disagg import disaggregated_params_from_request
from .errors import AbortFailedError, UnsupportedFeatureError
from .formatting import _engine_error_response
from .request_mapping import (
    conversation_params_from_request,
    input_from_request,
    sampling_params_from_request,
    trace_headers_from_context,
)
from .streaming import ActiveRequest, _format_result, _OpenEngineFormatState

logger = logging.getLogger("tensorrt_llm")

_DEFAULT_MAX_SEQ_LEN = 131072


class OpenEngineInferenceServicer(openengine_pb2_grpc.InferenceServicer):
    """``openengine.v1.Inference`` over one fake ``LLM`` (module docstring)."""

    def __init__(self, llm: Any, model: str, kv_transfer_backend: str = "") -> None:
        self._llm = llm
        self._model = model
        self._kv_transfer_backend = kv_transfer_backend
        self._guided_backend = llm.args.guided_decoding_backend
        self._active_requests: dict[str, Any] = {}

    def active_request_count(self) -> int:
        return len(self._active_requests)

    def abort_request_by_id(self, request_id: str) -> bool:
        handle = self._active_requests.get(request_id)
        if handle is None:
            return False
        try:
            handle.abort()
        except Exception as error:
            raise AbortFailedError(request_id, error) from error
        return True

    def abort_all_requests(self) -> tuple[int, int]:
        aborted = failed = 0
        for request_id in list(self._active_requests):
            try:
                aborted += self.abort_request_by_id(request_id)
            except AbortFailedError:
                failed += 1
        return aborted, failed

    async def Generate(self, request: Any, context: Any) -> Any:
        request_id = request.request_id
        try:
            if not request_id:
                raise ValueError("request_id must be non-empty")
            if not request.model:
                raise ValueError("model must be non-empty")
            if request_id in self._active_requests:
                await context.abort(
                    grpc.StatusCode.ALREADY_EXISTS, f"request_id '{request_id}' is already active"
                )
                return
            if request.media:
                raise UnsupportedFeatureError("multimodal media is not supported")
            if request.lora_name:
                raise UnsupportedFeatureError("LoRA selection is not supported")
            if (
                request.HasField("kv")
                and request.kv.HasField("bypass_prefix_cache")
                and request.kv.bypass_prefix_cache
            ):
                raise UnsupportedFeatureError("prefix cache bypass is not supported")
            inputs = input_from_request(request)
            if not isinstance(inputs, dict):
                raise ValueError("the fake engine has no tokenizer: send token_ids")
            sampling_params = sampling_params_from_request(request, self._guided_backend)
            if sampling_params.max_tokens is None:
                max_seq_len = self._llm.args.max_seq_len or _DEFAULT_MAX_SEQ_LEN
                sampling_params.max_tokens = max(1, max_seq_len - len(inputs["prompt_token_ids"]))
            trace_headers = trace_headers_from_context(context)
            conversation_params = conversation_params_from_request(request)
            disaggregated_params = disaggregated_params_from_request(request)
            cache_salt = (
                request.kv.cache_salt
                if request.HasField("kv") and request.kv.HasField("cache_salt")
                else None
            )
        except UnsupportedFeatureError as error:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, str(error))
            return
        except ValueError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            return

        format_state = _OpenEngineFormatState(
            request_id=request_id,
            sampling_params=sampling_params,
            is_context_only=disaggregated_params is not None
            and disaggregated_params.request_type == "context_only",
            kv_transfer_backend=self._kv_transfer_backend,
        )
        try:
            result_handle = self._llm.generate_async(
                inputs,
                sampling_params,
                streaming=True,
                trace_headers=trace_headers,
                scheduling_params=None,
                conversation_params=conversation_params,
                cache_salt=cache_salt,
                priority=DEFAULT_REQUEST_PRIORITY,
                disaggregated_params=disaggregated_params,
            )
        except ValueError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            return
        except Exception as error:
            logger.error(f"Failed to submit OpenEngine request {request_id}: {error}")
            await context.abort(grpc.StatusCode.INTERNAL, str(error))
            return

        engine_terminal = False
        abort_requested = False
        registration = ActiveRequest(self._active_requests, request_id, result_handle)

        def abort_request(reason: str) -> None:
            nonlocal abort_requested
            if abort_requested or engine_terminal:
                return
            abort_requested = True
            try:
                result_handle.abort()
            except Exception as error:
                logger.warning(f"Failed to abort OpenEngine request {request_id} ({reason}): {error}")

        context.add_done_callback(lambda _: abort_request("RPC completed before generation"))
        try:
            registration.register()
            async for result in result_handle:
                if context.cancelled():
                    abort_request("RPC cancelled")
                    return
                for response in _format_result(result, format_state):
                    yield response
                if result.finished:
                    engine_terminal = True
                    return
            engine_terminal = True
            yield _engine_error_response(
                request_id, "generation stream ended before all outputs finished", result_handle
            )
        except asyncio.CancelledError:
            raise
        except (RequestError, Exception) as error:
            logger.error(f"OpenEngine request {request_id} failed after acceptance: {error}")
            abort_request("response processing failed")
            engine_terminal = True
            yield _engine_error_response(request_id, str(error), result_handle)
        finally:
            if not engine_terminal:
                abort_request("response stream closed")
            registration.release()


__all__ = ["OpenEngineInferenceServicer"]
