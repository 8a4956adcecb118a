"""The fields ``/v1/responses`` and ``/v1/chat/completions`` share cannot drift (``request/shared_fields.py``).

Every value of each shared table (efforts, verbosities, service tiers, cache retentions) and the
values on and just past each numeric bound are sent to both routes of a real server: a value one
route takes and the other refuses fails the test, and a refusal names the field as that route
spells it. The probes are read from the tables themselves, so a value added to a table is probed on
both routes at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

import httpx
import pytest
from support.server_harness import RunningServer

from trtllm_responses.request.shared_fields import (
    MAX_INTEGER,
    SERVICE_TIERS,
    CacheRetention,
    ReasoningEffort,
    Verbosity,
)

_INTEGERS = [0, 1, 16, 16.0, 16.5, "16", MAX_INTEGER, MAX_INTEGER + 1, 2**64]

#: (where on /v1/responses, the chat field, the values to try, chat fields a value needs there).
SHARED: list[tuple[str, str, list[Any], dict[str, Any]]] = [
    ("reasoning.effort", "reasoning_effort", [*get_args(ReasoningEffort), "huge", "HIGH", 3], {}),
    ("text.verbosity", "verbosity", [*get_args(Verbosity), "loud", 1], {}),
    ("service_tier", "service_tier", [*(t for t in SERVICE_TIERS if t), "turbo", ""], {}),
    ("prompt_cache_retention", "prompt_cache_retention", [*get_args(CacheRetention), "1y"], {}),
    ("max_output_tokens", "max_completion_tokens", [*_INTEGERS, -1], {}),
    ("max_output_tokens", "max_tokens", [*_INTEGERS, -1], {}),
    ("seed", "seed", [*_INTEGERS, -MAX_INTEGER - 1, -MAX_INTEGER - 2, -(2**64)], {}),
    ("temperature", "temperature", [-0.1, 0, 1.5, 2, 2.1, "1"], {}),
    ("top_p", "top_p", [0, 0.01, 1, 1.01], {}),
    ("frequency_penalty", "frequency_penalty", [-2.01, -2, 2, 2.01], {}),
    ("presence_penalty", "presence_penalty", [-2.01, -2, 2, 2.01], {}),
    ("top_logprobs", "top_logprobs", [-1, 0, 20, 21, 2.5], {"logprobs": True}),
    ("safety_identifier", "safety_identifier", ["a" * 64, "a" * 65, 5], {}),
    ("prompt_cache_key", "prompt_cache_key", ["k" * 64, "k" * 65, 5], {}),
]

CASES = [
    pytest.param(path, chat, value, extra, id=f"{chat}={value!r}"[:60])
    for path, chat, values, extra in SHARED
    for value in values
]


@pytest.fixture(scope="module")
def raw(serve) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    running: RunningServer = serve()
    try:
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            yield client
    finally:
        running.stop()


def _nested(path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    return {head: _nested(rest, value) if rest else value}


@pytest.mark.parametrize(("path", "chat", "value", "extra"), CASES)
def test_both_routes_take_and_refuse_the_same_values(
    raw: httpx.Client, path: str, chat: str, value: Any, extra: dict[str, Any]
) -> None:
    responses = raw.post(
        "/v1/responses", json={"model": "m", "input": "Hi", "store": False, **_nested(path, value)}
    )
    completions = raw.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "Hi"}], chat: value, **extra},
    )
    assert responses.status_code in (200, 400), responses.text
    assert completions.status_code == responses.status_code, (
        f"/v1/responses {path}={value!r}: {responses.status_code}; "
        f"/v1/chat/completions {chat}={value!r}: {completions.status_code} {completions.text[:300]}"
    )
    if responses.status_code == 400:  # each names the field as its own route spells it
        assert responses.json()["error"]["param"] == path
        assert completions.json()["error"]["param"] == chat
