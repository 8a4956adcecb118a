"""``prompt_cache_options.comparison_response_id`` → the response's ``prompt_cache_diagnostics``.

Compared with a stored response, in OpenAI's order of reasons: a changed ``prompt_cache_key``, tools,
text format, reasoning effort, verbosity or service tier is a ``cache_miss`` with that reason (the
prompt's head differs, so nothing after it is reused); otherwise the two prompts are compared token by
token (the stored response's prompt is rebuilt from its stored conversation, its output included, with
this request's system and developer messages): the compared conversation entirely a prefix of this
prompt is a ``cache_hit``, else a ``cache_miss`` for ``input_changed`` with the tokens after the first
difference (``cache_missed_tokens``) and the shared prefix (``comparison_reusable_tokens``). An id the
store does not hold is ``comparison_response_not_found``. Only computed when asked (one store read).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from ..adapter import HarmonyAdapter, Prompt
from ..store import StoredResponse

__all__ = ["prompt_cache_diagnostics"]


def _changed(new: dict[str, Any], old: dict[str, Any]) -> str | None:
    checks = (
        ("prompt_cache_key_changed", lambda r: r.get("prompt_cache_key")),
        ("tools_changed", lambda r: r.get("tools") or []),
        ("text_format_changed", lambda r: (r.get("text") or {}).get("format")),
        ("reasoning_effort_changed", lambda r: (r.get("reasoning") or {}).get("effort")),
        ("verbosity_changed", lambda r: (r.get("text") or {}).get("verbosity") or "medium"),
        ("service_tier_changed", lambda r: r.get("service_tier")),
    )
    for reason, field in checks:
        if field(new) != field(old):
            return reason
    return None


def prompt_cache_diagnostics(
    adapter: HarmonyAdapter, prompt: Prompt, response: dict[str, Any], compared: StoredResponse | None
) -> dict[str, Any]:
    """The diagnostics of ``prompt`` (of the response ``response``, as echoed) against ``compared``."""
    if compared is None:
        return {"type": "comparison_response_not_found"}
    reason = _changed(response, orjson.loads(compared.response_json))
    tokens = prompt.token_ids
    if reason is not None:
        return {"type": "cache_miss", "reason": reason, "cache_missed_tokens": len(tokens)}
    # Its conversation as this prompt would hold it: the prompt it would build, less the closing <|start|>assistant.
    earlier = adapter.prompt_with(dataclasses.replace(prompt, history=compared.history), [])
    earlier = earlier[: -len(adapter.encoding.encode("<|start|>assistant"))]
    shared = 0
    for a, b in zip(earlier, tokens, strict=False):
        if a != b:
            break
        shared += 1
    if shared == len(earlier):
        return {"type": "cache_hit"}
    return {
        "type": "cache_miss",
        "reason": "input_changed",
        "cache_missed_tokens": len(tokens) - shared,
        "comparison_reusable_tokens": shared,
    }
