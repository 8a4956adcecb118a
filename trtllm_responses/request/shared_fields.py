"""The fields ``/v1/responses`` and ``/v1/chat/completions`` share: which values each takes, and what a value means.

One table for both routes, so they cannot drift: the Responses request model (``protocol.py``) and
the Chat Completions one (``chat.py``) declare these fields with the types below, and the service
reads the same tables (:data:`EFFORT_LEVELS` in the adapter, :func:`service_tier` and
:func:`cache_retention_seconds` when it prepares a response). A chat request is translated into a
Responses body, so a value both routes take means the same on both. ``tests/request/test_shared_fields.py``
sends every value of each table, and the values just past each bound, to both routes and fails when one
route takes what the other refuses. docs/chat-completions.md#chat-completions lists the mapping.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, Field

from ..core import InvalidRequestError

__all__ = [
    "CACHE_TTL_SECONDS",
    "EFFORT_LEVELS",
    "MAX_INTEGER",
    "CacheRetention",
    "Integer",
    "Penalty",
    "ReasoningEffort",
    "SERVICE_TIERS",
    "Seed",
    "ShortId",
    "Temperature",
    "TokenLimit",
    "TopLogprobs",
    "TopP",
    "Verbosity",
    "cache_retention_seconds",
    "service_tier",
]

#: Largest integer a field takes: what a signed 64-bit slot (orjson, the stores, the engine) holds.
MAX_INTEGER = (1 << 63) - 1


def _integral(value: Any) -> Any:
    """``16.0`` is the integer 16, as JSON has one number type (``16.5`` stays a float, and is refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Integer = Annotated[int, BeforeValidator(_integral)]
#: ``max_output_tokens`` (Responses), ``max_completion_tokens`` and ``max_tokens`` (chat).
TokenLimit = Annotated[Integer, Field(ge=1, le=MAX_INTEGER)]
#: ``seed``: a signed 64-bit integer (a larger one was a 500 on chat: orjson cannot write it back).
Seed = Annotated[Integer, Field(ge=-MAX_INTEGER - 1, le=MAX_INTEGER)]
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
TopP = Annotated[float, Field(gt=0.0, le=1.0)]
#: ``frequency_penalty`` and ``presence_penalty``.
Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]
TopLogprobs = Annotated[Integer, Field(ge=0, le=20)]
#: ``safety_identifier`` and ``prompt_cache_key``: OpenAI's 64 characters.
ShortId = Annotated[str, Field(max_length=64)]

#: ``reasoning.effort`` (Responses) and ``reasoning_effort`` (chat) → gpt-oss's level (it has three).
EFFORT_LEVELS: dict[str, Literal["low", "medium", "high"]] = {
    "none": "low",
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
#: ``text.verbosity`` (Responses) and ``verbosity`` (chat): a sentence in gpt-oss's instructions (the adapter).
Verbosity = Literal["low", "medium", "high"]
#: ``prompt_cache_retention``: ``in_memory`` is the engine's own LRU; ``24h`` keeps the prompt's KV blocks
#: at a raised priority for a day. ``in-memory`` is the spelling OpenAI's docs once used.
CacheRetention = Literal["in_memory", "in-memory", "24h"]

#: ``service_tier`` → (the tier the answer says it used, the engine's scheduling priority in [0, 1]).
#: TensorRT-LLM's ``generate_async(priority=...)`` takes [0, 1], 0.5 by default
#: (``tensorrt_llm/llmapi/llm.py``); this server has no separate capacity for ``scale``, so it is ``default``.
SERVICE_TIERS: dict[str | None, tuple[str, float | None]] = {
    None: ("default", None),
    "auto": ("default", None),
    "default": ("default", None),
    "scale": ("default", None),
    "flex": ("flex", 0.25),
    "priority": ("priority", 0.75),
    "fast": ("priority", 0.75),
    "ultrafast": ("priority", 1.0),
}

#: ``prompt_cache_options.ttl`` and ``prompt_cache_retention`` in seconds (``in_memory``: the engine's own LRU).
CACHE_TTL_SECONDS = {"30m": 30 * 60, "12h": 12 * 3600, "24h": 24 * 3600}

assert set(get_args(ReasoningEffort)) == set(EFFORT_LEVELS), "one list of efforts"


def service_tier(name: str | None) -> tuple[str, float | None]:
    """The tier a request named ``name`` is served in and its scheduling priority; InvalidRequestError for
    an unknown tier."""
    tier = SERVICE_TIERS.get(name)
    if tier is None:
        names = ", ".join(repr(known) for known in SERVICE_TIERS if known)
        raise InvalidRequestError(
            f"Invalid 'service_tier': {name!r}. Expected one of {names}.",
            param="service_tier",
            code="invalid_value",
        )
    return tier


def cache_retention_seconds(ttl: str | None, retention: str | None) -> int | None:
    """How long the engine should keep the prompt's KV cache (None: as it would anyway): the longer of
    ``prompt_cache_options.ttl`` and ``prompt_cache_retention``, when either is given."""
    asked = [ttl] if ttl is not None else []
    if retention == "24h":
        asked.append("24h")
    return max((CACHE_TTL_SECONDS[t] for t in asked), default=None)
