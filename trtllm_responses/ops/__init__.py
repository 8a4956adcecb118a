"""Operating the server: what it measures and records, at no cost per token.

``metrics.py`` (``/stats`` and ``/metrics``), ``gc_schedule.py`` (the garbage collector run when it
cannot stall streams), ``access.py`` (one access-log record per request), ``log_format.py`` (``--log_format``: text, or one
JSON object a line), ``heap.py`` (freed memory
given back to the system). Recorded into by the
layers above; imports only ``core/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face

if TYPE_CHECKING:
    from .access import AccessRecord
    from .gc_schedule import CollectorSchedule
    from .heap import trim_heap
    from .log_format import LOG_FORMATS, JsonFormatter, setup_logging, uvicorn_logging
    from .metrics import ServerMetrics, merge_snapshots, use_group_folder

#: Resolved on first use: importing the package loads none of them (metrics pulls prometheus-client).
__all__ = lazy_face(globals())
