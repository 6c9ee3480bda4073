"""A pool of discrete Gaussian samples drawn ahead, so that a request's time does not depend on its noise.

The discrete Gaussian is drawn by rejection samplers (:mod:`darrm_opt.sampling.discrete_gaussian`): the
work of a draw grows with the value drawn, so the time of a draw tells about its value (issue 33).
:class:`NoisePool` takes the draws off the request: the samples are drawn ahead in blocks and handed out in
order, so what a request takes was drawn before it.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from .discrete_gaussian import DiscreteGaussian
from .source import RandomBytes, system_random

#: samples a pool draws at a time (a refill of N_ℤ(0, 3²) samples costs about 30 ms on one core)
POOL_BLOCK = 4096


class NoisePool:
    """N_ℤ(0, σ²) samples of ``noise`` drawn ahead, in blocks of ``block``, and handed out in order: a drop-in
    for :class:`DiscreteGaussian` (``sample(n, random_bytes)``, ``sigma``) whose time does not depend on the
    values it hands out.

    Every call leaves at least ``block`` samples in reserve: a call of n ≤ ``block`` samples finds them
    already drawn (by an earlier call), takes them (a copy of n entries) and, when fewer than n + ``block``
    were left, first draws one more block, which goes behind the reserve (the values this call takes are
    never in it). Only the first call of a pool, and a call of more than the reserve, take samples drawn in
    the same call. The samples are i.i.d. draws of ``noise`` and which of them a call takes does not depend
    on their values, so the n samples a call returns have exactly the law of ``noise.sample(n)``; none is
    handed out twice (a lock; a forked child drops its parent's samples, as
    :class:`~darrm_opt.sampling.source.SystemRandom` does).

    A pool draws from one source of random bytes: called with another (a test's seeded stream) it drops
    what it holds and starts again from that one, so its samples remain a function of the given bytes."""

    def __init__(self, noise: DiscreteGaussian, block: int = POOL_BLOCK) -> None:
        if block < 1:
            raise ValueError("block must be >= 1")
        self.noise = noise
        self.sigma = noise.sigma
        self.block = int(block)
        self._lock = threading.Lock()
        self._source: RandomBytes | None = None
        self._reset()
        _POOLS.add(self)

    def _reset(self) -> None:
        self._buf = np.zeros(0, dtype=np.int64)
        self._pos = 0

    def available(self) -> int:
        """Samples drawn and not yet handed out."""
        return self._buf.size - self._pos

    def __call__(self, n: int, random_bytes: RandomBytes) -> np.ndarray:
        return self.sample(n, random_bytes)

    def sample(self, n: int, random_bytes: RandomBytes) -> np.ndarray:
        """n independent N_ℤ(0, σ²) samples (int64), from the pool."""
        with self._lock:
            if self._source is None or random_bytes != self._source:
                self._reset()
                self._source = random_bytes
            short = n + self.block - self.available()
            if short > 0:  # a block behind the reserve (and, first or oversized, what this call lacks)
                fresh = self.noise.sample(max(short, self.block), random_bytes)
                self._buf = np.concatenate([self._buf[self._pos :], fresh])
                self._pos = 0
            out = self._buf[self._pos : self._pos + n].copy()
            self._pos += n
            return out


_POOLS: weakref.WeakSet[NoisePool] = weakref.WeakSet()
_SHARED: dict[float, NoisePool] = {}
_SHARED_LOCK = threading.Lock()


def _forget_pools() -> None:
    """In a forked child: drop every pool's samples (the parent hands the same ones out) and its lock."""
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    for pool in list(_POOLS):
        pool._lock = threading.Lock()
        pool._reset()


os.register_at_fork(after_in_child=_forget_pools)


def noise_pool(sigma: float, random_bytes: RandomBytes) -> NoisePool:
    """A pool of N_ℤ(0, σ²) samples for ``random_bytes``: the process's one pool per σ for
    :data:`~darrm_opt.sampling.source.system_random` (every sampler of that σ shares it), else a pool of
    its own (a seeded source's samples stay a function of its bytes)."""
    if random_bytes is not system_random:
        return NoisePool(DiscreteGaussian(sigma))
    key = float(sigma)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None:
            pool = _SHARED[key] = NoisePool(DiscreteGaussian(key))
        return pool
