"""A prepared response: what ``ResponsesService.prepare`` decided, frozen (docs/architecture.md#layout).

The checked request, its rendered prompt and generation request, the in_progress response
(``initial_response`` echoes the request as OpenAI's API does), and how it is sealed, stored,
compacted and which server-run tools it may call. A :class:`~.run.ResponseRun` runs it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from openai.types.responses import Response, ResponseStreamEvent

from ..adapter import ConversationHistory, Prompt
from ..core import InvalidRequestError
from ..executors import GenerationRequest, SamplingSettings
from ..request import (
    FunctionTool,
    JsonSchemaFormat,
    McpTool,
    RequestTool,
    ResponsesRequest,
    TextConfig,
    choice_data,
)
from ..request import cache_retention_seconds as retention_seconds
from ..request import service_tier as tier_of
from ..tenants import OPEN, Tenant
from ..tools import DEFAULT_TOOL_TIMEOUT, ServerTools
from .compaction import Compaction
from .sampling import SamplingDefaults, echo_fields, sampling_settings
from .sealing import ContentSealer
from .sessions import HistoryLookup

if TYPE_CHECKING:
    from .subagents import Team

__all__ = [
    "ENCRYPTED_REASONING",
    "ClientLeft",
    "MAX_LOGPROB_ENTRIES",
    "Deliver",
    "HistoryLookup",
    "PreparedResponse",
    "default_max_input_bytes",
    "initial_response",
    "logprob_token_limit",
    "logprobs_wanted",
]

#: Receives each engine step's events (the streaming transport writes them out).
Deliver: TypeAlias = Callable[[list[ResponseStreamEvent]], Awaitable[None]]


class ClientLeft(ConnectionError):
    """What a :data:`Deliver` raises when its client is gone: not the run's failure (the tool loop does not
    end it ``failed`` nor log it as a bug); the run stops, its generation aborted."""


#: Request bytes allowed per token of context window: generous for any text that fits the window
#: (gpt-oss averages ~4 bytes of text per token; JSON escaping and item framing add to it).
INPUT_BYTES_PER_TOKEN = 16


def default_max_input_bytes(max_seq_len: int) -> int:
    """``--max_input_bytes`` when not set: sized to the context window."""
    return INPUT_BYTES_PER_TOKEN * max_seq_len


@dataclass(frozen=True, slots=True)
class PreparedResponse:
    """What ``prepare`` decided, immutable: the checked request, its prompt and generation, the
    in_progress response, and how to store and seal it. The live state is the run's (``run.py``)."""

    request: ResponsesRequest
    prompt: Prompt
    generation: GenerationRequest
    response: Response  # the in_progress snapshot
    received_at: float
    conversation_id: str | None = None  # conversation=: its items come first; this turn's are appended
    conversation_seen: tuple[int, str | None] = (0, None)  # its item count and last item id, as rendered
    # The input items as stored (serialized before generation: what cannot be stored fails as a 400).
    input_item_ids: tuple[str, ...] = ()
    input_items_json: tuple[bytes, ...] = ()
    #: The sealer of the request's tenant and API (``ContentSealer.bound``): what it seals, it opens.
    sealer: ContentSealer | None = None
    #: Of ``input_item_ids``, those the server minted (the item index holds only minted ids:
    #: docs/tenants.md#isolation).
    minted_input_ids: tuple[str, ...] = ()
    #: Seals each reasoning item's ``encrypted_content`` (asked for with ``include``, or redacting).
    seal_reasoning: Callable[[str], str] | None = None
    #: Seals a tool-read carrier (sealing.py) after each server-run tool item the client sees less of.
    seal_tool_read: Callable[[str, dict[str, Any]], str | None] | None = None
    #: False (WebSocket ``generate: false``): prepare the conversation and prefill the prompt, no output.
    generate: bool = True
    #: The reasoning summary the request asked for (``auto``, ``concise``, ``detailed``), or None.
    summary_mode: str | None = None
    #: A running summary is cut off once the next output item is ready (``stream_options.reasoning_summary_delivery``).
    summary_cutoff: bool = False
    #: The conversation was compacted before this response (``context_management``).
    compaction: Compaction | None = None

    tools: ServerTools | None = None  # server-run tools (MCP servers): the response runs the tool loop
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT  # seconds a server-run tool call may take
    #: The conversation its ``previous_response_id`` names, when it continues one: its stored entry is
    #: written as what it adds to that one's (docs/sessions-and-kv-cache.md#what-the-store-keeps).
    previous_history: ConversationHistory | None = None
    #: The session it belongs to (``sessions.py``): the ``x-session-id`` it is answered with, stored with it.
    session_key: str | None = None
    #: The parent agent's session key, for a sub-agent whose headers name one (``request/affinity.py``).
    session_parent: str | None = None
    #: The client said its session ends with this response (``x-dynamo-session-final: true``).
    session_final: bool = False
    #: Its sub-agents (the beta multi-agent surface, ``subagents.Team``), when it asked for them.
    team: Team | None = None
    #: The tenant that asked: what it reads and stores is this tenant's (docs/tenants.md#isolation).
    owner: Tenant = OPEN


ENCRYPTED_REASONING = "reasoning.encrypted_content"


def cache_retention_seconds(request: ResponsesRequest) -> int | None:
    """How long the engine should keep the prompt's KV cache (None: as it would anyway)."""
    ttl = request.prompt_cache_options.ttl if request.prompt_cache_options is not None else None
    return retention_seconds(ttl, request.prompt_cache_retention)


def service_tier(request: ResponsesRequest) -> tuple[str, float | None]:
    """The tier a response is served in and its scheduling priority (``request/shared_fields.py``)."""
    return tier_of(request.service_tier)


def initial_response(
    response_id: str,
    request: ResponsesRequest,
    model_name: str,
    conversation: str | None = None,
    truncated_messages: int = 0,
    sampling: SamplingSettings | None = None,
    notes: Mapping[str, str] | None = None,
) -> Response:
    """The response's in_progress snapshot: what ``response.created`` carries, echoing the request.

    ``truncated_messages``: how many of the conversation's oldest messages ``truncation: "auto"`` left out
    (said in the extra field ``truncated_input_messages``, absent when none were). Its sampling fields are
    ``sampling``'s, what the executor is given (``sampling.echo_fields``); ``notes`` (``sampling.sampling_notes``), what
    one of them guarantees, in the extra field ``sampling_notes`` (absent when there is nothing to say).
    """
    applied = echo_fields(
        sampling or sampling_settings(request, SamplingDefaults(), max_tokens=1, stop_token_ids=())
    )
    reasoning = request.reasoning
    data: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "completed_at": None,
        "status": "in_progress",
        "incomplete_details": None,
        "model": model_name,
        "previous_response_id": request.previous_response_id,
        "instructions": request.instructions,
        "output": [],
        "error": None,
        "tools": [_echo_tool(t) for t in request.tools],
        "tool_choice": choice_data(request.tool_choice),
        "truncation": request.truncation or "disabled",
        "parallel_tool_calls": request.parallel_tool_calls,
        "text": _echo_text(request.text),
        **applied,
        "top_logprobs": request.top_logprobs or 0,
        "reasoning": {
            "effort": (reasoning.effort if reasoning and reasoning.effort else "medium"),
            "summary": reasoning.summary if reasoning else None,
            # gpt-oss is trained to read the reasoning of the current turn only (Harmony drops earlier turns'
            # analysis): that is the context every response has, whatever was asked.
            "context": "current_turn",
        },
        "usage": None,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": request.max_tool_calls,
        "store": request.store,
        "background": request.background,
        "service_tier": service_tier(request)[0],
        "metadata": request.metadata or {},
        "safety_identifier": request.safety_identifier,
        "prompt_cache_key": request.prompt_cache_key,
        "prompt": request.prompt,
        "prompt_cache_options": _echo_cache_options(request),
        "prompt_cache_retention": (
            "in_memory" if request.prompt_cache_retention == "in-memory" else request.prompt_cache_retention
        ),
        "user": request.user,
        "conversation": {"id": conversation} if conversation else None,
    }
    if truncated_messages:
        data["truncated_input_messages"] = truncated_messages
    if notes:
        data["sampling_notes"] = dict(notes)
    try:
        return Response.model_validate(data)
    except Exception as exc:  # a field we echo did not fit the SDK's Response
        raise InvalidRequestError(f"The request could not be echoed in a response: {exc}") from exc


def _echo_cache_options(request: ResponsesRequest) -> dict[str, Any] | None:
    options = request.prompt_cache_options
    if options is None:
        return None
    if options.prewarm:
        raise InvalidRequestError(
            "'prompt_cache_options.prewarm' is not supported over HTTP: this server always generates; prefill "
            "happens with the first request of a conversation.",
            param="prompt_cache_options.prewarm",
            code="unsupported_parameter",
        )
    return {
        "mode": options.mode,
        "ttl": options.ttl,
        "comparison_response_id": options.comparison_response_id,
    }


def _echo_text(text: TextConfig | None) -> dict[str, Any]:
    """``text`` as the response echoes it: a json_schema format with every field (description, strict)."""
    if text is None:
        return {"format": {"type": "text"}}
    if isinstance(text.format, JsonSchemaFormat):
        fmt = text.data["format"]
        fmt = {**fmt, "description": fmt.get("description"), "strict": bool(fmt.get("strict"))}
        return {**text.data, "format": fmt}
    return text.data


def logprobs_wanted(request: ResponsesRequest) -> int | None:
    """Alternatives per token when logprobs are asked for (``top_logprobs`` or ``include``), else None."""
    wanted = request.include is not None and "message.output_text.logprobs" in request.include
    if request.top_logprobs is None and not wanted:
        return None
    return request.top_logprobs or 0


#: Logprob entries one request may ask for: choices x (``top_logprobs`` + 1) x output tokens. Each entry
#: is held until the response is written (about 0.8 KiB of RSS each, measured:
#: docs/limits.md#hostile-input-and-limits); 16 choices x 21 x 6,000 tokens held 1.6 GiB before there was a
#: bound.
MAX_LOGPROB_ENTRIES = 1 << 18


def logprob_token_limit(request: ResponsesRequest, choices: int = 1) -> int | None:
    """Output tokens within :data:`MAX_LOGPROB_ENTRIES` when logprobs are asked for (None otherwise).

    A ``max_output_tokens`` past it is refused (400, before anything is rendered); without one, the
    output stops there (``incomplete``, chat's ``length``).
    """
    top = logprobs_wanted(request)
    if top is None:
        return None
    per_token = choices * (top + 1)
    limit = max(1, MAX_LOGPROB_ENTRIES // per_token)
    asked = request.max_output_tokens
    if asked is not None and asked > limit:
        raise InvalidRequestError(
            f"'max_output_tokens' of {asked} with logprobs ({choices} choice(s) x {top + 1} logprobs a token) "
            f"asks for more than {MAX_LOGPROB_ENTRIES} logprobs; at most {limit} tokens can have them.",
            param="max_output_tokens",
            code="too_many_logprobs",
        )
    return limit


def _echo_tool(tool: RequestTool) -> dict[str, Any]:
    """A tool as the response echoes it: function tools with every field the spec requires.

    MCP tools lose ``headers`` and ``authorization``: secrets go to the MCP server only.
    """
    data = tool.data
    if isinstance(tool, McpTool):
        return {k: (None if k in ("headers", "authorization") else v) for k, v in data.items()}
    if not isinstance(tool, FunctionTool):
        return data
    return {
        "type": "function",
        "name": data["name"],
        "description": data.get("description"),
        "parameters": data.get("parameters"),
        "strict": data.get("strict", False),
    }
