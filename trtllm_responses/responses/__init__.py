"""The Responses service, transport-free: a request body in, runs, events and stored results out.

``service.py`` (``ResponsesService``) prepares a request (its parsed body and its ``Origin``) into a
frozen ``PreparedResponse`` (``prepared.py``) in the named stages of ``prepare.py`` and makes its one handle, a ``ResponseRun`` (``run.py``), which ``generation.py``
drives (the executor, ``tool_loop.py``, ``summaries.py``, ``logprobs.py``); ``sessions.py`` decides which
session a response belongs to (its key, inherited along a chain); ``steering.py`` decides
what WebSocket steering does to runs. docs/architecture.md#the-runs-life. Transports (``server/``) are
the only layer above it.
"""

from __future__ import annotations

from .conversations import ConversationsService
from .prepare import Origin
from .prepared import PreparedResponse
from .prompts import PromptTemplates
from .run import ResponseRun, RunState
from .sampling import SamplingDefaults, check_defaults
from .sealing import ContentSealer, load_key
from .service import ResponsesService
from .sessions import Chain
from .steering import Held, Steer, Steered, Steering, SteerRefused, Successor, as_items
from .subagent_limits import SubagentLimits

__all__ = [
    "Chain",
    "ContentSealer",
    "ConversationsService",
    "Held",
    "Origin",
    "PreparedResponse",
    "ResponseRun",
    "RunState",
    "Steer",
    "SteerRefused",
    "Steered",
    "Steering",
    "SubagentLimits",
    "Successor",
    "as_items",
    "PromptTemplates",
    "ResponsesService",
    "SamplingDefaults",
    "check_defaults",
    "load_key",
]
