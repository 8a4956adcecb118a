"""A tenant's rate limits over counters (``tenants/limits.py``), on the memory backend's counters with a
clock the test moves: requests and tokens per window, concurrent responses, what a refusal counts, and the
headers' formats (docs/tenants.md#limits)."""

from __future__ import annotations

import re

import pytest

from trtllm_responses.store.counters import MemoryCounters
from trtllm_responses.tenants import Limits, Quota, RateLimiter, RateLimitError, Tenant, Window
from trtllm_responses.tenants.limits import duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(**limits: int) -> tuple[RateLimiter, Tenant, Clock]:
    clock = Clock()
    return (
        RateLimiter(MemoryCounters(clock), window=60.0),
        Tenant("a", limits=Limits(**limits), scope="a/"),
        clock,
    )


async def test_requests_per_window_then_the_window_reopens() -> None:
    rate, tenant, clock = limiter(requests_per_minute=2)
    first = await rate.admit(tenant, 10, "r1")
    assert first.requests == Window(2, 1, 60.0)
    await rate.admit(tenant, 10, "r2")
    clock.now += 20
    with pytest.raises(RateLimitError) as refused:
        await rate.admit(tenant, 10, "r3")
    error = refused.value
    assert (error.status_code, error.error_type, error.code) == (429, "requests", "rate_limit_exceeded")
    assert error.headers == {"retry-after": "40", "retry-after-ms": "40000"}
    assert error.quota.requests == Window(2, 0, 40.0)
    clock.now += 40
    assert (await rate.admit(tenant, 10, "r4")).requests == Window(2, 1, 60.0)


async def test_a_refused_turn_is_not_counted() -> None:
    rate, tenant, clock = limiter(requests_per_minute=1)
    await rate.admit(tenant, 1, "r1")
    for _ in range(5):
        with pytest.raises(RateLimitError):
            await rate.admit(tenant, 1, "again")
    assert (await rate.quota(tenant)).requests == Window(1, 0, 60.0)


async def test_tokens_refuse_once_the_window_is_spent() -> None:
    rate, tenant, clock = limiter(tokens_per_minute=100, requests_per_minute=10)
    await rate.admit(tenant, 60, "r1")  # 60 of 100
    await rate.spent(tenant, 30)  # its output: 90
    quota = await rate.admit(tenant, 50, "r2")  # admitted with tokens left; overshoots to 140
    assert quota.tokens == Window(100, -40, 60.0)
    with pytest.raises(RateLimitError) as refused:
        await rate.admit(tenant, 1, "r3")
    assert refused.value.error_type == "tokens"
    assert refused.value.quota.tokens == Window(100, 0, 60.0)
    # the refused turn's request was given back too
    assert (await rate.quota(tenant)).requests == Window(10, 8, 60.0)


async def test_concurrent_responses_are_leases() -> None:
    rate, tenant, clock = limiter(max_concurrent_responses=2)
    await rate.admit(tenant, 1, "r1")
    await rate.admit(tenant, 1, "r2")
    with pytest.raises(RateLimitError) as refused:
        await rate.admit(tenant, 1, "r3")
    assert refused.value.error_type == "requests"
    await rate.release(tenant, "r1")
    await rate.admit(tenant, 1, "r3")
    # a holder that never releases (its process died) holds its slot one lease at most; renewing keeps it
    clock.now += rate.lease / 2
    await rate.renew(tenant, "r3")
    clock.now += rate.lease * 0.75
    await rate.admit(tenant, 1, "r4")  # r2 expired, r3 renewed
    with pytest.raises(RateLimitError):
        await rate.admit(tenant, 1, "r5")


def test_openai_durations() -> None:
    assert [duration(s) for s in (0.25, 1, 1.2, 59.5, 60, 360, 3600, 3725)] == [
        "250ms",
        "1s",
        "2s",
        "1m0s",
        "1m0s",
        "6m0s",
        "1h0m0s",
        "1h2m5s",
    ]


def test_headers_in_both_dialects() -> None:
    quota = Quota(Window(60, 59, 1.5), Window(1000, 900, 30))
    openai = dict(quota.headers(anthropic=False))
    assert openai == {
        b"x-ratelimit-limit-requests": b"60",
        b"x-ratelimit-remaining-requests": b"59",
        b"x-ratelimit-reset-requests": b"2s",
        b"x-ratelimit-limit-tokens": b"1000",
        b"x-ratelimit-remaining-tokens": b"900",
        b"x-ratelimit-reset-tokens": b"30s",
    }
    anthropic = dict(quota.headers(anthropic=True))
    assert anthropic[b"anthropic-ratelimit-requests-limit"] == b"60"
    assert anthropic[b"anthropic-ratelimit-tokens-remaining"] == b"900"
    stamp = rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    assert re.fullmatch(stamp, anthropic[b"anthropic-ratelimit-requests-reset"])
    assert re.fullmatch(stamp, anthropic[b"anthropic-ratelimit-tokens-reset"])
    # an overshoot reads as nothing left
    assert (
        dict(Quota(tokens=Window(10, -5, 1)).headers(anthropic=False))[b"x-ratelimit-remaining-tokens"]
        == b"0"
    )
