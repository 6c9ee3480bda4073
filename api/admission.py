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

import math
import threading
import time
from collections import OrderedDict

#: tenants whose buckets a process keeps (the least recently seen are forgotten, i.e. refilled)
MAX_TENANTS = 100_000


class TenantRates:
    """Token buckets by tenant (module docstring); thread-safe."""

    def __init__(self, rate: float, burst: float | None = None, clock=time.monotonic) -> None:  # noqa: ANN001
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError("rate must be a finite number > 0")
        self.rate = float(rate)
        self.burst = max(1.0, float(burst if burst is not None else rate))
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tenant -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, tenant: str) -> float:
        """0.0 when ``tenant`` may make a request now (a token is taken); else the seconds until it may."""
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(tenant, (self.burst, now))
            tokens = min(self.burst, tokens + self.rate * max(now - at, 0.0))
            if tokens >= 1.0:
                self._buckets[tenant] = (tokens - 1.0, now)
                wait = 0.0
            else:
                self._buckets[tenant] = (tokens, now)
                wait = (1.0 - tokens) / self.rate
            self._buckets.move_to_end(tenant)
            while len(self._buckets) > MAX_TENANTS:
                self._buckets.popitem(last=False)
        return wait
