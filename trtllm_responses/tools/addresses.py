"""Which IP addresses are globally reachable: Python's ``is_global`` and the IANA special-purpose registries.

Python's answer depends on its version: 3.11.7 calls ``192.0.0.192`` (Oracle Cloud's
metadata service) and ``64:ff9b::a9fe:a9fe`` (169.254.169.254 through NAT64) global. The
registries are the authority, so both must agree: an address is global only if Python says so
*and* no block of the IANA IPv4/IPv6 Special-Purpose Address Registries holding it is marked
"Globally Reachable: False" (or N/A). Addresses carrying an IPv4 address (IPv4-mapped, NAT64,
6to4, Teredo) are judged by that address too. Multicast is never fetched. An IPv6 address outside
2000::/3, the only block IANA allocates global unicast from (IANA IPv6 Address Space registry), is
refused unless it carries an IPv4 address judged above (IPv4-mapped, NAT64): Python 3.11 calls the
deprecated IPv4-compatible ``::a.b.c.d``, SIIT's ``::ffff:0:a.b.c.d`` and site-local ``fec0::/10``
global, and each can reach a private IPv4 host through a translating router.

Sources (the "Globally Reachable" column, as of the 2024 updates):
https://www.iana.org/assignments/iana-ipv4-special-registry/ and
https://www.iana.org/assignments/iana-ipv6-special-registry/ (RFC 6890, RFC 8190).
Blocks that are globally reachable are left out, except where a wider non-global block holds
them (192.0.0.9/32 and 192.0.0.10/32 are anycast services inside 192.0.0.0/24: this server has
no reason to fetch them, so the whole /24 is refused).
"""

from __future__ import annotations

import ipaddress

__all__ = ["IPAddress", "globally_reachable"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: IANA IPv4 Special-Purpose Address Registry: blocks not globally reachable.
IANA_IPV4_NOT_GLOBAL = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "0.0.0.0/8",  # "this network" (RFC 791)
        "10.0.0.0/8",  # private-use (RFC 1918)
        "100.64.0.0/10",  # shared address space, carrier-grade NAT (RFC 6598); Alibaba Cloud's metadata
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link local; AWS/GCP/Azure metadata
        "172.16.0.0/12",  # private-use
        "192.0.0.0/24",  # IETF protocol assignments (RFC 6890); Oracle Cloud's metadata (192.0.0.192)
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.88.99.0/24",  # deprecated 6to4 relay anycast (RFC 7526)
        "192.168.0.0/16",  # private-use
        "198.18.0.0/15",  # benchmarking (RFC 2544)
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "240.0.0.0/4",  # reserved
        "255.255.255.255/32",  # limited broadcast
    )
)

#: IANA IPv6 Special-Purpose Address Registry: blocks not globally reachable.
IANA_IPV6_NOT_GLOBAL = tuple(
    ipaddress.IPv6Network(block)
    for block in (
        "::1/128",  # loopback
        "::/128",  # unspecified
        "::/96",  # IPv4-compatible, deprecated (RFC 4291 2.5.5.1): ::a.b.c.d
        "::ffff:0:0/96",  # IPv4-mapped (judged by the IPv4 address too)
        "::ffff:0:0:0/96",  # IPv4-translated, SIIT (RFC 2765): ::ffff:0:a.b.c.d
        "64:ff9b:1::/48",  # local-use IPv4/IPv6 translation (RFC 8215)
        "100::/64",  # discard-only (RFC 6666)
        "100:0:0:1::/64",  # dummy IPv6 prefix (RFC 9780)
        "2001::/23",  # IETF protocol assignments (the globally reachable ones inside are not needed here)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # segment routing SIDs (RFC 9602)
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local, deprecated (RFC 3879)
    )
)

#: IANA IPv6 Address Space registry: global unicast is allocated from this block only.
_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052: the IPv4 address is the last 32 bits


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo's server), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # the client's address (the server is in the prefix)
    return None


def globally_reachable(address: IPAddress) -> bool:
    """Whether ``address`` is globally reachable by Python's ``is_global`` and by the IANA registries."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None and not globally_reachable(embedded):
            return False
        blocks: tuple[ipaddress.IPv4Network, ...] | tuple[ipaddress.IPv6Network, ...] = IANA_IPV6_NOT_GLOBAL
        if address.ipv4_mapped is not None or address in _NAT64:
            return True  # judged by the IPv4 address it carries, above
        if address not in _IPV6_GLOBAL_UNICAST:
            return False
    else:
        blocks = IANA_IPV4_NOT_GLOBAL
    if address.is_multicast or not address.is_global:
        return False
    return not any(address in block for block in blocks)
