"""tensorrt_llm/grpc/smg/, faked: the SMG adapter (``trtllm.TrtllmService``) over the fake ``LLM``.

As there: ``bindings.py`` gives the generated protobuf modules, ``request_manager.py`` turns requests into
``SamplingParams`` and ``LLM.generate_async`` calls, ``servicer.py`` answers the RPCs, ``server.py`` starts the
grpc.aio server and stops it on SIGTERM/SIGINT.
"""

from .bindings import PROTOS_AVAILABLE, trtllm_service_pb2, trtllm_service_pb2_grpc

__all__ = ["PROTOS_AVAILABLE", "trtllm_service_pb2", "trtllm_service_pb2_grpc"]
