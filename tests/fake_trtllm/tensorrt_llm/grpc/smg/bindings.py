"""tensorrt_llm/grpc/smg/bindings.py, faked: the generated protobuf modules of SMG's ``trtllm_service.proto``.

TensorRT-LLM imports them from SMG's package (``from smg_grpc_proto.generated import trtllm_service_pb2,
trtllm_service_pb2_grpc``); the fake imports the same protos' stubs vendored in trtllm_responses
(``trtllm_responses/executors/trtllm_grpc/``, PIN.md there: smg-grpc-proto 0.4.14), so the fake engine and the
server's client speak one wire, byte for byte the protocol TensorRT-LLM's adapter serves.
"""

from trtllm_responses.executors.trtllm_grpc import trtllm_service_pb2, trtllm_service_pb2_grpc

PROTOS_AVAILABLE = True

__all__ = ["PROTOS_AVAILABLE", "trtllm_service_pb2", "trtllm_service_pb2_grpc"]
