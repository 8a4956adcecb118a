"""Tracing on in this process (the in-process servers' spans too), exported to a real OTLP receiver.

``with traced(monkeypatch) as receiver:`` clears the OTEL_* environment, points it at a fresh
:class:`OtlpReceiver` (``capture=True``: with the GenAI content switch on), configures ``ops/tracing.py``,
and shuts tracing down (flushing every span) when the block ends. ``by_name(spans)`` indexes spans by name
(each name once), ``one(spans, name)`` the one span of a name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from trtllm_responses.ops import tracing

from .otlp_receiver import OtlpReceiver, ReceivedSpan

__all__ = ["CAPTURE", "OTEL_ENVIRONMENT", "all_text", "named", "one", "traced"]

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: The variables that turn tracing on or shape it: cleared before a test sets its own.
OTEL_ENVIRONMENT = (
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SERVICE_NAME",
    "OTEL_TRACES_SAMPLER",
    CAPTURE,
)


@contextmanager
def traced(monkeypatch: pytest.MonkeyPatch, *, capture: bool = False) -> Iterator[OtlpReceiver]:
    """Tracing on, to a receiver of its own, inside the ``with`` (see the module docstring)."""
    for name in OTEL_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    with OtlpReceiver() as receiver:
        for name, value in receiver.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
        if capture:
            monkeypatch.setenv(CAPTURE, "true")
        assert tracing.configure(None)
        try:
            yield receiver
        finally:
            tracing.shutdown()


def named(spans: Iterable[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    """The spans called ``name``, in start order."""
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_ns)


def one(spans: Iterable[ReceivedSpan], name: str) -> ReceivedSpan:
    """The one span called ``name`` (AssertionError if none or several)."""
    found = named(spans, name)
    assert len(found) == 1, (name, sorted({s.name for s in spans}))
    return found[0]


def all_text(spans: Iterable[ReceivedSpan]) -> str:
    """Every name, attribute and event value of ``spans`` as one string (to look for text that must not be
    there)."""

    def flat(value: Any) -> str:
        if isinstance(value, dict):
            return " ".join(f"{k}={flat(v)}" for k, v in value.items())
        if isinstance(value, tuple):
            return " ".join(flat(v) for v in value)
        return str(value)

    return "\n".join(f"{s.name} {flat(dict(s.attributes))} {flat(s.events)}" for s in spans)
