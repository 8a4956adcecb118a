"""The fetch guard allows only globally reachable addresses (Python's ``is_global`` and the IANA registries).

Before: the guard was a hand list of Python's flags, which let through 100.64.0.0/10 (shared
address space; Alibaba Cloud's metadata service is 100.100.100.200) and 192.0.0.0/24 (Oracle
Cloud's is 192.0.0.192), and IPv6 forms carrying a private IPv4 address (NAT64).
"""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from trtllm_responses.tools.addresses import IANA_IPV4_NOT_GLOBAL, IANA_IPV6_NOT_GLOBAL, globally_reachable
from trtllm_responses.tools.fetch import FetchRefused, PrivateAllowList, check_url

REFUSED = [
    "100.64.0.1",
    "100.100.100.200",  # Alibaba Cloud metadata
    "100.127.255.254",
    "192.0.0.192",  # Oracle Cloud metadata
    "192.0.0.9",  # inside 192.0.0.0/24: refused with the whole block
    "169.254.169.254",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "127.0.0.1",
    "0.0.0.0",
    "198.18.0.1",
    "192.0.2.1",
    "192.88.99.1",
    "240.0.0.1",
    "255.255.255.255",
    "224.0.0.1",
    "233.252.0.1",  # multicast Python calls global
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "2001:db8::1",
    "::ffff:10.0.0.1",
    "::ffff:100.100.100.200",
    "64:ff9b::a9fe:a9fe",  # 169.254.169.254 through NAT64
    "64:ff9b::6464:64c8",  # 100.100.100.200 through NAT64
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2002:c000:00c0::1",  # 6to4 of 192.0.0.192
    "2001::1",  # Teredo
    "ff02::1",
    "::8.8.8.8",  # IPv4-compatible (deprecated): Python 3.11 calls it global
    "::127.0.0.1",
    "::a9fe:a9fe",  # ::169.254.169.254
    "::ffff:0:127.0.0.1",  # IPv4-translated (SIIT)
    "::ffff:0:8.8.8.8",
    "fec0::1",  # site-local (deprecated)
    "feff:ffff::1",
    "4000::1",  # outside 2000::/3: not allocated
]
ALLOWED = [
    "8.8.8.8",
    "1.1.1.1",
    "100.128.0.1",
    "100.63.255.255",
    "192.0.1.1",
    "2606:4700::1111",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
]


@pytest.mark.parametrize("text", REFUSED)
def test_not_globally_reachable(text: str) -> None:
    assert not globally_reachable(ipaddress.ip_address(text))


@pytest.mark.parametrize("text", ALLOWED)
def test_globally_reachable(text: str) -> None:
    assert globally_reachable(ipaddress.ip_address(text))


def test_every_registry_block_is_refused_at_both_ends() -> None:
    for block in (*IANA_IPV4_NOT_GLOBAL, *IANA_IPV6_NOT_GLOBAL):
        assert not globally_reachable(block[0]) and not globally_reachable(block[-1]), block


@pytest.mark.parametrize("host", ["100.100.100.200", "192.0.0.192", "[64:ff9b::a9fe:a9fe]"])
def test_check_url_refuses_cloud_metadata_addresses(host: str) -> None:
    with pytest.raises(FetchRefused, match="not globally reachable"):
        asyncio.run(check_url(f"http://{host}/latest/meta-data", PrivateAllowList()))


def test_the_operator_may_allow_a_network() -> None:
    allow = PrivateAllowList(networks=(ipaddress.ip_network("100.64.0.0/10"),))
    asyncio.run(check_url("http://100.100.100.200/x", allow))
