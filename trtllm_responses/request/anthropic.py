"""Request edge of ``POST /v1/messages``: an Anthropic Messages body → the service's request.

A Messages request is checked here (its messages in ``anthropic_messages.py``; errors name the
Anthropic field, ``messages[2].content[0].tool_use_id``) and translated into the Responses request
body ``ResponsesService.prepare`` reads, so every API shares one prompt, one Constraint and one
generation path. What stays Messages-side is :class:`MessagesOptions` (``stream``,
``stop_sequences``, whether and how thinking blocks are returned, the model name asked for); the
:class:`~.dialect.Translation` names a service error's param as the Anthropic field (:data:`MESSAGES_NAMES`).
What this edge shares with the chat one: ``dialect.py``. Each field and what it becomes:
docs/anthropic-messages.md#anthropic-messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from ..core import InvalidRequestError, Stepped, at_once
from .anthropic_messages import anthropic_items, system_text
from .body import JsonBody
from .dialect import ParamNames, Translation, checked, object_at, stop_strings, string_at
from .shared_fields import MAX_INTEGER, Integer

__all__ = [
    "MAX_STOP_SEQUENCE_CHARS",
    "MAX_STOP_SEQUENCES",
    "MIN_THINKING_BUDGET",
    "MessagesOptions",
    "MessagesRequest",
    "MessagesTranslation",
    "MESSAGES_NAMES",
    "effort_for_budget",
    "translate_messages",
    "translating_messages",
]

#: Most ``stop_sequences`` one request may hold (each streamed token is compared with the text's end).
MAX_STOP_SEQUENCES = 16
#: Longest stop sequence (characters).
MAX_STOP_SEQUENCE_CHARS = 256
#: Anthropic's smallest ``thinking.budget_tokens``.
MIN_THINKING_BUDGET = 1024
#: ``thinking.budget_tokens`` → gpt-oss reasoning effort: below the first bound ``low``, below the
#: second ``medium``, else ``high`` (gpt-oss has no token budget for its reasoning; ``max_tokens``
#: bounds reasoning and answer together).
BUDGET_BOUNDS = (4096, 16384)

Thinking = Literal["shown", "omitted", "none"]


class MessagesRequest(BaseModel):
    """The fields of a Messages request this server reads (unknown fields are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str = Field(min_length=1, max_length=256)
    messages: list[Any]
    max_tokens: Integer | None = Field(default=None, ge=1, le=MAX_INTEGER)
    system: str | list[Any] | None = None
    tools: list[Any] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: Integer | None = Field(default=None, ge=0, le=MAX_INTEGER)
    stop_sequences: list[str] | None = None
    stream: bool = False
    metadata: dict[str, Any] | None = None
    service_tier: str | None = None


@dataclass(frozen=True, slots=True)
class MessagesOptions:
    """What the Messages writer applies on top of the service's response."""

    model: str = ""
    stream: bool = False
    stop: tuple[str, ...] = ()
    #: ``shown``: thinking blocks with their text; ``omitted``: empty text, the signature only
    #: (``thinking.display: "omitted"``); ``none``: no thinking blocks (thinking disabled or absent).
    thinking: Thinking = "none"
    #: Tools of Anthropic-defined types (``web_search_20250305``, ``bash_20250124`` …): accepted, not shown.
    hidden_tools: tuple[str, ...] = ()


#: A checked Messages request: the Responses body, the Messages-only options, where each input item and
#: tool came from (``tool_origins``: tools of Anthropic-defined types are not translated).
MessagesTranslation: TypeAlias = Translation[MessagesOptions]


def effort_for_budget(budget: int) -> str:
    """The gpt-oss reasoning effort a ``thinking.budget_tokens`` maps onto (:data:`BUDGET_BOUNDS`)."""
    low, medium = BUDGET_BOUNDS
    return "low" if budget < low else "medium" if budget < medium else "high"


def translate_messages(
    raw: bytes | dict[str, Any] | JsonBody, *, counting: bool = False
) -> MessagesTranslation:
    """Check a Messages body and translate it; raise InvalidRequestError naming the Anthropic field.

    ``counting`` (``/v1/messages/count_tokens``): ``max_tokens`` is not required.
    """
    return at_once(translating_messages(raw, counting=counting))


def translating_messages(
    raw: bytes | dict[str, Any] | JsonBody, *, counting: bool = False
) -> Stepped[MessagesTranslation]:
    """:func:`translate_messages` as work that pauses after each message (``core.Stepped``: 20,001 messages
    are ~25 ms of it)."""
    request = checked(MessagesRequest, raw)  # its depth checked (a tool_use's input is serialized again)
    if request.max_tokens is None and not counting:
        raise InvalidRequestError("'max_tokens' is required.", param="max_tokens")
    if not request.messages:
        raise InvalidRequestError("'messages' must hold at least one message.", param="messages")
    last = request.messages[-1]
    if isinstance(last, dict) and last.get("role") == "assistant":
        where = f"messages[{len(request.messages) - 1}].role"
        raise InvalidRequestError(
            f"'{where}' is assistant: prefilling gpt-oss's answer is not supported; end with a user message.",
            param=where,
        )
    items = yield from anthropic_items(request.messages)
    body: dict[str, Any] = {"input": items.items, "store": False, "model": request.model}
    if request.system is not None:
        body["instructions"] = system_text(request.system)
    tools, tool_origins, hidden = _tools(request.tools or [])
    if tools:
        body["tools"] = tools
    if request.tool_choice is not None:
        choice, parallel = _tool_choice(request.tool_choice)
        body["tool_choice"] = choice
        if parallel is not None:
            body["parallel_tool_calls"] = parallel
    thinking, effort = _thinking(request)
    if effort is not None:
        body["reasoning"] = {"effort": effort}
    if thinking != "none":
        body["include"] = ["reasoning.encrypted_content"]  # the signature of each thinking block
    output_format = (request.output_config or {}).get("format")
    if output_format is not None:
        body["text"] = {"format": _output_format(output_format)}
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    _check_metadata(request.metadata)
    options = MessagesOptions(
        model=request.model,
        stream=request.stream,
        stop=stop_strings(
            request.stop_sequences, "stop_sequences", MAX_STOP_SEQUENCES, MAX_STOP_SEQUENCE_CHARS
        ),
        thinking=thinking,
        hidden_tools=hidden,
    )
    return Translation(body, options, tuple(items.origins), MESSAGES_NAMES, tool_origins)


def _check_metadata(metadata: dict[str, Any] | None) -> None:
    if metadata is None:
        return
    user_id = metadata.get("user_id")
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidRequestError("'metadata.user_id' must be a string.", param="metadata.user_id")


def _thinking(request: MessagesRequest) -> tuple[Thinking, str | None]:
    """Whether thinking blocks are returned, and the reasoning effort (None: the service's default)."""
    effort = (request.output_config or {}).get("effort")
    if effort is not None and effort not in ("low", "medium", "high", "xhigh", "max"):
        raise InvalidRequestError(
            f"'output_config.effort' must be low, medium, high, xhigh or max; got {effort!r}.",
            param="output_config.effort",
        )
    config = request.thinking
    if config is None:
        return "none", effort or "low"
    kind = config.get("type")
    display = config.get("display")
    if display not in (None, "summarized", "omitted"):
        raise InvalidRequestError(
            f"'thinking.display' must be 'summarized' or 'omitted'; got {display!r}.",
            param="thinking.display",
        )
    shown: Thinking = "omitted" if display == "omitted" else "shown"
    if kind == "disabled":
        return "none", effort or "low"
    if kind in ("adaptive", "between_tools"):
        return shown, effort or "medium"
    if kind == "enabled":
        budget = config.get("budget_tokens")
        if isinstance(budget, float) and budget.is_integer():
            budget = int(budget)
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise InvalidRequestError(
                "'thinking.budget_tokens' must be an integer.", param="thinking.budget_tokens"
            )
        if budget < MIN_THINKING_BUDGET:
            raise InvalidRequestError(
                f"'thinking.budget_tokens' must be at least {MIN_THINKING_BUDGET}; got {budget}.",
                param="thinking.budget_tokens",
            )
        if request.max_tokens is not None and budget >= request.max_tokens:
            raise InvalidRequestError(
                "'max_tokens' must be greater than 'thinking.budget_tokens'.", param="thinking.budget_tokens"
            )
        return shown, effort or effort_for_budget(budget)
    raise InvalidRequestError(
        f"'thinking.type' must be enabled, disabled, adaptive or between_tools; got {kind!r}.",
        param="thinking.type",
    )


# -- tools, tool_choice, output format -----------------------------------------------------------


def _tools(declared: list[Any]) -> tuple[list[dict[str, Any]], tuple[int, ...], tuple[str, ...]]:
    """The client tools as function tools, the index in ``tools`` of each, and the types of those not shown."""
    tools: list[dict[str, Any]] = []
    origins: list[int] = []
    hidden: list[str] = []
    for i, tool in enumerate(declared):
        function = _tool(tool, f"tools[{i}]")
        if function is None:
            hidden.append(str(tool.get("type")))
        else:
            tools.append(function)
            origins.append(i)
    return tools, tuple(origins), tuple(hidden)


def _tool(tool: Any, where: str) -> dict[str, Any] | None:
    """A client tool as a function tool; None for a tool of an Anthropic-defined type (not shown)."""
    tool = object_at(tool, where)
    kind = tool.get("type")
    if kind not in (None, "custom"):
        if not isinstance(kind, str):
            raise InvalidRequestError(f"'{where}.type' must be a string.", param=f"{where}.type")
        return None
    out: dict[str, Any] = {"type": "function", "name": string_at(tool, "name", where)}
    schema = tool.get("input_schema")
    if schema is None:
        raise InvalidRequestError(f"'{where}.input_schema' is required.", param=f"{where}.input_schema")
    out["parameters"] = object_at(schema, f"{where}.input_schema")
    if tool.get("description") is not None:
        out["description"] = tool["description"]
    if tool.get("strict") is not None:
        out["strict"] = tool["strict"]
    return out


def _tool_choice(choice: dict[str, Any]) -> tuple[str | dict[str, Any], bool | None]:
    kind = choice.get("type")
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise InvalidRequestError(
            "'tool_choice.disable_parallel_tool_use' must be a boolean.",
            param="tool_choice.disable_parallel_tool_use",
        )
    parallel = None if disable is None else not disable
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", parallel
    if kind == "tool":
        return {"type": "function", "name": string_at(choice, "name", "tool_choice")}, parallel
    raise InvalidRequestError(
        f"'tool_choice.type' must be auto, any, tool or none; got {kind!r}.", param="tool_choice.type"
    )


def _output_format(fmt: Any) -> dict[str, Any]:
    fmt = object_at(fmt, "output_config.format")
    if fmt.get("type") != "json_schema":
        raise InvalidRequestError(
            f"'output_config.format.type' must be 'json_schema'; got {fmt.get('type')!r}.",
            param="output_config.format.type",
        )
    schema = object_at(fmt.get("schema"), "output_config.format.schema")
    return {"type": "json_schema", "name": "output", "schema": schema, "strict": True}


# -- errors back to Anthropic fields ---------------------------------------------------------------

#: How Messages names the service's params: an input item's fields under the block it came from (a
#: thinking block's origin is its signature or data, as it is), a tool's ``parameters`` its
#: ``input_schema``, and these (prefix → Anthropic prefix).
MESSAGES_NAMES = ParamNames(
    renamed=(
        ("text.format", "output_config.format"),
        ("text", "output_config"),
        ("reasoning", "thinking"),
        ("instructions", "system"),
        ("max_output_tokens", "max_tokens"),
        ("parallel_tool_calls", "tool_choice.disable_parallel_tool_use"),
        ("input", "messages"),
    ),
    tool_fields=((".parameters", ".input_schema"),),
    item_fields=True,
    leaves=(".signature", ".data"),
)
