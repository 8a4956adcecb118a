"""Request-side protocol: the body of ``POST /v1/responses``.

Output items, responses and stream events are the ``openai`` package's own types
(``openai.types.responses``); only the request is modelled here, because the
SDK's request types are TypedDicts meant for building requests, not checking them.

Unknown top-level fields are ignored, as OpenAI-compatible clients send fields a
server may not know. Known fields are checked strictly: a wrong type or value is
an :class:`~trtllm_responses.errors.InvalidRequestError` naming the field.
Input items stay plain dicts here; ``harmony/items.py`` checks them one by one so
its errors can name the exact item and part (``input[2].content[0]``).
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import InvalidRequestError

__all__ = ["ReasoningParam", "ResponsesRequest", "parse_request"]

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


class ReasoningParam(BaseModel):
    """``reasoning``: gpt-oss takes an effort of low, medium or high (others map to the nearest)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    effort: ReasoningEffort | None = None
    summary: str | None = None
    generate_summary: str | None = None


class ResponsesRequest(BaseModel):
    """A Responses API create request, as far as this server uses it."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str | None = None
    input: str | list[dict[str, Any]] = Field(default_factory=list)
    instructions: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    reasoning: ReasoningParam | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    metadata: dict[str, str] | None = None
    text: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    background: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    max_tool_calls: int | None = Field(default=None, ge=1)
    service_tier: str | None = None
    include: list[str] | None = None
    stream_options: dict[str, Any] | None = None
    conversation: Any = None

    @field_validator("tool_choice")
    @classmethod
    def _check_tool_choice(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        if isinstance(value, str) and value not in ("auto", "none", "required"):
            raise ValueError("tool_choice must be 'auto', 'none', 'required' or a tool choice object")
        return value

    @field_validator("metadata")
    @classmethod
    def _check_metadata(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and len(value) > 16:
            raise ValueError("metadata can hold at most 16 key-value pairs")
        return value


def parse_request(body: bytes | str | dict[str, Any]) -> ResponsesRequest:
    """Parse and check a request body; raise InvalidRequestError naming the offending field."""
    if not isinstance(body, dict):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequestError(f"The request body is not valid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise InvalidRequestError("The request body must be a JSON object.")
    try:
        request = ResponsesRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = _param_path(first["loc"])
        raise InvalidRequestError(f"Invalid value for '{param}': {first['msg']}.", param=param) from exc
    if request.background and not request.store:
        raise InvalidRequestError("Background responses require store=true.", param="background")
    if request.conversation is not None and request.previous_response_id is not None:
        raise InvalidRequestError(
            "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or "
            "'conversation'.",
            param="conversation",
            code="mutually_exclusive_parameters",
        )
    if request.top_logprobs:
        raise InvalidRequestError("top_logprobs is not supported by this server", param="top_logprobs")
    return request


def _param_path(loc: tuple[Any, ...]) -> str:
    """``('input', 2, 'content')`` → ``input[2].content``; union branch names are dropped."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("str", "list[dict[str,any]]", "dict[str,any]") or "[" in str(part):
            continue
        else:
            path += ("." if path else "") + str(part)
    return path
