"""``--log_format``: how every log line of a process is written (docs/tracing-and-dashboards.md#json-logs).

``text`` (the default): ``LEVEL logger: message`` lines, uvicorn's own loggers in uvicorn's own format, as
always. ``json``: every record of every logger (ours, uvicorn's, the libraries') one JSON object a line on
stderr, its fields named as OpenTelemetry's "Trace Context in non-OTLP Log Formats" and log data model
read them: ``timestamp`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``, ``message``, ``process``
(the pid), ``exception`` (the formatted traceback) when there is one, ``trace_id`` / ``span_id`` (lowercase
hex) when a span is current, and an access line's fields (``ops/access.py``) as typed fields beside them.
A record's ``extra`` values are never written (only the access record's, which are chosen to hold no
header value, key or body).

A line is one line whatever a message holds: JSON escapes control characters, and the line breaks JSON
leaves raw (U+0085, U+2028, U+2029) are escaped here; a message a UTF-8 stream cannot carry (a lone
surrogate) is written with ASCII escapes.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

__all__ = [
    "ACCESS_FIELDS",
    "LOG_FORMATS",
    "TRACE_IDS",
    "JsonFormatter",
    "TraceIds",
    "setup_logging",
    "uvicorn_logging",
]

#: The values ``--log_format`` takes.
LOG_FORMATS = ("text", "json")
#: The text format's line (what ``serve`` has always written).
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
#: The attribute of a log record holding its access record (``extra={ACCESS_FIELDS: record}``): an object
#: whose ``fields()`` are the line's typed fields (``access.AccessRecord``), made only by this formatter.
ACCESS_FIELDS = "access_fields"
#: The attribute of a log record holding the (trace_id, span_id) it was written for, over the current span's.
TRACE_IDS = "trace_ids"

#: Where the current span's ids come from: (trace_id, span_id) as lowercase hex, or None (no span).
TraceIds = Callable[[], tuple[str, str] | None]

#: Line breaks JSON writes raw inside strings (Python's ``splitlines``, and some log shippers, split on them).
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object on one line (the fields: this module's docstring).

    ``ids`` gives the current span's (trace_id, span_id), or None; it is called once a record, and a failure
    of it costs the line its ids, never the line. A record carrying its own ids (``TRACE_IDS``) keeps them.
    """

    def __init__(self, ids: TraceIds | None = None) -> None:
        super().__init__()
        self._ids = ids

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": _timestamp(record.created, record.msecs),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        access = getattr(record, ACCESS_FIELDS, None)
        if access is not None:
            entry.update((key, value) for key, value in access.fields().items() if key not in entry)
        ids = getattr(record, TRACE_IDS, None) or self._current_ids()
        if ids is not None:
            entry["trace_id"], entry["span_id"] = ids
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return _dumps(entry)

    def _current_ids(self) -> tuple[str, str] | None:
        if self._ids is None:
            return None
        try:
            return self._ids()
        except Exception:  # a log line without ids beats a traceback instead of the line
            return None


def _timestamp(created: float, msecs: float) -> str:
    """RFC 3339 in UTC with milliseconds: ``2026-11-29T13:49:01.123Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(msecs):03d}Z"


def _dumps(entry: dict[str, Any]) -> str:
    """``entry`` as one line of JSON, writable to any UTF-8 stream."""
    text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \\u escapes carry it
        return json.dumps(entry, separators=(",", ":"), default=str)
    return text.translate(_LINE_BREAKS)


def setup_logging(level: str, log_format: str = "text", ids: TraceIds | None = None) -> None:
    """Configure this process's root logger at ``level`` in ``log_format`` (one of :data:`LOG_FORMATS`).

    ``text`` is ``logging.basicConfig`` with :data:`TEXT_FORMAT`, as ``serve`` always did. ``json`` writes
    every record to stderr through :class:`JsonFormatter` (``ids``: the current span's ids), and routes what
    would otherwise reach stderr as plain text through it as well: warnings, and uncaught exceptions of the
    main thread and of other threads.
    """
    if log_format == "text":
        logging.basicConfig(level=level, format=TEXT_FORMAT)
        return
    if log_format != "json":
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(ids))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    logging.getLogger("trtllm_responses").critical("Uncaught %s", kind.__name__, exc_info=(kind, value, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("trtllm_responses").critical(
        "Uncaught %s in thread %s",
        args.exc_type.__name__,
        name,
        exc_info=args.exc_value,
    )


def uvicorn_logging(log_format: str) -> dict[str, Any]:
    """uvicorn's settings for ``log_format``: none for ``text`` (uvicorn's own handlers and format), and
    for ``json`` a ``log_config`` that gives its loggers no handler of their own, so their records reach
    the root logger's JSON handler (its access log stays off: the access line is ``ops/access.py``'s)."""
    if log_format == "text":
        return {}
    return {
        "log_config": {
            "version": 1,
            "disable_existing_loggers": False,
            "loggers": {
                "uvicorn": {"handlers": [], "propagate": True},
                "uvicorn.access": {"handlers": [], "propagate": False},
            },
        }
    }
