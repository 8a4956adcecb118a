"""Schemathesis over the server's own ``/openapi.json`` and over the vendored Open Responses spec.

Bounded and seeded: ``TRTLLM_RESPONSES_FUZZ_EXAMPLES`` examples per operation and
generation mode (default 40, about a minute in all), seed
``TRTLLM_RESPONSES_FUZZ_SEED`` (default 8). Raise the count for a long run, e.g.::

    TRTLLM_RESPONSES_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest tests/server/test_fuzz.py -q

Every answer must be below 500; every 4xx the error envelope (JSON, the schema
``/openapi.json`` states); every 200 from ``POST /v1/responses`` a response valid
for the SDK and the spec (``contract.validate_response``) or a stream that passes
``check_stream``. Against our own document, schemathesis also checks that the
status, content type and body are ones the document states.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from support.contract import SPEC_PATH, validate_response
from support.server_harness import RunningServer, parse_sse
from support.stream_grammar import check_stream

from trtllm_responses.server.openapi import ANTHROPIC_ERROR_SCHEMA, ERROR_SCHEMA

EXAMPLES = int(os.environ.get("TRTLLM_RESPONSES_FUZZ_EXAMPLES", "40"))
SEED = int(os.environ.get("TRTLLM_RESPONSES_FUZZ_SEED", "8"))
MODES = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]

_envelope = jsonschema.Draft202012Validator(ERROR_SCHEMA)
_anthropic_envelope = jsonschema.Draft202012Validator(ANTHROPIC_ERROR_SCHEMA)


@pytest.fixture(scope="module")
def server_options() -> dict[str, Any]:
    # Its own server: fuzzed requests fill the store, which other tests' servers must not see.
    return {"max_stored_responses": 200}


def _describe(case: Any, response: Any) -> str:
    body = case.body if not isinstance(case.body, bytes) else case.body[:2000]
    sent = (
        json.dumps(body, ensure_ascii=False, default=repr)[:2000]
        if isinstance(body, (dict, list, str, bytes, int, float))
        else ""
    )
    return f"{case.method} {case.formatted_path} {case.query or ''} body={sent} -> {response.status_code} {response.text[:500]}"


def _check_answer(case: Any, response: Any) -> None:
    """The bar for every fuzzed request, whichever document generated it."""
    status = response.status_code
    assert status < 500, _describe(case, response)
    content_type = (response.headers.get("content-type") or [""])[0]  # schemathesis: name -> values
    messages = case.path.startswith("/v1/messages")
    if status >= 400:
        assert content_type == "application/json", _describe(case, response)
        envelope = _anthropic_envelope if messages else _envelope
        errors = list(envelope.iter_errors(response.json()))
        assert not errors, f"{errors[0].message}: {_describe(case, response)}"
        return
    if messages and content_type.startswith("text/event-stream"):
        from support.messages_grammar import check_messages_stream, parse_messages_sse

        check_messages_stream(parse_messages_sse(response.text.split("\n")))
        return
    if case.method == "POST" and case.path.endswith("/responses") and status == 200:
        try:
            if content_type.startswith("text/event-stream"):
                events = parse_sse(iter(response.text.split("\n")[:-1]))
                try:
                    check_stream(events)
                except AssertionError as exc:
                    raise AssertionError(f"{exc} (events: {[e['type'] for e in events][-3:]})") from exc
            else:
                validate_response(response.json())
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {_describe(case, response)}") from exc


def _load(document: dict[str, Any]) -> Any:
    schema = schemathesis.openapi.from_dict(document)
    schema.config.max_stream_events = 1 << 30  # read every stream to its end (the default cuts at 100 events)
    return schema


def _fuzz(operation: Any, mode: GenerationMode, base_url: str, own_checks: list[Any]) -> None:
    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call(base_url=base_url, timeout=60)
        _check_answer(case, response)
        if own_checks:
            case.validate_response(response, checks=own_checks)

    run()


def _own_cases() -> list[tuple[str, GenerationMode]]:
    from trtllm_responses.server.openapi import _ROUTES

    bodies = {"POST /v1/responses", "POST /v1/messages", "POST /v1/messages/count_tokens"}
    labels = sorted({f"{method.upper()} {path}" for path, method in _ROUTES} | bodies)
    # Negative data needs something that can be invalid: a body or a constrained query parameter
    # (a path id or a free-form string is valid whatever it holds).
    negatable = bodies | {"GET /v1/responses/{response_id}/input_items"}
    return [(label, mode) for label in labels for mode in MODES if mode.is_positive or label in negatable]


@pytest.mark.parametrize(("label", "mode"), _own_cases(), ids=lambda v: str(v))
def test_fuzz_own_openapi(server: RunningServer, label: str, mode: GenerationMode) -> None:
    document = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
    schema = _load(document)
    operation = schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is missing from /openapi.json"
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]
    _fuzz(operation, mode, server.base_url, checks)


@pytest.mark.parametrize("mode", MODES, ids=str)
def test_fuzz_open_responses_spec(server: RunningServer, mode: GenerationMode) -> None:
    schema = _load(json.loads(SPEC_PATH.read_text()))
    operation = schema.find_operation_by_label("POST /responses")
    assert operation is not None
    _fuzz(operation, mode, f"{server.base_url}/v1", [])
