"""Giving freed memory back to the system (glibc's ``malloc_trim``), where the C library has it.

CPython's allocator asks glibc for blocks; glibc keeps what is freed in its heaps for reuse and returns
little of it, so after a burst of large responses is forgotten (background runs past their budget or
grace) the process's RSS stays near its peak though nothing holds that memory: 20 finished background
runs counted 486 MiB and held 780 MiB of RSS, 41 MiB of 10 smaller ones' 87 came back with one trim.
:func:`trim_heap` is that trim; the runs registry (``responses/runs.py``) calls it (in a thread) after forgetting runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys

__all__ = ["trim_heap"]

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # musl has no malloc_trim
        logger.info("no malloc_trim in this C library: freed memory is returned as the allocator decides")
        return None


def trim_heap() -> bool:
    """Return the C heap's free memory to the system; False where there is no ``malloc_trim``."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
