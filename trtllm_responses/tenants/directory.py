"""Who is asking: the tenants of a server, their keys and limits (docs/tenants.md#the-tenants-file).

Three ways a server is set up, one shape for all of them (a :class:`Tenants` table):

- **open** (no ``--api_key``, no ``--tenants``): every request is the one tenant :data:`OPEN`, for local use;
- **one key** (``--api_key KEY``): a request with that key is the one tenant ``default`` (an admin);
- **a tenants file** (``--tenants FILE``): each key names its tenant; a key matches at most one.

Keys are kept only as SHA-256 digests: the file holds ``"sha256:<64 hex>"`` and a plain key in it is
refused at start (:func:`hash_key` makes the digest; ``trtllm-responses hash-key`` prints it). A
presented key is hashed once and found by its digest (a client chooses its key, not the digest: the
lookup's time says nothing of the digests held); a key is never logged, echoed or stored (the tenant's name is).

The open tenant and the one-key tenant have the empty :attr:`Tenant.scope`: what they stored before
tenants existed is theirs still. A tenant of a file is scoped by its name.

:class:`TenantDirectory` holds the table a server answers with now; ``reload()`` (on SIGHUP) reads the
file again and swaps the table in one assignment: a request identified before keeps its tenant, a
file that no longer reads keeps the table it had (and says why in the log).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

__all__ = [
    "OPEN",
    "SERVICE_TIER_ORDER",
    "Limits",
    "Tenant",
    "TenantDirectory",
    "TenantFileError",
    "Tenants",
    "hash_key",
    "presented_keys",
]

logger = logging.getLogger(__name__)

#: A tenant's name: what metrics label, access-log and store keys carry (so: short and plain).
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
#: The service tiers, lowest first (``flex`` < ``default`` < ``priority``): a tenant's ``priority`` is the
#: highest it is served in.
SERVICE_TIER_ORDER = ("flex", "default", "priority")
#: The largest tenants file read (a few thousand tenants).
MAX_FILE_BYTES = 4 << 20


class TenantFileError(ValueError):
    """A tenants file that cannot be served from (the message says where and why)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A tenant's limits (None: none). Counted across every frontend and replica of a store
    (docs/tenants.md#limits)."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_concurrent_responses: int | None = None
    max_stored_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Tenant:
    """One tenant: its ``name``, whether it may read and reset the server's ``/stats`` (``admin``), its
    ``limits``, its ``weight`` in the fair share of the engine, the highest service tier it is served in
    (``priority``), and the ``cache_salt`` its prompts' KV-cache blocks are salted with (None: its name's,
    docs/tenants.md#isolation)."""

    name: str
    admin: bool = False
    limits: Limits = field(default_factory=Limits)
    weight: float = 1.0
    priority: str = "default"
    cache_salt: str | None = None
    #: The prefix of everything it stores ("" for the open and the one-key tenant: what was stored before
    #: tenants existed stays theirs).
    scope: str = ""

    @property
    def salt(self) -> str | None:
        """The KV-cache salt of its prompts: the file's ``cache_salt``, else one of its own (None when the
        server has one tenant: nobody to be kept apart from)."""
        if self.cache_salt is not None:
            return self.cache_salt
        return f"tenant:{self.name}" if self.scope else None

    def tier(self, asked: str) -> str:
        """The tier a request asking for ``asked`` is served in: at most the tenant's ``priority``."""
        if asked in SERVICE_TIER_ORDER and SERVICE_TIER_ORDER.index(asked) > SERVICE_TIER_ORDER.index(
            self.priority
        ):
            return self.priority
        return asked


#: The one tenant of a server without keys (local use): everything is open to it.
OPEN = Tenant("default", admin=True, priority="priority")


def hash_key(key: str) -> str:
    """The ``sha256:<hex>`` digest a tenants file holds for ``key``."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def presented_keys(headers: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
    """The keys a request presents: ``Authorization: Bearer KEY`` and Anthropic's ``x-api-key: KEY``."""
    keys = []
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer":
                keys.append(token.strip())
        elif name == b"x-api-key":
            keys.append(value.strip())
    return keys


class Tenants:
    """An immutable table of tenants by their keys' digests; ``open`` when it has no keys at all."""

    __slots__ = ("_by_digest", "tenants", "open", "source")

    def __init__(self, by_digest: Mapping[bytes, Tenant], tenants: Iterable[Tenant], source: str) -> None:
        self._by_digest = dict(by_digest)
        #: Every tenant, by name (those without a key too).
        self.tenants = {tenant.name: tenant for tenant in tenants}
        #: No key is asked for: every request is :data:`OPEN`.
        self.open = not self._by_digest
        #: Where the table came from (for the log): "open", "--api_key" or the file's path.
        self.source = source

    @classmethod
    def of_open(cls) -> Tenants:
        """The table of a server without keys."""
        return cls({}, [OPEN], "open")

    @classmethod
    def of_key(cls, api_key: str) -> Tenants:
        """The table of ``--api_key KEY``: one admin tenant, ``default``, unscoped."""
        tenant = Tenant("default", admin=True, priority="priority")
        return cls({hashlib.sha256(api_key.encode()).digest(): tenant}, [tenant], "--api_key")

    @classmethod
    def of_file(cls, path: str | Path) -> Tenants:
        """The table of a tenants file (JSON, or TOML when it ends ``.toml``); TenantFileError naming what is
        wrong."""
        path = Path(path)
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise TenantFileError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
            text = path.read_bytes()
        except OSError as error:
            raise TenantFileError(f"{path}: {error.strerror or error}") from None
        try:
            data = tomllib.loads(text.decode()) if path.suffix == ".toml" else json.loads(text)
        except (ValueError, UnicodeDecodeError) as error:
            raise TenantFileError(
                f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {error}"
            ) from None
        return cls.of_data(data, str(path))

    @classmethod
    def of_data(cls, data: Any, source: str = "tenants") -> Tenants:
        """The table of a tenants file's parsed ``data`` (``{"tenants": {name: {...}}}``)."""
        entries = data.get("tenants") if isinstance(data, dict) else None
        if not isinstance(entries, dict) or not entries:
            raise TenantFileError(f'{source}: expected {{"tenants": {{"<name>": {{"keys": [...]}}, ...}}}}')
        by_digest: dict[bytes, Tenant] = {}
        tenants = []
        for name, entry in entries.items():
            tenant, digests = _tenant(name, entry, source)
            for digest in digests:
                other = by_digest.setdefault(digest, tenant)
                if other is not tenant:
                    raise TenantFileError(f"{source}: one key belongs to both {other.name!r} and {name!r}")
            tenants.append(tenant)
        return cls(by_digest, tenants, source)

    def identify(self, headers: Iterable[tuple[bytes, bytes]]) -> Tenant | None:
        """The tenant whose key the request presents (:data:`OPEN` on an open server); None: no valid key."""
        if self.open:
            return next(iter(self.tenants.values()))
        for key in presented_keys(headers):
            digest = hashlib.sha256(key).digest()
            # Looked up by the key's digest: a client chooses the key, not its digest, so how long the lookup
            # takes says nothing of the digests held (the constant-time compare of a hash table of keys).
            tenant = self._by_digest.get(digest)
            if tenant is not None:
                return tenant
        return None


_FIELDS = {
    "keys",
    "admin",
    "requests_per_minute",
    "tokens_per_minute",
    "max_concurrent_responses",
    "max_stored_bytes",
    "priority",
    "weight",
    "cache_salt",
}


def _tenant(name: Any, entry: Any, source: str) -> tuple[Tenant, list[bytes]]:
    """One tenant of a file and its keys' digests; TenantFileError for anything not as documented."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TenantFileError(f"{source}: tenant name {name!r}: 1 to 64 letters, digits, '_' or '-'")
    where = f"{source}: tenant {name!r}"
    if not isinstance(entry, dict):
        raise TenantFileError(f"{where}: expected an object")
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise TenantFileError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
    keys = entry.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise TenantFileError(f"{where}: 'keys' must be a list of \"sha256:<hex>\" strings")
    digests = []
    for key in keys:
        match = _DIGEST.fullmatch(key)
        if match is None:
            # Never echo what may be a plain key: say where it is and how to make the digest.
            raise TenantFileError(
                f'{where}: keys[{keys.index(key)}] is not a "sha256:<64 lower-case hex>" digest; the file '
                "holds no plain keys (make the digest with: trtllm-responses hash-key < keyfile)"
            )
        digests.append(bytes.fromhex(match.group(1)))
    limits = {}
    for limit in ("requests_per_minute", "tokens_per_minute", "max_concurrent_responses", "max_stored_bytes"):
        value = entry.get(limit)
        if value is not None and (type(value) is not int or value < 1):
            raise TenantFileError(f"{where}: {limit!r} must be a positive integer")
        limits[limit] = value
    admin = entry.get("admin", False)
    if type(admin) is not bool:
        raise TenantFileError(f"{where}: 'admin' must be true or false")
    priority = entry.get("priority", "default")
    if priority not in SERVICE_TIER_ORDER:
        raise TenantFileError(f"{where}: 'priority' must be one of {', '.join(SERVICE_TIER_ORDER)}")
    weight = entry.get("weight", 1)
    if type(weight) not in (int, float) or not 0 < weight <= 1000:
        raise TenantFileError(f"{where}: 'weight' must be a number in (0, 1000]")
    salt = entry.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or not 0 < len(salt) <= 256):
        raise TenantFileError(f"{where}: 'cache_salt' must be a string of 1 to 256 characters")
    tenant = Tenant(
        name,
        admin=admin,
        limits=Limits(**limits),
        weight=float(weight),
        priority=priority,
        cache_salt=salt,
        scope=f"{name}/",
    )
    return tenant, digests


class TenantDirectory:
    """The tenants a server answers with now: a table, swapped whole by :meth:`reload` (SIGHUP)."""

    __slots__ = ("tenants", "path")

    def __init__(self, tenants: Tenants, path: str | None = None) -> None:
        self.tenants = tenants
        #: The tenants file (None: the table is not from a file and never reloads).
        self.path = path

    @classmethod
    def configured(cls, api_key: str | None = None, tenants_file: str | None = None) -> TenantDirectory:
        """The directory of ``--tenants FILE`` or ``--api_key KEY`` (not both), else an open one."""
        if tenants_file is not None:
            if api_key is not None:
                raise TenantFileError(
                    "--tenants and --api_key are exclusive: put the key in the tenants file"
                )
            return cls(Tenants.of_file(tenants_file), tenants_file)
        if api_key is not None:
            return cls(Tenants.of_key(api_key))
        return cls(Tenants.of_open())

    @property
    def open(self) -> bool:
        """No key is asked for."""
        return self.tenants.open

    def identify(self, headers: Iterable[tuple[bytes, bytes]]) -> Tenant | None:
        """The tenant of a request's headers now; None: no valid key (a 401)."""
        return self.tenants.identify(headers)

    def reload(self) -> bool:
        """Read the tenants file again; True if the new table is in use (False: none, or it did not read,
        and the old one serves on)."""
        if self.path is None:
            return False
        try:
            tenants = Tenants.of_file(self.path)
        except TenantFileError as error:
            logger.error("tenants file not reloaded, the previous one serves on: %s", error)
            return False
        self.tenants = tenants
        logger.info("tenants reloaded from %s: %d tenant(s)", self.path, len(tenants.tenants))
        return True
