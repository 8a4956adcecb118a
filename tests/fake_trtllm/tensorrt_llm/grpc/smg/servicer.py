"""tensorrt_llm/grpc/smg/servicer.py, faked: ``TrtllmServiceServicer``, the RPCs of ``trtllm.TrtllmService``.

As there (NVIDIA/TensorRT-LLM, ``tensorrt_llm/grpc/smg/servicer.py``; this revision's request manager in
``request_manager.py`` beside it):

- ``Generate``: no ``tokenized`` is ``INVALID_ARGUMENT`` "Missing tokenized input". The request's
  ``stop``/``stop_token_ids``/``ignore_eos``/``bad``/``bad_token_ids``/``guided_decoding``/``embedding_bias``/
  ``include_stop_token_in_output``, its ``sampling_config``, ``output_config``, ``lora_config`` and
  ``disaggregated_params`` become the LLM call's arguments. Not read by this servicer, so never reaching the
  engine: ``kv_cache_retention``, ``cache_salt_id``, ``arrival_time``, ``lookahead_config``,
  ``prompt_tuning_config``, ``tokenized.query_token_ids``.
- Streaming: per step a ``chunk`` with the tokens new since the last chunk (computed from the cumulative
  ``token_ids``, none sent when a step adds none), ``prompt_tokens`` = the prompt's length,
  ``completion_tokens`` = tokens so far, ``cached_tokens`` = the result's, and the new tokens' logprobs (each
  ``logprob`` the sampled token's entry, 0.0 when the top-k dict lacks it, ``top_logprobs`` every entry). At
  the end (``finished``), streaming or not, one ``complete``: every output token, ``finish_reason`` as the LLM
  gives it ('stop', 'length', 'cancelled', 'timeout'; '' when None), ``matched_token_id`` for a stop token
  (``stop_reason`` an int; a string one is ``matched_stop_str``), the counts and all logprobs. Nothing else: a
  context-only request's ``DisaggregatedParams`` (``ctx_request_id``, ``opaque_state``) are not sent back.
- Errors end the call with a gRPC status, not a message: ``ValueError`` (a bad parameter) is
  ``INVALID_ARGUMENT``, any other exception (a ``RequestError`` while iterating) ``INTERNAL``, each after
  aborting the request. A client that cancels the call (or leaves) aborts the request.
- ``Abort``: ``AbortResponse(success, "Request <id> aborted" | "Request <id> not found")``; the aborted
  request's own stream then ends as the engine ends it: its ``complete`` with ``finish_reason`` 'cancelled'.
- ``HealthCheck``: ``HealthCheckResponse(status=message)`` ("OK", or the request manager's reason): an
  unhealthy engine still answers with status OK at the gRPC level.
- ``GetModelInfo``: ``model_id`` (the served name or model path), ``max_input_len``, ``max_seq_len`` (else
  ``max_input_len``), ``vocab_size``; ``GetServerInfo``: ``version`` = ``tensorrt_llm.__version__`` (the release
  played), ``backend`` "tensorrt-llm", tensor/pipeline parallel sizes from ``llm.args``, context parallel 1.
- ``Embed``: ``UNIMPLEMENTED``; ``GetTokenizer`` and ``SubscribeKvEvents`` are not overridden (the base
  class's ``UNIMPLEMENTED``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import grpc

from ...executor.result import Logprob
from .bindings import trtllm_service_pb2 as pb2
from .bindings import trtllm_service_pb2_grpc as pb2_grpc
from .request_manager import (
    GrpcRequestManager,
    create_disaggregated_params_from_proto,
    create_lora_request_from_proto,
    create_sampling_params_from_proto,
)

__all__ = ["TrtllmServiceServicer"]


class TrtllmServiceServicer(pb2_grpc.TrtllmServiceServicer):
    """``trtllm.TrtllmService`` over one fake ``LLM`` (module docstring: what each RPC answers)."""

    def __init__(self, request_manager: GrpcRequestManager, model_path: str = "") -> None:
        self.request_manager = request_manager
        self.model_path = model_path

    def _sampling_params(self, request: Any) -> Any:
        vocab_size = self.request_manager.get_model_config().get("vocab_size") or None
        return create_sampling_params_from_proto(
            proto_config=request.sampling_config,
            output_config=request.output_config,
            max_tokens=request.max_tokens,
            stop=list(request.stop) if request.stop else None,
            stop_token_ids=list(request.stop_token_ids) if request.stop_token_ids else None,
            ignore_eos=request.ignore_eos,
            bad=list(request.bad) if request.bad else None,
            bad_token_ids=list(request.bad_token_ids) if request.bad_token_ids else None,
            guided_decoding=request.guided_decoding if request.HasField("guided_decoding") else None,
            embedding_bias=request.embedding_bias if request.embedding_bias else None,
            vocab_size=vocab_size,
            include_stop_token_in_output=request.include_stop_token_in_output,
        )

    async def Generate(self, request: Any, context: Any) -> AsyncGenerator[Any, None]:
        request_id = request.request_id
        try:
            if not request.HasField("tokenized"):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Missing tokenized input")
                return
            prompt_token_ids = list(request.tokenized.input_token_ids)
            sampling_params = self._sampling_params(request)
            lora_request = create_lora_request_from_proto(
                request.lora_config if request.HasField("lora_config") else None
            )
            disaggregated_params = create_disaggregated_params_from_proto(
                request.disaggregated_params if request.HasField("disaggregated_params") else None
            )
            if request.HasField("multimodal_input") and request.multimodal_input.image_data:
                raise ValueError("the fake engine serves text prompts only")
            sent: dict[int, int] = {}
            async for gen_result in self.request_manager.generate(
                request_id=request_id,
                prompt_token_ids=prompt_token_ids,
                sampling_params=sampling_params,
                streaming=request.streaming,
                lora_request=lora_request,
                disaggregated_params=disaggregated_params,
            ):
                if context.cancelled():
                    await self.request_manager.abort(request_id)
                    return
                if request.streaming:
                    for response in self._chunk_responses(request_id, gen_result, prompt_token_ids, sent):
                        yield response
                if gen_result.finished:
                    for response in self._complete_responses(request_id, gen_result, prompt_token_ids):
                        yield response
        except asyncio.CancelledError:
            await self.request_manager.abort(request_id)
            raise
        except grpc.aio.AbortError:
            raise
        except ValueError as e:
            await self.request_manager.abort(request_id)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except Exception as e:
            await self.request_manager.abort(request_id)
            await context.abort(grpc.StatusCode.INTERNAL, str(e))

    async def Embed(self, request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Embed RPC not yet implemented")

    async def HealthCheck(self, request: Any, context: Any) -> Any:
        _, message = await self.request_manager.health_check()
        return pb2.HealthCheckResponse(status=message)

    async def Abort(self, request: Any, context: Any) -> Any:
        request_id = request.request_id
        success = await self.request_manager.abort(request_id)
        return pb2.AbortResponse(
            success=success, message=f"Request {request_id} {'aborted' if success else 'not found'}"
        )

    async def GetModelInfo(self, request: Any, context: Any) -> Any:
        config = self.request_manager.get_model_config()
        return pb2.GetModelInfoResponse(
            model_id=self.model_path or config.get("model_path", ""),
            max_input_len=config.get("max_context_length", 0),
            max_seq_len=config.get("max_seq_len", 0) or config.get("max_context_length", 0),
            vocab_size=config.get("vocab_size", 0),
        )

    async def GetServerInfo(self, request: Any, context: Any) -> Any:
        import tensorrt_llm

        args = getattr(self.request_manager.llm, "args", None)
        tp_size = getattr(args, "tensor_parallel_size", None) or 1
        pp_size = getattr(args, "pipeline_parallel_size", None) or 1
        return pb2.GetServerInfoResponse(
            version=getattr(tensorrt_llm, "__version__", "unknown"),
            backend="tensorrt-llm",
            tensor_parallel_size=tp_size,
            pipeline_parallel_size=pp_size,
            context_parallel_size=1,
            world_size=tp_size * pp_size,
        )

    @staticmethod
    def _logprobs(token_ids: list[int], logprobs: Any) -> list[Any]:
        """``_convert_logprobs_to_proto``: one TokenLogprob per token while entries last (a dict of top-k
        ``Logprob``s: the sampled token's own, 0.0 when absent, and every entry as ``top_logprobs``; a float)."""
        out = []
        for token_id, lp in zip(token_ids, logprobs or []):
            if isinstance(lp, dict):
                entry = pb2.TokenLogprob(
                    token_id=token_id, logprob=lp[token_id].logprob if token_id in lp else 0.0
                )
                for tid, value in lp.items():
                    if isinstance(value, Logprob):
                        entry.top_logprobs.append(pb2.TopLogprob(token_id=tid, logprob=value.logprob))
                out.append(entry)
            elif isinstance(lp, (int, float)):
                out.append(pb2.TokenLogprob(token_id=token_id, logprob=float(lp)))
        return out

    def _chunk_responses(
        self, request_id: str, gen_result: Any, prompt: list[int], sent: dict[int, int]
    ) -> list[Any]:
        cached = getattr(gen_result, "cached_tokens", 0)
        if not gen_result.outputs:
            chunk = pb2.GenerateStreamChunk(token_ids=[], prompt_tokens=len(prompt), cached_tokens=cached)
            return [pb2.GenerateResponse(request_id=request_id, chunk=chunk)]
        responses = []
        for completion in gen_result.outputs:
            tokens = completion.token_ids or []
            done = sent.get(completion.index, 0)
            delta = tokens[done:]
            if not delta:
                continue
            sent[completion.index] = len(tokens)
            chunk = pb2.GenerateStreamChunk(
                token_ids=delta,
                sequence_index=completion.index,
                prompt_tokens=len(prompt),
                completion_tokens=len(tokens),
                cached_tokens=cached,
            )
            if completion.logprobs:
                chunk.logprobs.extend(self._logprobs(delta, completion.logprobs[done:]))
            responses.append(pb2.GenerateResponse(request_id=request_id, chunk=chunk))
        return responses

    def _complete_responses(self, request_id: str, gen_result: Any, prompt: list[int]) -> list[Any]:
        cached = getattr(gen_result, "cached_tokens", 0)
        if not gen_result.outputs:
            complete = pb2.GenerateComplete(finish_reason="error", prompt_tokens=len(prompt))
            return [pb2.GenerateResponse(request_id=request_id, complete=complete)]
        responses = []
        for completion in gen_result.outputs:
            tokens = completion.token_ids or []
            complete = pb2.GenerateComplete(
                output_token_ids=tokens,
                sequence_index=completion.index,
                finish_reason=completion.finish_reason or "",
                prompt_tokens=len(prompt),
                completion_tokens=len(tokens),
                cached_tokens=cached,
            )
            if getattr(completion, "stop_reason", None) is not None:
                if isinstance(completion.stop_reason, int):
                    complete.matched_token_id = completion.stop_reason
                else:
                    complete.matched_stop_str = str(completion.stop_reason)
            if completion.logprobs:
                complete.logprobs.extend(self._logprobs(tokens, completion.logprobs))
            responses.append(pb2.GenerateResponse(request_id=request_id, complete=complete))
        return responses
