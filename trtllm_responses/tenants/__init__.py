"""Tenants: who is asking, what they may do, and their share of the engine (docs/tenants.md).

``directory.py`` (the tenants of a server: keys, limits, reload on SIGHUP), ``counters.py`` (the shared
counts limits are kept in: each store backend has them), ``limits.py`` (requests, tokens and concurrent
responses over those counts, and their 429s and headers), ``admission.py`` (the fair share of a full
engine: pure state). Imports only ``core/``;
used by the store (whose keys a tenant scopes), the service and the transports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face

if TYPE_CHECKING:
    from .admission import EngineFull, FairShare, Ticket
    from .counters import Counters
    from .directory import (
        OPEN,
        SERVICE_TIER_ORDER,
        Limits,
        Tenant,
        TenantDirectory,
        TenantFileError,
        Tenants,
        hash_key,
        presented_keys,
    )
    from .limits import LEASE_SECONDS, WINDOW_SECONDS, Quota, RateLimiter, RateLimitError, Window, limited

__all__ = lazy_face(globals())
