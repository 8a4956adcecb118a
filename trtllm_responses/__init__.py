"""trtllm-responses: gpt-oss behind the OpenAI Responses API, on TensorRT-LLM.

The names a program embedding the server uses, each importable from here (``from
trtllm_responses import create_app``) or from its own package, as listed in ``_PUBLIC``. They
are resolved on first use, so importing one layer (a render worker importing ``harmony``)
never loads the server. The packages, bottom to top (each imports only those before it;
docs/architecture.md#layout): core, ops, request, harmony, constraints, adapter, executors, stream, tools,
store,
responses, server, cli.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name → the module that defines it.
_PUBLIC = {
    "create_app": "trtllm_responses.server",
    "ServerConfig": "trtllm_responses.server.config",
    "HarmonyAdapter": "trtllm_responses.adapter",
    "load_encoding": "trtllm_responses.harmony",
    "Executor": "trtllm_responses.executors",
    "EchoExecutor": "trtllm_responses.executors",
    "TrtllmExecutor": "trtllm_responses.executors.trtllm",
    "ResponseStore": "trtllm_responses.store",
    "ConversationHistoryStore": "trtllm_responses.store",
    "SQLiteStore": "trtllm_responses.store.sqlite",
    "RedisStore": "trtllm_responses.store.redis",
    "open_store": "trtllm_responses.store",
    "ContentSealer": "trtllm_responses.responses.sealing",
    "main": "trtllm_responses.cli",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
