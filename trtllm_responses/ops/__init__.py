"""Operating the server: what it measures and records, at no cost per token.

``metrics.py`` (``/stats`` and ``/metrics``), ``gc_schedule.py`` (the garbage collector run when it
cannot stall streams), ``access.py`` (one access-log record per request). Recorded into by the
layers above; imports only ``core/``.
"""
