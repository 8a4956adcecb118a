"""The second wire to TensorRT-LLM's gRPC engine server: OpenEngine v0.1.0 (``trtllm-serve MODEL --grpc
--grpc-protocol openengine``, services ``openengine.v1.Inference`` and ``openengine.v1.Control``).

The schema is vendored under ``proto/`` exactly as TensorRT-LLM vendors it (``tensorrt_llm/grpc/openengine/proto/``:
``manifest.json`` and ``openengine/v1/*.proto``, package ``openengine.v1``); the modules beside them are
protoc's output (``make grpc-stubs``, scripts/grpc_stubs.py), registered in the descriptor pool under the same
names as TensorRT-LLM's own bindings (``openengine/v1/kv.proto``, ...). Import them as
``from trtllm_responses.executors.trtllm_grpc.openengine import generation_pb2, openengine_pb2_grpc``: they
need the ``grpc`` extra, so nothing here imports them. PIN.md names the source, the schema release and the
first TensorRT-LLM release that serves it.
"""
