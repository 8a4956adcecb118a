"""tensorrt_llm/grpc/, faked: the gRPC engine server behind ``trtllm-serve MODEL --grpc`` (SMG's protocol, ``smg/``)."""
