"""Request edge of ``POST /v1/chat/completions``: a Chat Completions body → the service's request.

A chat request is checked here (its messages in ``chat_messages.py``; errors name the chat field,
``messages[2].tool_calls[0].id``) and translated into the Responses request body
``ResponsesService.prepare`` reads, so both APIs share one prompt, one Constraint and one generation
path. What stays chat-side is :class:`ChatOptions` (``n``, ``stop`` strings, ``stream_options``,
logprobs); the :class:`~.dialect.Translation` names a service error's param as the chat field
(``ParamNames``). What this edge shares with the Messages one: ``dialect.py``. Each field and what it
becomes: docs/chat-completions.md#chat-completions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from ..core import InvalidRequestError, Stepped, at_once
from .body import JsonBody
from .chat_messages import messages_to_items
from .dialect import ParamNames, Translation, checked, object_at, stop_strings, string_at
from .shared_fields import (
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
    Verbosity,
)

__all__ = [
    "MAX_CHOICES",
    "MAX_STOP_CHARS",
    "MAX_STOP_SEQUENCES",
    "ChatOptions",
    "ChatRequest",
    "ChatTranslation",
    "translate_chat",
    "translating_chat",
]

#: Most choices (``n``) one request may ask for: each is a generation of its own.
MAX_CHOICES = 16
#: OpenAI's limit on ``stop`` sequences.
MAX_STOP_SEQUENCES = 4
#: Longest stop string (characters): each streamed token is compared with the end of the text.
MAX_STOP_CHARS = 256


class StreamOptions(BaseModel):
    """``stream_options``."""

    model_config = ConfigDict(extra="ignore", strict=True)

    include_usage: bool = False
    include_obfuscation: bool | None = None


class ChatRequest(BaseModel):
    """The fields of a chat completions request this server reads (unknown fields are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str | None = None
    messages: list[Any]
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    # The fields /v1/responses shares, typed and mapped as it does (shared_fields.py).
    reasoning_effort: ReasoningEffort | None = None
    verbosity: Verbosity | None = None
    service_tier: str | None = None  # checked by the service, as on /v1/responses
    prompt_cache_retention: CacheRetention | None = None
    max_completion_tokens: TokenLimit | None = None
    max_tokens: TokenLimit | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    seed: Seed | None = None
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    stop: str | list[str] | None = None
    n: Integer = Field(default=1, ge=1, le=MAX_CHOICES)
    logprobs: bool = False
    top_logprobs: TopLogprobs | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    safety_identifier: ShortId | None = None
    prompt_cache_key: ShortId | None = None
    functions: Any = None
    function_call: Any = None


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """What the chat writer applies on top of the service's response."""

    n: int = 1
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    include_obfuscation: bool = False  # an ``obfuscation`` field on each delta chunk
    logprobs: bool = False
    seed: int | None = None
    max_tokens_field: str = "max_completion_tokens"  # the field the limit came in (for errors)


#: A checked chat request: the Responses body, the chat-only options, where each input item came from.
ChatTranslation: TypeAlias = Translation[ChatOptions]


def translate_chat(raw: bytes | dict[str, Any] | JsonBody) -> ChatTranslation:
    """Check a chat completions body and translate it; raise InvalidRequestError naming the chat field."""
    return at_once(translating_chat(raw))


def translating_chat(raw: bytes | dict[str, Any] | JsonBody) -> Stepped[ChatTranslation]:
    """:func:`translate_chat` as work that pauses after each message (``core.Stepped``)."""
    request = checked(ChatRequest, raw)
    if request.functions is not None or request.function_call is not None:
        param = "functions" if request.functions is not None else "function_call"
        raise InvalidRequestError(
            f"'{param}' is deprecated and not supported; send 'tools' and 'tool_choice' instead.", param=param
        )
    if not request.messages:
        raise InvalidRequestError("'messages' must hold at least one message.", param="messages")
    items = yield from messages_to_items(request.messages)
    body = _body(request, items.items)
    options = ChatOptions(
        n=request.n,
        stop=stop_strings(request.stop, "stop", MAX_STOP_SEQUENCES, MAX_STOP_CHARS),
        stream=request.stream,
        include_usage=bool(request.stream_options and request.stream_options.include_usage),
        include_obfuscation=bool(request.stream_options and request.stream_options.include_obfuscation),
        logprobs=request.logprobs,
        seed=request.seed,
        max_tokens_field="max_completion_tokens" if request.max_completion_tokens else "max_tokens",
    )
    names = ParamNames((("max_output_tokens", options.max_tokens_field), *_RENAMED), _TOOL_FIELDS)
    return Translation(body, options, tuple(items.origins), names)


def _body(request: ChatRequest, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The Responses body a checked chat request stands for."""
    body: dict[str, Any] = {"input": items, "store": False}
    if request.model is not None:
        body["model"] = request.model
    if request.tools:
        body["tools"] = [_tool(tool, f"tools[{i}]") for i, tool in enumerate(request.tools)]
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.response_format is not None:
        body["text"] = {"format": _response_format(request.response_format)}
    if request.verbosity is not None:
        body.setdefault("text", {})["verbosity"] = request.verbosity
    if request.reasoning_effort is not None:
        body["reasoning"] = {"effort": request.reasoning_effort}
    max_tokens = request.max_completion_tokens or request.max_tokens
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    for name in (
        "temperature",
        "top_p",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "service_tier",
        "prompt_cache_retention",
    ):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    if request.top_logprobs is not None and not request.logprobs:
        raise InvalidRequestError("'top_logprobs' requires 'logprobs' to be true.", param="top_logprobs")
    if request.logprobs:
        body["top_logprobs"] = request.top_logprobs or 0
    if request.stream_options is not None and not request.stream:
        raise InvalidRequestError(
            "'stream_options' is only allowed when 'stream' is true.", param="stream_options"
        )
    return body


# -- tools, tool_choice, response_format ------------------------------------------------------


def _tool(tool: Any, where: str) -> dict[str, Any]:
    tool = object_at(tool, where)
    kind = tool.get("type")
    if kind != "function":
        raise InvalidRequestError(
            f"'{where}.type' must be 'function' (the only tool type this server takes on chat completions; "
            f"custom tools are served on /v1/responses); got {kind!r}.",
            param=f"{where}.type",
        )
    function = object_at(tool.get("function"), f"{where}.function")
    out: dict[str, Any] = {"type": "function", "name": function.get("name")}
    for key in ("description", "parameters", "strict"):
        if function.get(key) is not None:
            out[key] = function[key]
    if "parameters" not in out:
        out["parameters"] = {"type": "object", "properties": {}}
    return out


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice  # auto / none / required, checked by the service
    kind = choice.get("type")
    if kind == "function":
        function = object_at(choice.get("function"), "tool_choice.function")
        return {"type": "function", "name": string_at(function, "name", "tool_choice.function")}
    if kind == "allowed_tools":
        allowed = object_at(choice.get("allowed_tools"), "tool_choice.allowed_tools")
        tools = allowed.get("tools")
        if not isinstance(tools, list):
            raise InvalidRequestError(
                "'tool_choice.allowed_tools.tools' must be an array.", param="tool_choice.allowed_tools.tools"
            )
        names = []
        for i, tool in enumerate(tools):
            at = f"tool_choice.allowed_tools.tools[{i}]"
            function = object_at(object_at(tool, at).get("function"), f"{at}.function")
            names.append({"type": "function", "name": string_at(function, "name", f"{at}.function")})
        return {"type": "allowed_tools", "mode": allowed.get("mode", "auto"), "tools": names}
    raise InvalidRequestError(
        "'tool_choice' must be 'auto', 'none', 'required', {\"type\": \"function\", ...} or "
        '{"type": "allowed_tools", ...}.',
        param="tool_choice.type" if kind is not None else "tool_choice",
    )


def _response_format(fmt: dict[str, Any]) -> dict[str, Any]:
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema":
        spec = object_at(fmt.get("json_schema"), "response_format.json_schema")
        return {"type": "json_schema", **spec}
    raise InvalidRequestError(
        f"'response_format.type' must be text, json_object or json_schema; got {kind!r}.",
        param="response_format.type",
    )


# -- errors back to chat fields -----------------------------------------------------------------

#: The service's params whose chat field has another name (prefix → chat prefix); before them,
#: ``max_output_tokens`` is the field the limit came in (``ChatOptions.max_tokens_field``).
_RENAMED = (
    ("text.format.", "response_format.json_schema."),
    ("text.format", "response_format"),
    ("text.verbosity", "verbosity"),
    ("text", "response_format"),
    ("reasoning.effort", "reasoning_effort"),
    ("reasoning", "reasoning_effort"),
    ("tool_choice.name", "tool_choice.function.name"),
    ("tool_choice.tools", "tool_choice.allowed_tools.tools"),
    ("input", "messages"),
)
#: A tool's fields are its ``function``'s.
_TOOL_FIELDS = tuple(
    (f".{name}", f".function.{name}") for name in ("name", "description", "parameters", "strict")
)
