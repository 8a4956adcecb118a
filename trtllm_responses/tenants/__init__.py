"""Tenants: who is asking, what they may do, and their share of the engine (docs/tenants.md).

``directory.py`` (the tenants of a server: keys, limits, reload on SIGHUP). Imports only ``core/``;
used by the store (whose keys a tenant scopes), the service and the transports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face

if TYPE_CHECKING:
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

__all__ = lazy_face(globals())
