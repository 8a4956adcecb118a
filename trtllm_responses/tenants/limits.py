"""A tenant's rate limits over shared :class:`~.counters.Counters` (docs/tenants.md#limits).

- **requests per minute**: one a turn admitted (``POST /v1/responses``, ``/v1/chat/completions``,
  ``/v1/messages``, a WebSocket ``response.create``); reads, lists, cancels and deletes are not counted;
- **tokens per minute**: a turn's prompt when it is admitted, its output when it ends; a turn is refused
  while the window's tokens are spent (one admitted with tokens left may overshoot by its own);
- **concurrent responses**: a lease per running response (background ones too), renewed while it runs;
- a refused turn is not counted (a client retrying a 429 does not push its own window further).

A window is fixed: it opens with the first count after the last one closed and lasts ``window`` seconds
(60 by default; ``serve --rate_window_seconds``). The limits of a file's ``*_per_minute`` are per window.
:class:`Quota` is what a tenant has left, written as OpenAI's ``x-ratelimit-*`` headers or Anthropic's
``anthropic-ratelimit-*``; :class:`RateLimitError` is the 429.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..core import TooManyRequestsError
from .counters import Counters
from .directory import Limits, Tenant

__all__ = ["LEASE_SECONDS", "WINDOW_SECONDS", "Quota", "RateLimitError", "RateLimiter", "Window"]

#: A rate window's length: the limits are per minute.
WINDOW_SECONDS = 60.0
#: How long a concurrency lease lives unless renewed (a process that dies holding one leaks it this long).
LEASE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Window:
    """One limit's state: its ``limit``, what is ``remaining`` of it, and ``reset`` seconds until it reopens."""

    limit: int
    remaining: int
    reset: float


@dataclass(frozen=True, slots=True)
class Quota:
    """What a tenant has left of its requests and tokens (None: no such limit)."""

    requests: Window | None = None
    tokens: Window | None = None

    def headers(self, anthropic: bool) -> list[tuple[bytes, bytes]]:
        """The rate-limit headers of an answer: OpenAI's (``x-ratelimit-limit-requests`` …, resets as ``6m0s``)
        or Anthropic's (``anthropic-ratelimit-requests-limit`` …, resets as RFC 3339 times)."""
        headers = []
        for kind, window in (("requests", self.requests), ("tokens", self.tokens)):
            if window is None:
                continue
            if anthropic:
                prefix = f"anthropic-ratelimit-{kind}-"
                reset = datetime.now(timezone.utc) + timedelta(seconds=window.reset)
                names = (prefix + "limit", prefix + "remaining", prefix + "reset")
                stamp = reset.replace(microsecond=0).isoformat().replace("+00:00", "Z")
            else:
                names = (
                    f"x-ratelimit-limit-{kind}",
                    f"x-ratelimit-remaining-{kind}",
                    f"x-ratelimit-reset-{kind}",
                )
                stamp = duration(window.reset)
            values = (str(window.limit), str(max(0, window.remaining)), stamp)
            headers += [(n.encode(), v.encode()) for n, v in zip(names, values, strict=True)]
        return headers


def duration(seconds: float) -> str:
    """A duration as OpenAI's reset headers write it: ``250ms``, ``1s``, ``6m0s``, ``1h0m0s``."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class RateLimitError(TooManyRequestsError):
    """A tenant's limit is crossed: 429 ``rate_limit_exceeded`` of ``type`` ``requests`` or ``tokens``, with
    ``retry-after`` (seconds, rounded up) and ``retry-after-ms``; ``quota`` for the rate-limit headers."""

    default_code = "rate_limit_exceeded"

    def __init__(self, kind: str, message: str, retry_after: float, quota: Quota | None = None) -> None:
        super().__init__(message)
        self.error_type = kind
        self.retry_after = retry_after
        self.quota = quota or Quota()
        self.headers = {
            "retry-after": str(max(1, math.ceil(retry_after))),
            "retry-after-ms": str(max(1, math.ceil(retry_after * 1000))),
        }


def limited(limits: Limits) -> bool:
    """Whether a tenant has any limit counted per request."""
    return (
        limits.requests_per_minute is not None
        or limits.tokens_per_minute is not None
        or limits.max_concurrent_responses is not None
    )


class RateLimiter:
    """A tenant's requests, tokens and concurrent responses, counted in shared ``counters``."""

    def __init__(
        self, counters: Counters, window: float = WINDOW_SECONDS, lease: float = LEASE_SECONDS
    ) -> None:
        self.counters = counters
        self.window = window
        self.lease = lease

    async def admit(self, tenant: Tenant, input_tokens: int, member: str) -> Quota:
        """Count one turn of ``input_tokens`` for ``tenant`` (and lease ``member`` a concurrency slot); what is
        left. RateLimitError, counting nothing, if a limit is crossed."""
        limits, name, window, add = tenant.limits, tenant.name, self.window, self.counters.add
        requests = tokens = None
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        if rpm is not None:
            total, reset = await add(f"rq:{name}", 1, window)
            requests = Window(rpm, rpm - total, reset)
            if total > rpm:
                await add(f"rq:{name}", -1, window)
                message = f"Rate limit reached for {name}: {rpm} requests per {window:g} s."
                spent = Quota(Window(rpm, 0, reset), await self._tokens(tenant))
                raise RateLimitError("requests", message, reset, spent)
        if tpm is not None:
            total, reset = await add(f"tk:{name}", input_tokens, window)
            tokens = Window(tpm, tpm - total, reset)
            if total - input_tokens >= tpm:
                await add(f"tk:{name}", -input_tokens, window)
                requests = await self._undo_request(tenant, requests)
                message = f"Rate limit reached for {name}: {tpm} tokens per {window:g} s."
                raise RateLimitError("tokens", message, reset, Quota(requests, Window(tpm, 0, reset)))
        quota = Quota(requests, tokens)
        most = limits.max_concurrent_responses
        if most is not None:
            taken, _ = await self.counters.acquire(f"run:{name}", member, most, self.lease)
            if not taken:
                await self._undo_request(tenant, requests)
                if tokens is not None:
                    await add(f"tk:{name}", -input_tokens, window)
                message = f"Rate limit reached for {name}: {most} concurrent responses."
                raise RateLimitError("requests", message, 1.0, quota)
        return quota

    async def _undo_request(self, tenant: Tenant, requests: Window | None) -> Window | None:
        if requests is None:
            return None
        total, reset = await self.counters.add(f"rq:{tenant.name}", -1, self.window)
        return Window(requests.limit, requests.limit - total, reset)

    async def _tokens(self, tenant: Tenant) -> Window | None:
        tpm = tenant.limits.tokens_per_minute
        if tpm is None:
            return None
        total, reset = await self.counters.add(f"tk:{tenant.name}", 0, self.window)
        return Window(tpm, tpm - total, reset)

    async def quota(self, tenant: Tenant) -> Quota:
        """What ``tenant`` has left now (counting nothing)."""
        rpm = tenant.limits.requests_per_minute
        requests = None
        if rpm is not None:
            total, reset = await self.counters.add(f"rq:{tenant.name}", 0, self.window)
            requests = Window(rpm, rpm - total, reset)
        return Quota(requests, await self._tokens(tenant))

    async def spent(self, tenant: Tenant, output_tokens: int) -> None:
        """A turn of ``tenant`` generated ``output_tokens``: count them in its window."""
        if tenant.limits.tokens_per_minute is not None and output_tokens:
            await self.counters.add(f"tk:{tenant.name}", output_tokens, self.window)

    async def renew(self, tenant: Tenant, member: str) -> None:
        """Keep ``member``'s concurrency lease alive (called every third of a lease while it runs)."""
        await self.counters.renew(f"run:{tenant.name}", member, self.lease)

    async def release(self, tenant: Tenant, member: str) -> None:
        """``member``'s response ended: its concurrency slot is free."""
        if tenant.limits.max_concurrent_responses is not None:
            await self.counters.release(f"run:{tenant.name}", member)
