"""Compaction: a long conversation becomes its user messages plus one encrypted handoff summary.

``POST /v1/responses/compact`` (and automatic compaction) renders the
conversation as create would, but with :data:`COMPACTION_INSTRUCTION` as the
developer instructions and no tools, and runs that prompt on the executor to
completion (a summarization generation, not streamed). The model's final message
is the summary. The compacted window is, as OpenAI returns it, every user
message of the conversation verbatim, then one ``compaction`` item whose
``encrypted_content`` seals the summary (``sealing.py``). Sent back as input,
the compaction item is read where it stands as a user message carrying the
summary, so the conversation continues from a window of a few hundred tokens.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import InvalidRequestError, ServerError, new_id
from ..executors import Generating, GenerationRequest
from ..harmony import parse_completion
from ..ops import trace_attrs, tracing
from ..request import NO_IDENTITY, CompactionTrigger, InputItem, Message, ResponsesRequest, SessionIdentity
from ..tenants import OPEN, Tenant
from .sampling import sampling_settings
from .sealing import SUMMARY_PREFIX

if TYPE_CHECKING:
    from ..adapter import HarmonyAdapter, Prompt
    from ..executors import Executor
    from .rendering import Renderer
    from .sampling import SamplingDefaults
    from .sessions import HistoryLookup

__all__ = [
    "COMPACTION_INSTRUCTION",
    "Compaction",
    "Compactor",
    "compact_threshold",
    "compacted_response_json",
    "current_turn_users",
    "window_for_turn",
]

logger = logging.getLogger(__name__)

#: The developer instruction of the summarization generation (the echo executor keys on its first words).
COMPACTION_INSTRUCTION = (
    "You are compacting this conversation for a successor that will continue the work without "
    "seeing it. Write a handoff summary with everything the successor needs: the user's goals, "
    "decisions made and why, files and code touched, results of tool calls that still matter, "
    "and the open tasks. Be concise and complete."
)
#: Most tokens a summary may take.
MAX_SUMMARY_TOKENS = 4096


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compacted window and what the summarization generation cost."""

    items: list[dict[str, Any]]  # user messages verbatim, then the compaction item
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int

    @property
    def compaction_item(self) -> dict[str, Any]:
        """The ``compaction`` item (the last one)."""
        return self.items[-1]


def compact_threshold(request: ResponsesRequest) -> int | None:
    """The prompt size above which ``context_management`` asks to compact first (None: never)."""
    entries = request.context_management
    if not entries:
        return None
    threshold: int | None = None
    for i, entry in enumerate(entries):
        where = f"context_management[{i}]"
        if entry.get("type") != "compaction":
            raise InvalidRequestError(
                f"'{where}.type' must be 'compaction', the only context management this server has.",
                param=f"{where}.type",
            )
        value = entry.get("compact_threshold")
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidRequestError(
                f"'{where}.compact_threshold' must be a positive integer.", param=f"{where}.compact_threshold"
            )
        threshold = value if threshold is None else min(threshold, value)
    return threshold


def compaction_triggered(request: ResponsesRequest) -> tuple[ResponsesRequest, bool]:
    """``request`` without its ``compaction_trigger`` item, and whether it had one (compact before answering).

    The SDK's ``CompactionTrigger``: "Compacts the current context. Must be the final input item." Anywhere
    else it is a 400.
    """
    items = request.input
    if isinstance(items, str) or not any(isinstance(i, CompactionTrigger) for i in items):
        return request, False
    for i, item in enumerate(items[:-1]):
        if isinstance(item, CompactionTrigger):
            raise InvalidRequestError(
                f"'input[{i}]' is a compaction_trigger, which must be the final input item.",
                param=f"input[{i}]",
            )
    return request.model_copy(update={"input": items[:-1]}), True


def _is_user_message(item: InputItem) -> bool:
    return isinstance(item, Message) and item.role == "user"


def current_turn_users(request: ResponsesRequest) -> int:
    """How many user messages the request's own turn adds (after ``previous_response_id``, or trailing)."""
    items = request.input
    if isinstance(items, str):
        return 1
    if request.previous_response_id is not None:
        return sum(1 for item in items if _is_user_message(item))
    count = 0
    for item in reversed(items):
        if not _is_user_message(item):
            break
        count += 1
    return count


def window_for_turn(compaction: Compaction, request: ResponsesRequest) -> list[dict[str, Any]]:
    """The compacted window automatic compaction continues from: the summary, then this turn's user messages.

    The summary covers the whole conversation; the user messages of the turn being
    answered move after it, so the model reads them last, as it would without compaction.
    """
    users = compaction.items[:-1]
    keep = min(current_turn_users(request), len(users))
    earlier, current = users[: len(users) - keep], users[len(users) - keep :]
    return [*earlier, compaction.compaction_item, *current]


def _user_messages(prompt_history: Any) -> list[dict[str, Any]]:
    """The user messages of a conversation, as input items (earlier summaries left out: the new one covers them)."""
    items = []
    for message in prompt_history.messages:
        data = json.loads(message.source)
        if data.get("role") != "user":
            continue
        text = "".join(part.get("text", "") for part in data.get("content", []) if isinstance(part, dict))
        if text.startswith(SUMMARY_PREFIX):
            continue
        items.append(
            {
                "id": new_id("msg"),
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": [{"type": "input_text", "text": text}],
            }
        )
    return items


@dataclass(frozen=True, slots=True)
class Compactor:
    """Runs compactions: summarizes a conversation with the service's executor, rendering as create does.

    ``renderer`` builds a request's prompt as create would (its conversation so far, its new messages);
    the summary is sealed with its sealer (none: a compaction is a 400) and stamped ``created_by``
    ``model_name``.
    """

    renderer: Renderer
    executor: Executor
    sampling_defaults: SamplingDefaults
    model_name: str

    async def compact(
        self,
        request: ResponsesRequest,
        *,
        tenant: Tenant = OPEN,
        size: int = 0,
        session: SessionIdentity = NO_IDENTITY,
        lookup: HistoryLookup | None = None,
    ) -> Compaction:
        """Summarize the conversation ``request`` describes (its input, ``previous_response_id``).

        ``size``: the request's bytes, which decides where its new messages are rendered. ``session``:
        the session of the response being compacted for (its prompt extends the session's). ``lookup``:
        asked for its ``previous_response_id`` before the store (``tenant``'s: docs/tenants.md#isolation).
        ``tenant``: who asks: its encrypted items are opened, the summary is sealed for it, the summarization
        salted with its ``salt``. Traced as a ``compaction`` span, child of the current one (the prepare of
        a response compacted first, or the ``/v1/responses/compact`` request's).
        """
        with tracing.span("compaction") as span:
            compaction = await self._compact(request, tenant, size, session, lookup)
            if span.is_recording():
                span.set_attributes(
                    {
                        trace_attrs.REQUEST_MODEL: self.model_name,
                        trace_attrs.SIDE_INPUT_TOKENS: compaction.input_tokens,
                        trace_attrs.SIDE_OUTPUT_TOKENS: compaction.output_tokens,
                    }
                )
            return compaction

    async def _compact(
        self,
        request: ResponsesRequest,
        tenant: Tenant,
        size: int,
        session: SessionIdentity,
        lookup: HistoryLookup | None,
    ) -> Compaction:
        if self.renderer.sealer is None:
            raise InvalidRequestError("Compaction needs an encryption key; this server has none.")
        sealer = self.renderer.sealer.bound(tenant.scope)
        instructions = COMPACTION_INSTRUCTION
        if request.instructions:
            instructions += "\n\nThe instructions the conversation ran under:\n" + request.instructions
        summarizing = request.model_copy(
            update={"instructions": instructions, "tool_choice": "none", "tools": ()}
        )
        prompt, _ = await self.renderer.render(summarizing, tenant=tenant, lookup=lookup, size=size)
        refusal = self.executor.prompt_refusal(len(prompt.token_ids))
        if refusal is not None:
            raise InvalidRequestError(
                f"The conversation cannot be summarized: {refusal}",
                param="input",
                code="context_length_exceeded",
            )
        tokens = await self._summarize(prompt, session, tenant.salt)
        summary, reasoning_tokens = _read_summary(self.renderer.adapter, tokens)
        logger.info(
            "Compacted %d prompt tokens into a %d-character summary", len(prompt.token_ids), len(summary)
        )
        item = {
            "id": new_id("cmp"),
            "type": "compaction",
            "encrypted_content": sealer.seal_summary(summary),
            "created_by": self.model_name,
        }
        return Compaction(
            items=[*_user_messages(prompt.history), item],
            input_tokens=len(prompt.token_ids),
            output_tokens=len(tokens),
            reasoning_tokens=reasoning_tokens,
        )

    async def _summarize(self, prompt: Prompt, session: SessionIdentity, salt: str | None) -> list[int]:
        """The summarization generation's tokens (run to its end, not streamed); ServerError if it failed."""
        executor = self.executor
        room = executor.max_seq_len - len(prompt.token_ids)
        generation = GenerationRequest(
            request_id=new_id("cmp"),
            prompt_token_ids=prompt.token_ids,
            sampling=sampling_settings(
                None,
                self.sampling_defaults,
                max_tokens=min(room, MAX_SUMMARY_TOKENS),
                stop_token_ids=self.renderer.adapter.stop_token_ids,
                unapplied=executor.unapplied_sampling,
            ),
            session_key=session.key,
            session_parent=session.parent,
            session_final=session.final,
            cache_salt=salt,
        )
        tokens: list[int] = []
        async with Generating(executor, generation) as deltas:
            async for delta in deltas:
                tokens += delta.token_ids
                if delta.finish_reason is not None:
                    if delta.finish_reason in ("error", "cancelled"):
                        raise ServerError(
                            f"The summarization generation failed: {delta.error or delta.finish_reason}."
                        )
                    break
        return tokens


def _read_summary(adapter: HarmonyAdapter, tokens: list[int]) -> tuple[str, int]:
    """The last final message of a completion (the summary), and the tokens spent in analysis."""
    messages = parse_completion(adapter.encoding, tokens)
    spoken = [m for m in messages if not m.header.recipient]
    finals = [m.text for m in spoken if m.header.channel == "final"]
    reasoning_tokens = sum(m.num_tokens for m in spoken if m.header.channel == "analysis")
    return (finals[-1] if finals else ""), reasoning_tokens


def compacted_response_json(compaction: Compaction) -> dict[str, Any]:
    """The ``response.compaction`` object (the SDK's ``CompactedResponse``)."""
    return {
        "id": new_id("resp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": compaction.items,
        "usage": {
            "input_tokens": compaction.input_tokens,
            # The summarization run's prompt is computed in full (nothing of it is reported as cached).
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": compaction.input_tokens},
            "output_tokens": compaction.output_tokens,
            "output_tokens_details": {"reasoning_tokens": compaction.reasoning_tokens},
            "total_tokens": compaction.input_tokens + compaction.output_tokens,
        },
    }
