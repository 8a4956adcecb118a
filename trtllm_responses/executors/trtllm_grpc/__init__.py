"""The wire to TensorRT-LLM's gRPC engine server: ``trtllm.TrtllmService`` (``trtllm-serve MODEL --grpc``).

The protocol is SMG's (the Shepherd Model Gateway's ``trtllm_service.proto``, with its ``common.proto``),
vendored unmodified under ``proto/`` from the version PIN.md names; the modules beside them are protoc's
output (``make grpc-stubs``, scripts/grpc_stubs.py), excluded from ruff and mypy as generated code. Import
them as ``from trtllm_responses.executors.trtllm_grpc import trtllm_service_pb2, trtllm_service_pb2_grpc``:
they need the ``grpc`` extra (grpcio, protobuf), so nothing here imports them and this package's import
costs nothing without it. PIN.md says which TensorRT-LLM releases import this protocol.
"""
