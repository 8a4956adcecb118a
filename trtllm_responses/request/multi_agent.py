"""The beta multi-agent surface's request side: its header and its ``multi_agent`` config.

OpenAI's beta (``client.beta.responses``, header ``openai-beta: responses_multi_agent=v1``) adds a
``multi_agent: {enabled, max_concurrent_subagents}`` field. Without the header the field is ignored, as
any unknown field is (``protocol.py``); with it, :func:`parse_multi_agent` checks it, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core import InvalidRequestError

__all__ = [
    "DEFAULT_MAX_CONCURRENT_SUBAGENTS",
    "MULTI_AGENT_BETA",
    "MULTI_AGENT_NAMESPACE",
    "ROOT_AGENT",
    "MultiAgentConfig",
    "multi_agent_beta",
    "parse_multi_agent",
]

#: The ``openai-beta`` value that turns the surface on (``BetaResponses.create(betas=[...])``).
MULTI_AGENT_BETA = "responses_multi_agent=v1"
#: The name of the agent the client talks to (``agent_message`` authors and recipients); its own items
#: carry no ``agent`` field. A sub-agent's items carry ``agent: {agent_name}`` and are not the root's
#: conversation: the root reads its sub-agents through its calls' outputs.
ROOT_AGENT = "root"
#: The Harmony namespace the multi-agent actions are shown to the model under (``multi_agent.spawn_agent``).
MULTI_AGENT_NAMESPACE = "multi_agent"
#: OpenAI's default (``response_create_params.MultiAgent.max_concurrent_subagents``: "The default is 3").
DEFAULT_MAX_CONCURRENT_SUBAGENTS = 3


@dataclass(frozen=True, slots=True)
class MultiAgentConfig:
    """A request's checked ``multi_agent``: sub-agents enabled, at most this many running at once."""

    max_concurrent_subagents: int = DEFAULT_MAX_CONCURRENT_SUBAGENTS


def multi_agent_beta(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether ASGI ``headers`` carry ``openai-beta: responses_multi_agent=v1`` (comma-separated values)."""
    for name, value in headers:
        if name.lower() == b"openai-beta":
            betas = value.decode("latin-1").split(",")
            if any(beta.strip() == MULTI_AGENT_BETA for beta in betas):
                return True
    return False


def parse_multi_agent(value: Any) -> MultiAgentConfig | None:
    """The request's ``multi_agent`` (None: absent or not enabled); InvalidRequestError naming the field."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequestError("'multi_agent' must be an object.", param="multi_agent")
    enabled = value.get("enabled")
    if not isinstance(enabled, bool):
        raise InvalidRequestError(
            "'multi_agent.enabled' is required and must be a boolean.", param="multi_agent.enabled"
        )
    limit = value.get("max_concurrent_subagents")
    if limit is None:
        limit = DEFAULT_MAX_CONCURRENT_SUBAGENTS
    elif isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidRequestError(
            "'multi_agent.max_concurrent_subagents' must be an integer of at least 1.",
            param="multi_agent.max_concurrent_subagents",
        )
    return MultiAgentConfig(limit) if enabled else None
