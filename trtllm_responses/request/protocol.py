"""Request-side protocol: the body of ``POST /v1/responses``.

Output items, responses and stream events are the ``openai`` package's own types
(``openai.types.responses``); only the request is modelled here, because the
SDK's request types are TypedDicts meant for building requests, not checking them.

Unknown top-level fields are ignored, as OpenAI-compatible clients send fields a
server may not know. Known fields are checked strictly: a wrong type or value is
an :class:`~trtllm_responses.core.errors.InvalidRequestError` naming the field.
Input items are typed by ``items.py`` once the body is checked; ``harmony/input_messages.py``
checks their fields as it converts them, so its errors name the exact item and part
(``input[2].content[0]``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    SkipValidation,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from ..core import InvalidRequestError, Stepped, at_once
from .body import MAX_JSON_DEPTH, JsonBody, check_depth, json_object
from .fields import one_sentence
from .items import InputItem, typing_items
from .shared_fields import (
    MAX_INTEGER,
    CacheRetention,
    Integer,
    Penalty,
    ReasoningEffort,
    Seed,
    ShortId,
    Temperature,
    TokenLimit,
    TopLogprobs,
    TopP,
)
from .text_format import TextConfig, parse_text
from .tool_choice import ToolChoice, parse_tool_choice
from .tools import RequestTool, parse_tools

__all__ = [
    "MAX_JSON_DEPTH",
    "check_depth",
    "json_object",
    "ReasoningParam",
    "ResponsesRequest",
    "parse_request",
    "parsing_request",
]

#: OpenAI's metadata limits.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
_OBJECT: dict[str, Any] = {"additionalProperties": True, "type": "object"}
#: ``tools``, ``tool_choice`` and ``text`` arrive parsed (``parse_request``); the body's schema is what a client sends.
Tools = Annotated[
    tuple[RequestTool, ...], SkipValidation, WithJsonSchema({"items": _OBJECT, "type": "array"})
]
Choice = Annotated[ToolChoice, SkipValidation, WithJsonSchema({"anyOf": [{"type": "string"}, _OBJECT]})]
Text = Annotated[TextConfig | None, SkipValidation, WithJsonSchema({"anyOf": [_OBJECT, {"type": "null"}]})]


def _input_shape(value: Any) -> Any:
    """``input`` is a string or an array (whose items ``parse_request`` types once every field is checked)."""
    if isinstance(value, (str, list, tuple)):
        return value
    raise PydanticCustomError("string_type", "Input should be a valid string")


Input = Annotated[
    str | tuple[InputItem, ...],
    PlainValidator(_input_shape),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"items": {}, "type": "array"}]}),
]


class ReasoningParam(BaseModel):
    """``reasoning``: gpt-oss takes an effort of low, medium or high (others map to the nearest)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    effort: ReasoningEffort | None = None
    summary: str | None = None
    generate_summary: str | None = None
    #: Which turns' reasoning the model reads again; gpt-oss reads the current turn's only
    #: (docs/endpoints.md#endpoints).
    context: Literal["auto", "current_turn", "all_turns"] | None = None


class PromptCacheOptions(BaseModel):
    """``prompt_cache_options`` (SDK 3.54): ``ttl`` is passed to the engine (docs/endpoints.md#endpoints)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    ttl: Literal["30m", "12h"] = "30m"
    mode: Literal["implicit", "explicit"] = "implicit"
    prewarm: bool = False
    comparison_response_id: str | None = None


class ResponsesRequest(BaseModel):
    """A Responses API create request, as far as this server uses it.

    ``tools``, ``tool_choice`` and ``text`` hold typed values (``tools.py``, ``tool_choice.py``,
    ``text_format.py``), parsed once by ``parse_request``. ``null`` for any field means the field is absent.
    """

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str | None = None
    input: Input = Field(default_factory=tuple)
    instructions: str | None = None
    tools: Tools = Field(default_factory=tuple)
    tool_choice: Choice = "auto"
    parallel_tool_calls: bool = True
    reasoning: ReasoningParam | None = None
    max_output_tokens: TokenLimit | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    seed: Seed | None = None
    # Sampling extensions (vLLM and trtllm-serve accept them too); see responses/sampling.py.
    top_k: Integer | None = Field(default=None, ge=0, le=MAX_INTEGER)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    metadata: dict[str, str] | None = None
    text: Text = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    safety_identifier: ShortId | None = None
    prompt_cache_key: ShortId | None = None
    background: bool = False
    top_logprobs: TopLogprobs | None = None
    max_tool_calls: Integer | None = Field(default=None, ge=1, le=MAX_INTEGER)
    service_tier: str | None = None
    include: list[str] | None = None
    stream_options: dict[str, Any] | None = None
    conversation: Any = None
    context_management: list[dict[str, Any]] | None = None
    prompt: dict[str, Any] | None = None
    prompt_cache_options: PromptCacheOptions | None = None
    prompt_cache_retention: CacheRetention | None = None
    #: The beta multi-agent surface's config, as sent: read (``multi_agent.py``) only under its beta header.
    multi_agent: Any = None


_OBJECT_FIELDS = {"tools": parse_tools, "tool_choice": parse_tool_choice, "text": parse_text}


def parse_request(body: bytes | str | dict[str, Any] | JsonBody) -> ResponsesRequest:
    """Parse and check a request body; raise InvalidRequestError naming the offending field.

    A :class:`~.body.JsonBody` was parsed and checked already (``body.py``): it is not walked again.
    """
    return at_once(parsing_request(body))


def parsing_request(body: bytes | str | dict[str, Any] | JsonBody) -> Stepped[ResponsesRequest]:
    """:func:`parse_request` as work that pauses after each input item it types (``core.Stepped``)."""
    typed = None
    if isinstance(body, JsonBody):
        typed = body.items  # typed while decoding (a replay's repeated items: the last turn's, as they are)
        body = body.data
    else:
        if not isinstance(body, dict):
            body = json_object(body)
        check_depth(body)
    # null means absent, for every field (the Open Responses schema allows it for the optional ones).
    body = {key: value for key, value in body.items() if value is not None}
    checked = {name: check(body[name]) for name, check in _OBJECT_FIELDS.items() if name in body}
    try:
        request = ResponsesRequest.model_validate({**body, **checked})
    except ValidationError as exc:
        raise one_sentence(exc, "") from None
    items: Any = request.input
    if isinstance(items, list):
        if typed is None or len(typed) != len(items):
            typed = yield from typing_items(items)
        request.input = typed
    _check_metadata(request.metadata)
    if request.background and not request.store:
        raise InvalidRequestError("Background responses require store=true.", param="background")
    if request.conversation is not None and request.previous_response_id is not None:
        raise InvalidRequestError(
            "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or "
            "'conversation'.",
            param="conversation",
            code="mutually_exclusive_parameters",
        )
    if (
        not request.input
        and request.previous_response_id is None
        and request.conversation is None
        and request.prompt is None  # a template's messages may be all the input
    ):
        raise InvalidRequestError(
            "There is nothing to respond to: 'input' is empty and no 'previous_response_id' is given.",
            param="input",
        )
    return request


def _check_metadata(metadata: dict[str, str] | None) -> None:
    if metadata is None:
        return
    if len(metadata) > MAX_METADATA_PAIRS:
        raise InvalidRequestError(
            f"'metadata' can hold at most {MAX_METADATA_PAIRS} key-value pairs.", param="metadata"
        )
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY:
            raise InvalidRequestError(
                f"A 'metadata' key is {len(key)} characters; the most is {MAX_METADATA_KEY}.",
                param="metadata",
            )
        if len(value) > MAX_METADATA_VALUE:
            raise InvalidRequestError(
                f"'metadata.{key}' is {len(value)} characters; the most is {MAX_METADATA_VALUE}.",
                param=f"metadata.{key}",
            )
