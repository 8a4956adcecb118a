"""Fetching web pages on a client's behalf, guarded: only globally reachable addresses.

:func:`guarded_get` resolves the URL's host and checks every address it resolves
to before connecting, and again for every redirect hop (followed by hand, at
most :data:`MAX_REDIRECTS`). Only globally reachable addresses are fetched
(``addresses.globally_reachable``: Python's ``is_global`` and the IANA special-purpose
registries, so carrier-grade NAT 100.64.0.0/10 and 192.0.0.0/24, where cloud metadata
services live, are refused too), unless the operator allowed the host or a network
holding the address (``--fetch_allow_private HOST_OR_CIDR,...``).
Bodies are read up to a size cap, under a timeout; only http(s).

The connection resolves the host again after the check; a DNS answer that changes
in between (rebinding) is not caught. Operators who need that closed put the server
behind an egress proxy.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx2

from .addresses import globally_reachable

__all__ = ["FetchRefused", "FetchedPage", "PrivateAllowList", "guarded_get", "parse_allow_private"]

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class FetchRefused(Exception):
    """The URL may not be fetched (scheme, address, size, redirects); the message says why."""


@dataclass(frozen=True, slots=True)
class PrivateAllowList:
    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    def allows(self, host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return host.lower() in self.hosts or any(address in net for net in self.networks)


def parse_allow_private(text: str | Sequence[str]) -> PrivateAllowList:
    """``HOST_OR_CIDR,...`` → an allow-list (ValueError for an entry that is neither)."""
    entries = text.split(",") if isinstance(text, str) else list(text)
    hosts: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        if "/" in entry or ":" in entry or not all(c.isalnum() or c in "-." for c in entry):
            raise ValueError(f"not a host name or CIDR: {entry}")
        hosts.add(entry.lower())
    return PrivateAllowList(frozenset(hosts), tuple(networks))


async def check_url(url: str, allow: PrivateAllowList) -> None:
    """Raise FetchRefused unless ``url`` is http(s) and every address of its host may be reached."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchRefused(f"only http(s) URLs can be opened, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise FetchRefused("URLs with credentials are not opened")
    host = parts.hostname
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchRefused(f"could not resolve {host}: {exc.strerror or exc}") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not globally_reachable(address) and not allow.allows(host, address):
            raise FetchRefused(
                f"{host} resolves to {address}, an address that is not globally reachable (private, loopback, "
                "link-local, shared or special-purpose); this server does not fetch it (the operator allows "
                "such hosts with --fetch_allow_private)"
            )


@dataclass(frozen=True, slots=True)
class FetchedPage:
    url: str  # after redirects
    content_type: str
    text: str


async def guarded_get(
    url: str,
    allow: PrivateAllowList,
    *,
    timeout: float,
    max_bytes: int,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> FetchedPage:
    """GET ``url`` (following redirects by hand, each hop checked); the body decoded, cut at ``max_bytes``."""
    async with httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout), follow_redirects=False, trust_env=False, headers=headers
    ) as client:
        for _ in range(MAX_REDIRECTS + 1):
            await check_url(url, allow)
            async with client.stream("GET", url, params=params) as response:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    url = urljoin(str(response.url), response.headers["location"])
                    params = None
                    continue
                if response.status_code >= 400:
                    raise FetchRefused(f"the server answered HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) >= max_bytes:
                        del body[max_bytes:]
                        break
                content_type = response.headers.get("content-type", "")
                encoding = response.charset_encoding or "utf-8"
                try:
                    text = bytes(body).decode(encoding, errors="replace")
                except LookupError:
                    text = bytes(body).decode("utf-8", errors="replace")
                return FetchedPage(str(response.url), content_type, text)
    raise FetchRefused(f"more than {MAX_REDIRECTS} redirects")
