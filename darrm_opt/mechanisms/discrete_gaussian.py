"""Exact discrete Gaussian samples N_ℤ(0, σ²) from CSPRNG bytes, vectorised (Canonne, Kamath, Steinke 2020).

The discrete Gaussian has Pr[Z = z] ∝ exp(−z²/(2σ²)) on ℤ. It is sampled exactly, with no floating-point
number between the random bytes and the output, by the three algorithms of Canonne, Kamath and Steinke,
"The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), run on arrays:

- Alg. 1, Bernoulli(exp(−γ)) for a rational γ ∈ [0, 1]: k ← 1; while Bernoulli(γ/k): k ← k + 1; output
  1{k odd}. For γ > 1: ⌊γ⌋ independent Bernoulli(exp(−1)) and one Bernoulli(exp(−(γ − ⌊γ⌋))), all 1.
- Alg. 2, the discrete Laplace Pr[Y = y] ∝ exp(−|y|/t) (t an integer): U ~ Uniform{0..t−1}; reject unless
  Bernoulli(exp(−U/t)); V ← the number of successes of Bernoulli(exp(−1)) before the first failure;
  X ← U + tV; B ~ Bernoulli(½); reject if B = 1 and X = 0; Y ← (1 − 2B)X.
- Alg. 3, the discrete Gaussian: t ← ⌊σ⌋ + 1; Y ← Alg. 2; accept with probability
  exp(−(|Y| − σ²/t)²/(2σ²)) (Alg. 1), else start again.

Every Bernoulli(p) with p rational is one uniform 64-bit integer U against T = ⌊p·2^64⌋ (U < T: 1; U > T: 0)
and, in the 2^-64-probability event U = T, the exact recursion on the remainder p·2^64 − T with fresh bytes
(:func:`darrm_opt.mechanisms.samplers._exact_bernoulli`); the thresholds are computed from exact rationals
(σ² is the float σ squared exactly) once per (γ, k) and cached. Uniform{0..t−1} is rejection sampling of
64-bit integers, and Bernoulli(½) the lowest bit of one byte. Byte order: every round draws 8 bytes (1 for
Bernoulli(½)) per active element, in element order.

These samplers are rejection samplers: the work of a draw grows with the value drawn (a larger |Y| takes
more rounds of Bernoulli(exp(−1)), a rejected Y another round), so the time of a draw tells about its value
(issue 33; ``benchmarks/timing.py`` measures it). :class:`NoisePool` takes the draws off the request: the
samples are drawn ahead in blocks and handed out in order, so what a request takes was drawn before it.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .samplers import _TWO64, RandomBytes, _exact_bernoulli, system_random


def _uint64(random_bytes: RandomBytes, n: int) -> np.ndarray:
    return np.frombuffer(random_bytes(8 * n), dtype=np.uint64, count=n)


class _ExpNeg:
    """Bernoulli(exp(−γ_key)) for rationals γ_key = ``gamma(key)`` ∈ [0, 1], keys 0, 1, 2, … (Alg. 1):
    thresholds ⌊γ_key/k · 2^64⌋ for k = 1, 2, … in a table grown on demand."""

    def __init__(self, gamma: Callable[[int], Fraction]) -> None:
        self.gamma = gamma
        self._fracs: list[Fraction] = []
        self._thr = np.zeros((0, 0), dtype=np.uint64)
        self._always = np.zeros((0, 0), dtype=bool)

    def _grow(self, keys: int, ks: int) -> None:
        n0, k0 = self._thr.shape
        keys, ks = max(keys, n0), max(ks, k0)
        if (keys, ks) == (n0, k0):
            return
        while len(self._fracs) < keys:
            g = self.gamma(len(self._fracs))
            if not 0 <= g <= 1:
                raise ValueError("γ must lie in [0, 1]")
            self._fracs.append(g)
        thr = np.zeros((keys, ks), dtype=np.uint64)
        always = np.zeros((keys, ks), dtype=bool)
        thr[:n0, :k0], always[:n0, :k0] = self._thr, self._always
        for key in range(keys):
            g = self._fracs[key]
            for k in range(1 if key >= n0 else k0 + 1, ks + 1):
                p = g / k
                if p == 1:
                    always[key, k - 1] = True
                else:
                    thr[key, k - 1] = (p.numerator << 64) // p.denominator
        self._thr, self._always = thr, always

    def _remainder(self, key: int, k: int) -> Fraction:
        p = self._fracs[key] / k
        return p * _TWO64 - (p.numerator << 64) // p.denominator

    def __call__(self, keys: np.ndarray, random_bytes: RandomBytes) -> np.ndarray:
        """One Bernoulli(exp(−γ_key)) per element of ``keys`` (bool array)."""
        n = keys.shape[0]
        k = np.ones(n, dtype=np.int64)
        todo = np.arange(n)
        if n:
            self._grow(int(keys.max()) + 1, 4)
        while todo.size:
            kk = k[todo]
            self._grow(0, int(kk.max()))
            key = keys[todo]
            u = _uint64(random_bytes, todo.size)
            t = self._thr[key, kk - 1]
            a = (u < t) | self._always[key, kk - 1]
            for i in np.flatnonzero((u == t) & ~self._always[key, kk - 1]):  # probability 2^-64 each
                a[i] = _exact_bernoulli(self._remainder(int(key[i]), int(kk[i])), random_bytes)
            k[todo[a]] += 1
            todo = todo[a]
        return (k % 2) == 1


class DiscreteGaussian:
    """Exact N_ℤ(0, σ²) samples (module docstring) for a float σ > 0 (σ² taken exactly)."""

    def __init__(self, sigma: float) -> None:
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError("σ must be finite and > 0")
        self.sigma = float(sigma)
        self.sigma2 = Fraction(self.sigma) ** 2
        self.t = math.isqrt(math.floor(self.sigma2)) + 1  # ⌊σ⌋ + 1
        t = self.t
        self._limit = _TWO64 - _TWO64 % t
        self._one = _ExpNeg(lambda key: Fraction(1))
        self._u_over_t = _ExpNeg(lambda u: Fraction(u, t))
        # acceptance of |Y| = y: γ(y) = (y − σ²/t)²/(2σ²), split into ⌊γ⌋ and the rest
        self._whole: list[int] = []
        self._frac = _ExpNeg(self._accept_fraction)

    def _accept_gamma(self, y: int) -> Fraction:
        return (y - self.sigma2 / self.t) ** 2 / (2 * self.sigma2)

    def _accept_fraction(self, y: int) -> Fraction:
        g = self._accept_gamma(y)
        return g - math.floor(g)

    def _wholes(self, y: np.ndarray) -> np.ndarray:
        top = int(y.max()) + 1 if y.size else 0
        while len(self._whole) < top:
            self._whole.append(math.floor(self._accept_gamma(len(self._whole))))
        return np.asarray(self._whole, dtype=np.int64)[y]

    def _uniform(self, n: int, random_bytes: RandomBytes) -> np.ndarray:
        out = np.zeros(n, dtype=np.int64)
        todo = np.arange(n)
        lim = np.uint64(self._limit % _TWO64)
        while todo.size:
            u = _uint64(random_bytes, todo.size)
            ok = u < lim if self._limit < _TWO64 else np.ones(todo.size, dtype=bool)
            out[todo[ok]] = (u[ok] % np.uint64(self.t)).astype(np.int64)
            todo = todo[~ok]
        return out

    def _bits(self, n: int, random_bytes: RandomBytes) -> np.ndarray:
        return (np.frombuffer(random_bytes(n), dtype=np.uint8, count=n) & 1).astype(np.int64)

    def laplace(self, n: int, random_bytes: RandomBytes) -> np.ndarray:
        """n discrete Laplace samples, Pr[y] ∝ exp(−|y|/t) (Alg. 2)."""
        out = np.zeros(n, dtype=np.int64)
        pending = np.arange(n)
        while pending.size:
            u = self._uniform(pending.size, random_bytes)
            ok = self._u_over_t(u, random_bytes)
            rows = np.flatnonzero(ok)
            v = np.zeros(rows.size, dtype=np.int64)
            run = np.arange(rows.size)
            while run.size:  # V: successes of Bernoulli(exp(−1)) before the first failure
                a = self._one(np.zeros(run.size, dtype=np.int64), random_bytes)
                run = run[a]
                v[run] += 1
            x = u[rows] + self.t * v
            b = self._bits(rows.size, random_bytes)
            keep = ~((b == 1) & (x == 0))
            ok[rows[~keep]] = False
            out[pending[rows[keep]]] = ((1 - 2 * b) * x)[keep]
            pending = pending[~ok]
        return out

    def __call__(self, n: int, random_bytes: RandomBytes) -> np.ndarray:
        """n independent N_ℤ(0, σ²) samples (int64)."""
        return self.sample(n, random_bytes)

    def sample(self, n: int, random_bytes: RandomBytes) -> np.ndarray:
        out = np.zeros(n, dtype=np.int64)
        todo = np.arange(n)
        while todo.size:
            y = self.laplace(todo.size, random_bytes)
            ay = np.abs(y)
            whole = self._wholes(ay)
            ok = np.ones(todo.size, dtype=bool)
            for j in range(int(whole.max()) if whole.size else 0):  # ⌊γ⌋ Bernoulli(exp(−1)), rarely > 0
                idx = np.flatnonzero(ok & (whole > j))
                ok[idx] = self._one(np.zeros(idx.size, dtype=np.int64), random_bytes)
            idx = np.flatnonzero(ok)
            ok[idx] = self._frac(ay[idx], random_bytes)
            out[todo[ok]] = y[ok]
            todo = todo[~ok]
        return out



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
    handed out twice (a lock; a forked child drops its parent's samples, as :class:`SystemRandom` does).

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
    :data:`~darrm_opt.mechanisms.samplers.system_random` (every sampler of that σ shares it), else a pool of
    its own (a seeded source's samples stay a function of its bytes)."""
    if random_bytes is not system_random:
        return NoisePool(DiscreteGaussian(sigma))
    key = float(sigma)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None:
            pool = _SHARED[key] = NoisePool(DiscreteGaussian(key))
        return pool
