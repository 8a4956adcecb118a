"""ResponseStream: Harmony transitions in, typed Responses stream events out.

A transport-free state machine. It holds one current item (kind, ids,
output_index) and the items already done, and stamps every event with the next
``sequence_number`` in one place (``_emit``). Its methods map 1:1 to what the
Harmony parser reports and to how a generation ends:

    start()                 → response.created, response.in_progress
    message_started(header) → output_item.added (+ content_part.added)
    content_delta(text)     → output_text / reasoning_text / function_call_arguments / … .delta
    message_ended(status)   → … .done (+ content_part.done), output_item.done
                              (a server-run tool call is held open instead, see below)
    complete(usage)         → response.completed
    incomplete(usage)       → response.incomplete  (max_output_tokens, or steered at a message boundary)
    fail(message, usage)    → response.failed
    cancel(usage)           → response.failed with status cancelled (a client cancelled it)

Server-run tools (``responses/tool_loop.py``) use a few more, all at message boundaries
(``tool_items.py``): ``hold_calls``, ``tool_started`` / ``tool_finished``, ``tool_item``,
``list_tools_item``, ``model_output``. With summaries on, a reasoning item that ends whole is
parked (``summary_due``) and closed by ``summary_delta`` / ``summary_ended`` (``summary.py``). ``rewrite_messages`` installs a per-message text
rewriter (the browser's citations → ``url_citation`` annotations, streamed as
``response.output_text.annotation.added``).

Each returns the list of events it caused; an illegal transition raises
:class:`StreamStateError`. The final response is assembled from the items the
stream emitted, so ids in the stream and in the final response always agree.

:class:`TokenStreamProcessor` drives a ResponseStream from executor token deltas
through the Harmony parser, and counts usage.

Modules: docs/architecture.md#layout (``stream/``).
"""

from __future__ import annotations

from .agent_items import AgentItem
from .events import make_usage
from .item import StreamStateError, TextRewriter
from .response import ResponseStream
from .tokens import RunControl, TokenStreamProcessor

__all__ = [
    "AgentItem",
    "ResponseStream",
    "RunControl",
    "StreamStateError",
    "TextRewriter",
    "TokenStreamProcessor",
    "make_usage",
]
