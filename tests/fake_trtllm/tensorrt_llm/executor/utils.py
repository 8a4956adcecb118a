"""tensorrt_llm/executor/utils.py, faked: RequestError."""


class RequestError(RuntimeError):
    """The error raised when the request is failed (TensorRT-LLM's own words).

    Raised by ``generate_async`` (``BaseLLM._check_arguments``: a prompt over ``max_num_tokens``)
    and while iterating a result (``GenerationResultBase._handle_response`` for an error response).
    """
