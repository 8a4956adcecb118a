"""tensorrt_llm/grpc/openengine/, faked: the OpenEngine adapter (``openengine.v1.Inference`` and ``Control``) over
the fake ``LLM`` (``trtllm-serve MODEL --grpc --grpc-protocol openengine``).

As there (NVIDIA/TensorRT-LLM, PRs #17084 and #17992): ``bindings.py`` gives the generated modules and the
schema's revision and release, ``request_mapping.py`` turns a ``GenerateRequest`` into ``SamplingParams``,
``ConversationParams`` and the input, ``disagg.py`` maps ``KvSessionRef`` to and from ``DisaggregatedParams``,
``formatting.py`` and ``streaming.py`` turn engine results into events, ``servicer.py`` answers ``Generate``,
``control.py`` the ``Control`` RPCs, ``server.py`` starts the grpc.aio server. Each module says which revision
it follows and what it leaves out; they are the fake's condensed readings of those files, not copies.
"""
