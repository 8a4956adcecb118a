"""The Responses service, transport-free: a request body in, events and stored results out.

``service.py`` (``ResponsesService``: prepare, create, retrieve, cancel, delete, compact) hands a
request to ``prepared.py`` (everything checked, the prompt rendered) and ``generation.py`` (one
generation loop for streaming and non-streaming), which runs ``tool_loop.py`` (server-run calls
inside a response), ``summaries.py`` and ``logprobs.py``. Around them: ``conversations.py``,
``references.py``, ``prompts.py`` (stored templates), ``truncation.py``, ``compaction.py`` (given
what it needs by the service), ``sealing.py`` (encrypted content), ``sampling.py``,
``cache_diagnostics.py``, ``delta_pump.py``. Transports (``server/``) are the only layer above it.
"""

from __future__ import annotations

from .conversations import ConversationsService
from .prepared import PreparedResponse
from .prompts import PromptTemplates
from .sampling import SamplingDefaults
from .sealing import ContentSealer, load_key
from .service import ResponsesService

__all__ = [
    "ContentSealer",
    "ConversationsService",
    "PreparedResponse",
    "PromptTemplates",
    "ResponsesService",
    "SamplingDefaults",
    "load_key",
]
