"""What each tenant used, in ``/metrics`` and ``/stats`` (docs/tenants.md#usage).

Labelled by ``tenant``: only tenants a key identified are counted (their names come from the tenants
file, so the labels are as few as its tenants). Per turn, not per token:

- ``trtllm_tenant_requests_total{tenant}``: turns admitted;
- ``trtllm_tenant_tokens_total{tenant,kind}``: ``input``, ``cached`` (of the input, reused from the KV
  cache) and ``output`` tokens of the turns that ended;
- ``trtllm_tenant_refusals_total{tenant,type}``: 429s of its limits and of a full engine (``requests``,
  ``tokens``);
- ``trtllm_tenant_queue_seconds{tenant}``: how long turns that waited for a slot of the engine waited;
- ``trtllm_tenant_stored_bytes{tenant}``: the bytes of its stored responses, read from the (shared) store
  when scraped (a group shows the last reading).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["TenantMetrics"]

_QUEUE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class TenantMetrics:
    """Per-tenant counters of one server process (in ``registry``), and the same counts for ``/stats``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "trtllm_tenant_requests", "Turns admitted, by tenant", ["tenant"], registry=registry
        )
        self.tokens = Counter(
            "trtllm_tenant_tokens",
            "Tokens of ended turns, by tenant and kind",
            ["tenant", "kind"],
            registry=registry,
        )
        self.refusals = Counter(
            "trtllm_tenant_refusals", "429s by tenant and type", ["tenant", "type"], registry=registry
        )
        self.queue = Histogram(
            "trtllm_tenant_queue_seconds",
            "Time turns waited for a slot of the engine",
            ["tenant"],
            buckets=_QUEUE_BUCKETS,
            registry=registry,
        )
        self.stored_bytes = Gauge(
            "trtllm_tenant_stored_bytes",
            "Bytes of the tenant's stored responses (docs/tenants.md#limits)",
            ["tenant"],
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        self._counts: dict[str, dict[str, float]] = {}
        #: Each tenant's labelled children, found once (``labels()`` costs a lock and a tuple per call).
        self._children: dict[str, tuple[Any, Any, Any, Any, Any]] = {}

    def _of(self, tenant: str) -> tuple[Any, Any, Any, Any, Any]:
        children = self._children.get(tenant)
        if children is None:
            tokens = self.tokens
            children = self._children[tenant] = (
                self.requests.labels(tenant),
                tokens.labels(tenant, "input"),
                tokens.labels(tenant, "cached"),
                tokens.labels(tenant, "output"),
                self.queue.labels(tenant),
            )
        return children

    def _count(self, tenant: str, key: str, amount: float) -> None:
        counts = self._counts.setdefault(tenant, {})
        counts[key] = counts.get(key, 0) + amount

    def request(self, tenant: str) -> None:
        """A turn of ``tenant`` was admitted."""
        self._of(tenant)[0].inc()
        self._count(tenant, "requests", 1)

    def refusal(self, tenant: str, kind: str) -> None:
        """A turn of ``tenant`` was refused (429 of ``kind``: ``requests`` or ``tokens``)."""
        self.refusals.labels(tenant, kind).inc()
        self._count(tenant, f"refused_{kind}", 1)

    def used(self, tenant: str, input_tokens: int, cached: int, output: int) -> None:
        """A turn of ``tenant`` ended having used these tokens."""
        _, inputs, cached_tokens, outputs, _ = self._of(tenant)
        for kind, child, amount in (
            ("input", inputs, input_tokens),
            ("cached", cached_tokens, cached),
            ("output", outputs, output),
        ):
            child.inc(amount)
            self._count(tenant, f"{kind}_tokens", amount)

    def queued(self, tenant: str, seconds: float) -> None:
        """A turn of ``tenant`` waited ``seconds`` for a slot."""
        self._of(tenant)[4].observe(seconds)
        self._count(tenant, "queued", 1)
        self._count(tenant, "queue_seconds", seconds)

    def view(self) -> dict[str, dict[str, Any]]:
        """``/stats``'s ``tenants``: each tenant's counts in this process."""
        return {
            name: {
                key: round(value, 3) if isinstance(value, float) else value for key, value in counts.items()
            }
            for name, counts in sorted(self._counts.items())
        }
