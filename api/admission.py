"""Per-tenant request rates: a token bucket per tenant in each server process (``DARRM_TENANT_RATE``).

A tenant's key may make ``rate`` requests per second to ``/v1`` paths in each server process, in bursts of
up to ``burst``; a request beyond that is answered 429 with ``Retry-After`` (the seconds until the bucket
holds a token again) by :class:`darrm_opt.api.auth.BearerKeyMiddleware`, before its body is read, so a
tenant flooding the service costs it a header's parse per request, not a request's work. Operators' keys
(admin scope) are not limited. With ``W`` server processes a tenant's rate over the service is at most
``W · rate`` (each process keeps its own buckets: no shared state on the request path).

Bucket b holds ``tokens`` ≤ ``burst``, refilled at ``rate`` per second: a request at time t takes one token
if ``min(burst, tokens + rate·(t − t_last)) ≥ 1``; else it waits ``(1 − tokens)/rate`` seconds.
"""

from __future__ import annotations

import time

from darrm_opt.ledger.buckets import TenantBuckets


class TenantRates(TenantBuckets):
    """Token buckets by tenant (module docstring) of ``rate`` requests per second and ``burst`` requests
    (by default one second's, at least one); ``take(tenant)`` is 0.0 when the tenant may make a request now
    (its token is taken), else the seconds until it may. Thread-safe."""

    def __init__(self, rate: float, burst: float | None = None, clock=time.monotonic) -> None:  # noqa: ANN001
        super().__init__(rate, max(1.0, float(burst if burst is not None else rate)), clock)
