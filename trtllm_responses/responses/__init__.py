"""The Responses service, transport-free: a request body in, runs, events and stored results out.

``service.py`` (``ResponsesService``) prepares a request (its parsed body and its ``Origin``, in the named stages of
``prepare.py``) into a frozen ``PreparedResponse``
(``prepared.py``) and makes its one handle, a ``ResponseRun`` (``run.py``), which its own driver
(``generation.py``: the executor, ``tool_loop.py``, ``summaries.py``, ``logprobs.py``) generates and
``keeping.py`` stores; ``runs.py`` is the one registry of runs (live ones by id, background ones kept
and replayable for their grace period: ``background.py``, ``frame_log.py``, and across processes through
Redis, ``relay.py``); ``sessions.py`` decides which
session a response belongs to (its key, inherited along a chain); ``steering.py`` decides
what WebSocket steering does to runs; ``gate.py`` lets each turn in (tenants' limits, fair share). docs/architecture.md#the-runs-life. Transports (``server/``) are
the only layer above it.
"""

from __future__ import annotations

from .background import BackgroundLimits, BackgroundRun, Framing
from .conversations import ConversationsService
from .gate import Admission, AdmissionLimits
from .prepare import Origin
from .prepared import ClientLeft, PreparedResponse
from .prompts import PromptTemplates
from .run import ResponseRun, RunState
from .runs import Runs
from .sampling import SamplingDefaults, check_defaults
from .sealing import ContentSealer, load_key
from .service import ResponsesService
from .sessions import Chain
from .steering import Held, Steer, Steered, Steering, SteerRefused, Successor, as_items
from .subagent_limits import SubagentLimits

__all__ = [
    "Admission",
    "AdmissionLimits",
    "BackgroundLimits",
    "BackgroundRun",
    "Chain",
    "ClientLeft",
    "ContentSealer",
    "ConversationsService",
    "Framing",
    "Held",
    "Origin",
    "PreparedResponse",
    "ResponseRun",
    "RunState",
    "Runs",
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
