"""OpenTelemetry tracing: off by default at no cost, the standard ``OTEL_*`` environment when on.

On in a process when ``configure`` is given ``--otlp_traces_endpoint`` (as trtllm-serve's flag: the protocol
is ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, ``grpc`` unless it says ``http/protobuf``, the default
TensorRT-LLM's ``llmapi/tracing.py`` ``get_span_exporter`` takes, so an endpoint handed to both means the
same), or when the environment names an endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``; then the SDK's own default protocol, ``http/protobuf``, unless
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``/``OTEL_EXPORTER_OTLP_PROTOCOL`` say ``grpc``). ``OTEL_SDK_DISABLED=true``
or ``OTEL_TRACES_EXPORTER=none`` keep it off. The rest is the SDK's: ``OTEL_TRACES_SAMPLER`` (and ``_ARG``),
``OTEL_SERVICE_NAME`` (default here ``trtllm-responses``), ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_BSP_*``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_PROPAGATORS``.

Off, nothing of OpenTelemetry is imported: ``span()`` returns one shared no-op context manager whose span
(``NULL_SPAN``) ignores every call, ``inject()`` and ``current_ids()`` return ``None``. Callers that build
attributes worth more than a few field reads check ``span.is_recording()`` first (a sampled-out span is
not recording either).

On, this process has its own ``TracerProvider`` (a ``BatchSpanProcessor`` to the OTLP exporter); it never
sets OpenTelemetry's global provider, which TensorRT-LLM's ``init_tracer`` sets when the LLM is given the
endpoint, so the two never fight over it. Context (which span is current) is OpenTelemetry's own, in
context variables, so a task started inside a span continues it.

Privacy (docs/tracing-and-dashboards.md): no prompt, output, instructions, tool argument or tool output
text is put in any span unless ``capture_content()``, which is the GenAI instrumentations' own switch,
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

__all__ = [
    "NULL_SPAN",
    "TRACE_HEADERS",
    "SpanKindName",
    "SpanLike",
    "TracingSetupError",
    "capture_content",
    "check",
    "configure",
    "current_ids",
    "current_span",
    "enabled",
    "fail",
    "inject",
    "linked_span",
    "rename",
    "server_span",
    "shutdown",
    "span",
    "start_span",
    "use_span",
]

#: The W3C Trace Context headers read from a client and handed to the engine (TensorRT-LLM's
#: ``llmapi/tracing.py`` ``TRACE_HEADERS``).
TRACE_HEADERS = ("traceparent", "tracestate")
_CARRIED = frozenset((b"traceparent", b"tracestate", b"baggage"))
_SERVICE = "trtllm-responses"
_SCOPE = "trtllm_responses"

AttributeValue = str | bool | int | float | tuple[str, ...] | tuple[int, ...] | tuple[float, ...]
SpanKindName = Literal["internal", "server", "client"]


class TracingSetupError(RuntimeError):
    """Tracing was asked for but cannot run: the SDK or exporter is missing, or the protocol is unknown."""


class SpanLike(Protocol):
    """What callers may do with a span: OpenTelemetry's ``Span`` when on, ``NULL_SPAN`` when off."""

    def set_attribute(self, key: str, value: Any) -> None: ...
    def set_attributes(self, attributes: Mapping[str, Any]) -> None: ...
    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None: ...
    def is_recording(self) -> bool: ...
    def end(self) -> None: ...


class _NullSpan:
    """The span of a process that does not trace: every call does nothing."""

    __slots__ = ()

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        return None

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        return None

    def is_recording(self) -> bool:
        return False

    def end(self) -> None:
        return None


class _NullScope:
    """``with span(...)`` when off: one shared object, nothing allocated per use."""

    __slots__ = ()

    def __enter__(self) -> SpanLike:
        return NULL_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


NULL_SPAN: SpanLike = _NullSpan()
_NULL_SCOPE = _NullScope()

# The process's tracer when on; None when off (the one global every call reads first).
_tracer: Tracer | None = None
_provider: TracerProvider | None = None
_capture = False


def enabled() -> bool:
    """Whether this process traces."""
    return _tracer is not None


def capture_content() -> bool:
    """Whether the operator opted into text content in spans (off unless asked)."""
    return _capture


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def _protocol(flag_endpoint: str | None) -> str:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or (
        None if flag_endpoint else os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    )
    return (protocol or ("grpc" if flag_endpoint else "http/protobuf")).strip()


def _exporter_class(protocol: str) -> Any:
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        elif protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
        else:
            raise TracingSetupError(f"OTLP protocol {protocol!r} is not served: grpc or http/protobuf")
    except ImportError as exc:
        raise TracingSetupError(
            f"tracing needs the OpenTelemetry SDK and its OTLP {protocol} exporter: "
            "pip install 'trtllm-responses[tracing]'"
        ) from exc
    return OTLPSpanExporter


def check(endpoint: str | None = None) -> bool:
    """Whether ``configure(endpoint)`` would turn tracing on; raises ``TracingSetupError`` (at start, before
    a model loads) when it would but cannot."""
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    off = _env_true("OTEL_SDK_DISABLED") or os.environ.get("OTEL_TRACES_EXPORTER", "").strip() == "none"
    if off or not (endpoint or env_endpoint):
        return False
    _exporter_class(_protocol(endpoint))
    return True


def configure(endpoint: str | None = None, *, instance: str | None = None) -> bool:
    """Turn tracing on in this process if ``endpoint`` (the flag) or the environment asks; say whether.

    Called once per process at start (each frontend of a group, after its fork); again only after
    ``shutdown``. ``instance`` names this process in the resource (``service.instance.id``).
    Raises ``TracingSetupError`` when asked for but the SDK or exporter is not installed.
    """
    global _tracer, _provider, _capture
    if _tracer is not None:
        return True
    if not check(endpoint):
        return False
    exporter_class = _exporter_class(_protocol(endpoint))
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, str] = {}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = _SERVICE
    if instance:
        attributes["service.instance.id"] = instance
    provider = TracerProvider(resource=Resource.create(attributes))
    exporter = exporter_class(endpoint=endpoint) if endpoint else exporter_class()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    _provider, _tracer = provider, provider.get_tracer(_SCOPE)
    _capture = _env_true("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    return True


def shutdown() -> None:
    """Export what is pending and turn tracing off in this process (at the server's stop)."""
    global _tracer, _provider
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def _kind(kind: SpanKindName) -> Any:
    from opentelemetry.trace import SpanKind

    return {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}[kind]


def span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None, *, kind: SpanKindName = "internal"
) -> AbstractContextManager[SpanLike]:
    """A span, current inside the ``with``, child of the current one; an exception leaving it is recorded
    and sets its status to error. Off: the shared no-op."""
    tracer = _tracer
    if tracer is None:
        return _NULL_SCOPE
    return tracer.start_as_current_span(name, kind=_kind(kind), attributes=attributes)


def _extract(headers: Iterable[tuple[bytes, bytes]]) -> Any:
    from opentelemetry import propagate

    carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers if name in _CARRIED}
    return propagate.extract(carrier) if carrier else None


def server_span(
    name: str,
    headers: Iterable[tuple[bytes, bytes]],
    attributes: Mapping[str, AttributeValue] | None = None,
) -> AbstractContextManager[SpanLike]:
    """The span of one request a client sent (kind server): it continues the client's ``traceparent``
    (and ``tracestate``, ``baggage``) from ``headers`` (ASGI's lowercase byte pairs), else starts a new
    trace, sampled as configured. Current inside the ``with``."""
    tracer = _tracer
    if tracer is None:
        return _NULL_SCOPE
    return tracer.start_as_current_span(
        name, context=_extract(headers), kind=_kind("server"), attributes=attributes
    )


def linked_span(
    name: str,
    link: SpanLike,
    attributes: Mapping[str, AttributeValue] | None = None,
    *,
    kind: SpanKindName = "server",
) -> AbstractContextManager[SpanLike]:
    """A span that starts a trace of its own (no parent), linked to ``link`` (OpenTelemetry's way for work
    done under a long-lived operation: a WebSocket connection's turns); current inside the ``with``."""
    tracer = _tracer
    if tracer is None:
        return _NULL_SCOPE
    from opentelemetry import context, trace

    links = [trace.Link(link.get_span_context())] if link is not NULL_SPAN else None  # type: ignore[attr-defined]
    return tracer.start_as_current_span(
        name, context=context.Context(), kind=_kind(kind), attributes=attributes, links=links
    )


def start_span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None, *, kind: SpanKindName = "internal"
) -> SpanLike:
    """A span child of the current one, not made current and not ended: for a stage whose start and end
    are in different callbacks (the caller ends it, ``use_span`` makes it current where needed)."""
    tracer = _tracer
    if tracer is None:
        return NULL_SPAN
    return tracer.start_span(name, kind=_kind(kind), attributes=attributes)


@contextmanager
def _using(live: Any) -> Iterator[SpanLike]:
    from opentelemetry import trace

    with trace.use_span(live, end_on_exit=False, record_exception=False, set_status_on_exception=False):
        yield live


def use_span(live: SpanLike) -> AbstractContextManager[SpanLike]:
    """Make a ``start_span`` span current inside the ``with`` without ending it."""
    if live is NULL_SPAN or _tracer is None:
        return _NULL_SCOPE
    return _using(live)


def current_span() -> SpanLike:
    """The current span, to add attributes to it from below the code that opened it (a stage's cache hit);
    ``NULL_SPAN`` when off (a non-recording span when none is current)."""
    if _tracer is None:
        return NULL_SPAN
    from opentelemetry import trace

    return trace.get_current_span()  # type: ignore[return-value]


def rename(live: SpanLike, name: str) -> None:
    """Give ``live`` the name known only once it ended its work (an HTTP route's template)."""
    if live.is_recording():
        live.update_name(name)  # type: ignore[attr-defined]


def fail(live: SpanLike, message: str, *, error_type: str | None = None) -> None:
    """Mark ``live`` failed (status error, ``error.type``) without an exception: an OpenAI error answered."""
    if not live.is_recording():
        return
    from opentelemetry.trace import Status, StatusCode

    live.set_status(Status(StatusCode.ERROR, message))  # type: ignore[attr-defined]
    if error_type:
        live.set_attribute("error.type", error_type)


def inject(live: SpanLike | None = None) -> dict[str, str] | None:
    """The W3C ``traceparent``/``tracestate`` of ``live`` (else the current span) for a request this
    process makes (the engine, an MCP server); None when off or no span is current."""
    if _tracer is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = trace.set_span_in_context(live) if live is not None and live is not NULL_SPAN else None  # type: ignore[arg-type]
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=context)
    return carrier or None


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span as 32 and 16 lowercase hex digits, for logs; None when off
    or no valid span is current."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
