"""The stream's events: SDK event models built without revalidation, and which events each item kind streams.

Every event ``ResponseStream`` emits is one of the openai SDK's ``ResponseStreamEvent`` models,
built by :func:`construct` from fields that already have their exact types (the per-token path
cannot afford pydantic's validation; the tests validate every emitted event against the SDK).
"""

from __future__ import annotations

import typing
from typing import Any

from openai.types.responses import (
    ResponseCodeInterpreterCallCodeDeltaEvent,
    ResponseCodeInterpreterCallCompletedEvent,
    ResponseCodeInterpreterCallInProgressEvent,
    ResponseCodeInterpreterCallInterpretingEvent,
    ResponseCustomToolCallInputDeltaEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseMcpCallArgumentsDeltaEvent,
    ResponseMcpCallCompletedEvent,
    ResponseMcpCallFailedEvent,
    ResponseMcpCallInProgressEvent,
    ResponseOutputText,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
    ResponseWebSearchCallCompletedEvent,
    ResponseWebSearchCallInProgressEvent,
    ResponseWebSearchCallSearchingEvent,
)
from openai.types.responses.response_content_part_added_event import PartReasoningText as AddedReasoningPart
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

from ..harmony import ItemKind

__all__ = [
    "ADDED_EVENTS",
    "DELTA_EVENTS",
    "TOOL_EVENTS",
    "construct",
    "empty_part",
    "event_type_name",
    "make_usage",
    "with_fields",
]


def make_usage(
    input_tokens: int, output_tokens: int, reasoning_tokens: int, cached_tokens: int
) -> ResponseUsage:
    """A Responses usage object: ``cache_write_tokens`` are the prompt tokens the engine computed (input - cached)."""
    return ResponseUsage(
        input_tokens=input_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=cached_tokens, cache_write_tokens=max(input_tokens - cached_tokens, 0)
        ),
        output_tokens=output_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning_tokens),
        total_tokens=input_tokens + output_tokens,
    )


def with_fields(item: Any, fields: dict[str, Any]) -> Any:
    """``item`` with more fields (a tool's output, error…), validated into the SDK's types (once per call)."""
    if not fields:
        return item
    return type(item).model_validate({**item.model_dump(), **fields})


def construct(model_type: type[BaseModel], fields: dict[str, Any]) -> Any:
    """An SDK model from fields that already have their exact types, without revalidating them.

    What pydantic's ``model_construct`` does, minus the openai SDK's override of it,
    which re-walks every field's type annotation (tens of microseconds an event, on
    the per-token path). Every value ResponseStream passes is built to the SDK's
    types; the tests validate every emitted event against the SDK.
    """
    model = _new(model_type)
    _set_attr(model, "__dict__", fields)
    _set_fields_set(model, set(fields))
    _set_extra(model, None)
    _set_private(model, None)
    return model


# BaseModel's own slots, set through their descriptors (half the cost of object.__setattr__).
_new = object.__new__
_set_attr = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


_event_type_names: dict[type[Any], str] = {}


def event_type_name(event_type: type[Any]) -> str:
    """The wire name of an SDK event class, read from its ``type`` Literal (cached)."""
    name = _event_type_names.get(event_type)
    if name is None:
        (literal,) = typing.get_args(event_type.model_fields["type"].annotation)
        name = _event_type_names[event_type] = str(literal)
    return name


DELTA_EVENTS: dict[ItemKind, type[Any]] = {
    ItemKind.MESSAGE: ResponseTextDeltaEvent,
    ItemKind.REASONING: ResponseReasoningTextDeltaEvent,
    ItemKind.FUNCTION_CALL: ResponseFunctionCallArgumentsDeltaEvent,
    ItemKind.CUSTOM_TOOL_CALL: ResponseCustomToolCallInputDeltaEvent,
    ItemKind.CODE_INTERPRETER_CALL: ResponseCodeInterpreterCallCodeDeltaEvent,
    ItemKind.MCP_CALL: ResponseMcpCallArgumentsDeltaEvent,
}


#: Per server-run call kind: its started, completed and failed events.
#: code_interpreter_call and web_search_call have no failed event: a failed run ends with ``.completed``
#: and the item's ``status: failed`` (the SDK's types define no other).
TOOL_EVENTS: dict[ItemKind, tuple[type[Any], type[Any], type[Any]]] = {
    ItemKind.MCP_CALL: (
        ResponseMcpCallInProgressEvent,
        ResponseMcpCallCompletedEvent,
        ResponseMcpCallFailedEvent,
    ),
    ItemKind.CODE_INTERPRETER_CALL: (
        ResponseCodeInterpreterCallInterpretingEvent,
        ResponseCodeInterpreterCallCompletedEvent,
        ResponseCodeInterpreterCallCompletedEvent,
    ),
    ItemKind.WEB_SEARCH_CALL: (
        ResponseWebSearchCallSearchingEvent,
        ResponseWebSearchCallCompletedEvent,
        ResponseWebSearchCallCompletedEvent,
    ),
}
#: Items whose ``.in_progress`` event follows ``output_item.added`` (as OpenAI streams them).
ADDED_EVENTS: dict[ItemKind, type[Any]] = {
    ItemKind.CODE_INTERPRETER_CALL: ResponseCodeInterpreterCallInProgressEvent,
    ItemKind.WEB_SEARCH_CALL: ResponseWebSearchCallInProgressEvent,
}


def empty_part(kind: ItemKind) -> Any:
    if kind is ItemKind.MESSAGE:
        return ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[])
    if kind is ItemKind.REASONING:
        return AddedReasoningPart(type="reasoning_text", text="")
    return None
