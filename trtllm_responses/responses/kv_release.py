"""What a turn's end tells the engine about its session's KV cache (docs/sessions-and-kv-cache.md#retention).

A session turn is sent with its blocks at a raised priority for a bounded pause when it may end in a call the
client runs (``GenerationRequest.client_tools``). When it has ended:

- waiting for the client's tool (its output holds a client-run call): nothing; the blocks stay raised for the
  pause (``serve --kv_tool_pause_seconds``), then fall back to the engine's default by themselves;
- the client said the session ends with this turn (``session_final``): released (``why="ended"``);
- a final answer after a raised turn: back to the normal priority (``why="answered"``).

The system and developer messages (every session's shared start) are kept out (``keep``). One call per turn,
O(1) here; the engine carries it out on its own time (``Executor.release``).

A deleted response (:func:`release_deleted`): its turn is rendered again as its continuation would start (the
stored history, with the instructions, tools, reasoning and text format its JSON records: a stored response keeps
no system or developer message) and released. Blocks are found by their exact prefix only, so a response whose
render differs (server-run tools) releases nothing; a chain continued after it re-stamps what is still cached.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from ..executors import Executor, GenerationRequest
from ..request import parse_request
from ..tenants import OPEN, Tenant

if TYPE_CHECKING:
    from openai.types.responses import Response

    from ..adapter import Prompt
    from ..store import StoredResponse
    from .rendering import Renderer

__all__ = ["CLIENT_CALLS", "release_deleted", "settle_turn"]

logger = logging.getLogger(__name__)
#: What a response's JSON records of the request that shapes the system and developer messages.
_RENDERED_FIELDS = ("model", "instructions", "tools", "tool_choice", "reasoning", "text")

#: Output items that wait for the client: it runs the call and sends its output back in the next turn.
CLIENT_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "computer_call",
        "mcp_approval_request",
        "tool_search_call",
    }
)


def waits_for_client(response: Response | None) -> bool:
    """Whether ``response`` ended with a call the client runs (its next turn brings the output)."""
    if response is None or response.status != "completed":
        return False
    return any(getattr(item, "type", None) in CLIENT_CALLS for item in response.output)


def shared_prefix(prompt: Prompt) -> int:
    """Tokens every turn of every session with these instructions starts with: system and developer messages."""
    return len(prompt.system.tokens) + (len(prompt.developer.tokens) if prompt.developer is not None else 0)


def settle_turn(
    executor: Executor, generation: GenerationRequest | None, prompt: Prompt, response: Response | None
) -> None:
    """Tell ``executor`` what the ended turn leaves behind (the module docstring); ``generation``: its last."""
    if generation is None or generation.session_key is None:
        return
    if generation.session_final:
        why = "ended"
    elif generation.client_tools and not waits_for_client(response):
        why = "answered"
    else:
        return
    executor.release(
        generation.session_key,
        generation.prompt_token_ids,
        generation.cache_salt,
        keep=shared_prefix(prompt),
        why=why,  # type: ignore[arg-type]
    )


async def release_deleted(
    executor: Executor, renderer: Renderer, entry: StoredResponse, tenant: Tenant = OPEN
) -> None:
    """Release the KV cache of the deleted stored response ``entry`` (the module docstring); nothing for a
    response without a session or an engine that keeps no cache."""
    if entry.session_key is None or not executor.releases_kv:
        return
    try:
        recorded = orjson.loads(entry.response_json)
        body = {k: recorded[k] for k in _RENDERED_FIELDS if recorded.get(k) is not None}
        request = parse_request({**body, "input": [], "previous_response_id": entry.id})
        prompt, _ = await renderer.render(request, history=entry.history, prepare_tools=False, tenant=tenant)
    except Exception as exc:  # advice only: the deletion itself is done
        logger.info("No KV-cache release for deleted %s: %s: %s", entry.id, type(exc).__name__, exc)
        return
    executor.release(
        entry.session_key, prompt.token_ids, tenant.salt, keep=shared_prefix(prompt), why="ended"
    )
