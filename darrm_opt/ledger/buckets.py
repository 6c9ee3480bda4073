"""Token buckets by tenant, one set per server process: the request rates of the service
(:class:`darrm_opt.api.admission.TenantRates`) and each tenant's share of the time for near-budget compositions
(:class:`darrm_opt.ledger.scheduler.CompositionScheduler`).

Tenant t's bucket holds ``level`` ≤ ``burst``, refilled at ``rate`` per second: at time s it holds
``min(burst, level + rate·(s − s_last))``. :meth:`TenantBuckets.take` takes an amount only if the bucket holds it
(a request's token); :meth:`TenantBuckets.spend` takes it whatever the bucket holds, so the level may fall below
zero (a composition's seconds, charged once it has run); :meth:`TenantBuckets.wait` is the time until the
bucket holds an amount again, ``(amount − level)/rate``. A tenant never seen, or forgotten (beyond
``max_tenants``, the least recently seen first), has a full bucket.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

#: tenants whose buckets a process keeps by default
MAX_TENANTS = 100_000


class TenantBuckets:
    """Token buckets by tenant (module docstring); thread-safe."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic,
                 max_tenants: int = MAX_TENANTS) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError("rate must be a finite number > 0")
        if not (math.isfinite(burst) and burst >= 0):
            raise ValueError("burst must be a finite number >= 0")
        self.rate, self.burst, self.max_tenants = float(rate), float(burst), max_tenants
        self._clock = clock
        self._levels: OrderedDict[str | None, tuple[float, float]] = OrderedDict()  # tenant -> (level, at)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Tenants whose buckets are not known to be full (those never charged are not kept)."""
        return len(self._levels)

    def _refilled(self, tenant: str | None, now: float) -> float:
        """``tenant``'s level now, kept as its most recently seen (the lock held)."""
        level, at = self._levels.get(tenant, (self.burst, now))
        level = min(self.burst, level + self.rate * max(now - at, 0.0))
        self._levels[tenant] = (level, now)
        self._levels.move_to_end(tenant)
        while len(self._levels) > self.max_tenants:
            self._levels.popitem(last=False)
        return level

    def wait(self, tenant: str | None, amount: float = 0.0) -> float:
        """Seconds until ``tenant``'s bucket holds ``amount`` (0.0: it does now). A tenant without a bucket is
        not given one."""
        now = self._clock()
        with self._lock:
            level = self._refilled(tenant, now) if tenant in self._levels else self.burst
        return 0.0 if level >= amount else (amount - level) / self.rate

    def take(self, tenant: str | None, amount: float = 1.0) -> float:
        """Take ``amount`` if the bucket holds it and answer 0.0; else take nothing and answer the seconds until
        it will."""
        now = self._clock()
        with self._lock:
            level = self._refilled(tenant, now)
            if level >= amount:
                self._levels[tenant] = (level - amount, now)
                return 0.0
        return (amount - level) / self.rate

    def spend(self, tenant: str | None, amount: float) -> None:
        """Take ``amount`` whatever the bucket holds (its level may fall below zero)."""
        now = self._clock()
        with self._lock:
            self._levels[tenant] = (self._refilled(tenant, now) - amount, now)
