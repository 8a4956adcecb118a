"""How a response is sampled: the request's settings over the operator's defaults, stated once.

Every generation is sampled with an explicit ``temperature`` and ``top_p``. TensorRT-LLM
decodes greedily when temperature, top_p and top_k are all unset
(``SamplingParams.params_imply_greedy_decoding`` in ``tensorrt_llm/sampling_params.py``), so
leaving them out would make every response greedy. OpenAI's defaults, gpt-oss's recommended
settings and trtllm-serve's own ``to_sampling_params`` (``tensorrt_llm/serve/openai_protocol.py``)
are ``temperature=1.0, top_p=1.0``; the operator can change the defaults with ``serve``'s
sampling flags, and a request's own fields win over them.

``top_k``, ``min_p``, ``frequency_penalty`` and ``presence_penalty`` are sent only where the
request or the operator sets them (unset they leave TensorRT-LLM's behaviour alone). The
response echoes exactly the :class:`~trtllm_responses.executors.base.SamplingSettings` the
executor received (:func:`echo_fields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..executors import SamplingSettings
from ..request import ResponsesRequest

__all__ = ["SamplingDefaults", "echo_fields", "sampling_settings"]

#: OpenAI's defaults, gpt-oss's recommended settings, and trtllm-serve's (``_DEFAULT_SAMPLING_PARAMS``).
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 1.0


@dataclass(frozen=True, slots=True)
class SamplingDefaults:
    """What a request that does not say is sampled with (``serve --temperature`` …)."""

    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    top_k: int | None = None
    min_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None


def _pick(given: Any, default: Any) -> Any:
    return default if given is None else given


def sampling_settings(
    request: ResponsesRequest | None,
    defaults: SamplingDefaults,
    *,
    max_tokens: int,
    stop_token_ids: tuple[int, ...],
    logprobs: int | None = None,
) -> SamplingSettings:
    """The settings a generation runs with: the request's fields over ``defaults`` (``None``: no request)."""

    def field(name: str) -> Any:
        return None if request is None else getattr(request, name)

    return SamplingSettings(
        max_tokens=max_tokens,
        stop_token_ids=stop_token_ids,
        temperature=float(_pick(field("temperature"), defaults.temperature)),
        top_p=float(_pick(field("top_p"), defaults.top_p)),
        top_k=_pick(field("top_k"), defaults.top_k),
        min_p=_pick(field("min_p"), defaults.min_p),
        seed=field("seed"),
        frequency_penalty=_pick(field("frequency_penalty"), defaults.frequency_penalty),
        presence_penalty=_pick(field("presence_penalty"), defaults.presence_penalty),
        logprobs=logprobs,
    )


def echo_fields(settings: SamplingSettings) -> dict[str, Any]:
    """The response's sampling fields: what the executor was given.

    ``temperature``, ``top_p`` and the penalties are Response fields (an unset penalty is 0.0,
    which is what not applying one means); ``top_k`` and ``min_p`` are echoed when applied.
    """
    echoed: dict[str, Any] = {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "frequency_penalty": settings.frequency_penalty or 0.0,
        "presence_penalty": settings.presence_penalty or 0.0,
    }
    if settings.top_k is not None:
        echoed["top_k"] = settings.top_k
    if settings.min_p is not None:
        echoed["min_p"] = settings.min_p
    return echoed
