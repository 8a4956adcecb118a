"""tensorrt_llm/grpc/openengine/errors.py, faked: the adapter's two exceptions (``UnsupportedFeatureError``,
answered ``UNIMPLEMENTED``; ``AbortFailedError``, an active request the engine refused to abort)."""


class UnsupportedFeatureError(Exception):
    """A request feature without a faithful TensorRT-LLM mapping."""


class AbortFailedError(Exception):
    def __init__(self, request_id: str, error: BaseException) -> None:
        super().__init__(f"failed to abort request {request_id}: {error}")
        self.request_id = request_id
