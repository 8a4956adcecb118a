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

A setting the engine accepts but would not apply (``Executor.unapplied_sampling``: ``seed``, ``min_p`` and
the penalties on TensorRT-LLM 1.1 to 1.2.x) is never sent and never echoed as applied: a request that sets
it is refused with a 400 naming the field and why (``SamplingDefaults.unsupported == "refuse"``, the
default), or has it dropped, the response then echoing what was used (``"ignore"``; ``serve
--unsupported_sampling``). A neutral value (a penalty or ``min_p`` of 0) changes nothing and passes.

A setting the engine applies with less than a client would expect says so in the response's ``sampling_notes``
(:func:`sampling_notes`: a ``seed`` on TensorRT-LLM 1.3.0rc29/1.4.0rc1 holds only for a request sampled alone).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..core import InvalidRequestError
from ..executors import SamplingSettings
from ..request import ResponsesRequest

__all__ = ["SamplingDefaults", "check_defaults", "echo_fields", "sampling_notes", "sampling_settings"]

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
    #: What a request setting a sampling field the engine does not apply gets: a 400, or the field dropped.
    unsupported: Literal["refuse", "ignore"] = "refuse"


def _neutral(value: Any) -> bool:
    """Whether a setting's value changes nothing: unset, or a penalty / ``min_p`` of 0.0 (a ``seed``, an int, is
    never neutral)."""
    return value is None or (isinstance(value, float) and value == 0.0)


def _pick(given: Any, default: Any) -> Any:
    return default if given is None else given


def sampling_settings(
    request: ResponsesRequest | None,
    defaults: SamplingDefaults,
    *,
    max_tokens: int,
    stop_token_ids: tuple[int, ...],
    logprobs: int | None = None,
    unapplied: Mapping[str, str] | None = None,
) -> SamplingSettings:
    """The settings a generation runs with: the request's fields over ``defaults`` (``None``: no request).

    ``unapplied`` (``Executor.unapplied_sampling``): settings the engine would not apply, each with why; one the
    request sets is refused (InvalidRequestError, ``unsupported_parameter``) or dropped, by
    ``defaults.unsupported``.
    """

    def field(name: str) -> Any:
        return None if request is None else getattr(request, name)

    settings = SamplingSettings(
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
    if not unapplied:
        return settings
    dropped: dict[str, Any] = {}
    for name, reason in unapplied.items():
        value = getattr(settings, name)
        if value is None:
            continue
        if _neutral(value) or defaults.unsupported == "ignore":
            dropped[name] = None
            continue
        raise InvalidRequestError(
            f"{reason} This server refuses it rather than ignore it (the operator can choose to drop such settings "
            "instead: serve --unsupported_sampling ignore).",
            param=name,
            code="unsupported_parameter",
        )
    return dataclasses.replace(settings, **dropped) if dropped else settings


def check_defaults(defaults: SamplingDefaults, unapplied: Mapping[str, str]) -> list[str]:
    """Why the operator's sampling defaults (``serve --min_p`` …) cannot be applied by the engine, one sentence
    each ([]: they can). With ``unsupported == "refuse"`` the server does not start on any."""
    return [
        reason
        for name, reason in unapplied.items()
        if hasattr(defaults, name) and not _neutral(getattr(defaults, name))
    ]


def sampling_notes(settings: SamplingSettings, seed_note: str | None) -> dict[str, str]:
    """What a sampling setting sent guarantees, where that is less than a client would read into it, by field name
    (the response's extra field ``sampling_notes``; {}: nothing to say). ``seed_note`` (``Executor.seed_note``): on
    TensorRT-LLM 1.3.0rc29 and 1.4.0rc1 a seed reproduces a response only when it is sampled alone
    (docs/serving-on-tensorrt-llm.md#tensorrt-llm-versions)."""
    return {"seed": seed_note} if settings.seed is not None and seed_note else {}


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
