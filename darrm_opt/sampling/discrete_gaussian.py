"""Exact discrete Gaussian samples N_ℤ(0, σ²) from random bytes, vectorised (Canonne, Kamath, Steinke 2020).

The discrete Gaussian has Pr[Z = z] ∝ exp(−z²/(2σ²)) on ℤ. It is sampled exactly, with no floating-point
number between the random bytes and the output, by the three algorithms of Canonne, Kamath and Steinke,
"The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), run on arrays:

- Alg. 1, Bernoulli(exp(−γ)) for a rational γ (:mod:`darrm_opt.sampling.bernoulli`).
- Alg. 2, the discrete Laplace Pr[Y = y] ∝ exp(−|y|/t) (t an integer): U ~ Uniform{0..t−1}
  (:func:`~darrm_opt.sampling.uniform.uniform_below`); reject unless Bernoulli(exp(−U/t)); V ← the number of
  successes of Bernoulli(exp(−1)) before the first failure; X ← U + tV; B ~ Bernoulli(½); reject if B = 1
  and X = 0; Y ← (1 − 2B)X.
- Alg. 3, the discrete Gaussian: t ← ⌊σ⌋ + 1; Y ← Alg. 2; accept with probability
  exp(−(|Y| − σ²/t)²/(2σ²)) (Alg. 1), else start again.

σ is a float, σ² taken exactly as a rational. Alg. 1's coins are exact in both of the ways σ² may be held:

- a lattice scale, σ = n an integer ≤ :data:`MAX_N` (σ² = n²): the acceptance is
  exp(−((n+1)|Y| − n²)² / (2n²(n+1)²)), integers below 2^63 for (n+1)|Y| < 2^31.5, so every coin is
  :func:`~darrm_opt.sampling.bernoulli.bernoulli_exp` on int64 numerators over one denominator, no table;
  the rare larger |Y| (a discrete Laplace tail beyond about 45 t) is finished one at a time in Python
  integers (:func:`~darrm_opt.sampling.bernoulli.bernoulli_exp_exact`), the same algorithm.
- any other σ: σ² has a denominator up to 2^106, so the coins are
  :class:`~darrm_opt.sampling.bernoulli.ExpNegTable` (thresholds ⌊γ/k·2^64⌋ from exact rationals, computed
  once per (γ, k) and cached; the exact remainder drawn on a tie).

Byte order: every round draws 8 bytes per active element for a uniform or a coin, in element order, and
the sign bits B of a round in one read of ⌈m/8⌉ bytes (``np.unpackbits`` order).

These samplers are rejection samplers: the work of a draw grows with the value drawn (a larger |Y| takes
more rounds of Bernoulli(exp(−1)), a rejected Y another round), so the time of a draw tells about its value
(issue 33; ``benchmarks/timing.py`` measures it). :class:`~darrm_opt.sampling.pool.NoisePool` takes the
draws off the request.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from darrm_opt.errors import InvalidParameter

from .bernoulli import ExpNegTable, bernoulli_exp, bernoulli_exp_exact, bernoulli_exp_fraction
from .discrete_laplace import laplace_rounds
from .source import RandomBytes, system_random

#: the largest lattice scale n whose integers fit int64 (the table-free coins)
MAX_N = 1 << 13


class DiscreteGaussian:
    """Exact N_ℤ(0, σ²) samples, Pr[Z = z] = exp(−z²/(2σ²)) / Σ_{y∈ℤ} exp(−y²/(2σ²)), for a float σ > 0 (σ² taken
    exactly): Canonne, Kamath, Steinke 2020, Alg. 3 over Alg. 2 over Alg. 1 (module docstring), with the
    int64 coins at a lattice scale (``n``: σ an integer ≤ :data:`MAX_N`) and the cached-threshold coins
    otherwise."""

    def __init__(self, sigma: float) -> None:
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError("σ must be finite and > 0")
        self.sigma = float(sigma)
        self.sigma2 = Fraction(self.sigma) ** 2
        self.t = math.isqrt(math.floor(self.sigma2)) + 1  # ⌊σ⌋ + 1
        #: the lattice scale n when σ = n is an integer ≤ MAX_N, else None (the cached-threshold coins)
        self.n = int(self.sigma) if self.sigma.is_integer() and self.sigma <= MAX_N else None
        if self.n is not None:
            n, t = self.n, self.t
            self._nn = n * n
            self._den = 2 * n * n * t * t
            self._vector_max = 3_037_000_499 // t  # ((n+1)|Y| − n²)² < 2^63 below it
        else:
            t = self.t
            self._one = ExpNegTable(lambda key: Fraction(1))
            self._u_over_t = ExpNegTable(lambda u: Fraction(u, t))
            # acceptance of |Y| = y: γ(y) = (y − σ²/t)²/(2σ²), split into ⌊γ⌋ and the rest
            self._whole: list[int] = []
            self._frac = ExpNegTable(self._accept_fraction)

    # Alg. 1's coins, by the representation of σ² (module docstring)

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

    def _exp_minus_one(self, m: int, random_bytes: RandomBytes) -> np.ndarray:
        """m coins Bernoulli(exp(−1))."""
        if self.n is not None:
            return bernoulli_exp_fraction(np.ones(m, dtype=np.int64), 1, random_bytes)
        return self._one(np.zeros(m, dtype=np.int64), random_bytes)

    def _exp_minus_u_over_t(self, u: np.ndarray, random_bytes: RandomBytes) -> np.ndarray:
        """Bernoulli(exp(−u_i/t)) for u_i ∈ 0..t − 1."""
        if self.n is not None:
            return bernoulli_exp_fraction(u, self.t, random_bytes)
        return self._u_over_t(u, random_bytes)

    def _accept(self, ay: np.ndarray, random_bytes: RandomBytes) -> np.ndarray:
        """Bernoulli(exp(−(|y| − σ²/t)²/(2σ²))) per |y| (Alg. 3's acceptance)."""
        ok = np.zeros(ay.size, dtype=bool)
        if self.n is not None:
            small = ay <= self._vector_max
            s = np.flatnonzero(small)
            ok[s] = bernoulli_exp((self.t * ay[s] - self._nn) ** 2, self._den, random_bytes)
            for i in np.flatnonzero(~small).tolist():  # a far tail: Python integers
                ok[i] = bernoulli_exp_exact((self.t * int(ay[i]) - self._nn) ** 2, self._den, random_bytes)
            return ok
        whole = self._wholes(ay)
        ok[:] = True
        for j in range(int(whole.max()) if whole.size else 0):  # ⌊γ⌋ Bernoulli(exp(−1)), rarely > 0
            idx = np.flatnonzero(ok & (whole > j))
            ok[idx] = self._one(np.zeros(idx.size, dtype=np.int64), random_bytes)
        idx = np.flatnonzero(ok)
        ok[idx] = self._frac(ay[idx], random_bytes)
        return ok

    # Alg. 2 and Alg. 3

    def laplace(self, m: int, random_bytes: RandomBytes) -> np.ndarray:
        """m discrete Laplace samples, Pr[y] ∝ exp(−|y|/t) (Alg. 2), int64, with this σ's coins."""
        return laplace_rounds(self.t, m, random_bytes, self._exp_minus_u_over_t, self._exp_minus_one)

    def __call__(self, m: int, random_bytes: RandomBytes) -> np.ndarray:
        """m independent N_ℤ(0, σ²) samples (int64)."""
        return self.sample(m, random_bytes)

    def sample(self, m: int, random_bytes: RandomBytes) -> np.ndarray:
        """m independent N_ℤ(0, σ²) samples (int64): Alg. 3."""
        out = np.zeros(m, dtype=np.int64)
        todo = np.arange(m)
        while todo.size:
            y = self.laplace(todo.size, random_bytes)
            ok = self._accept(np.abs(y), random_bytes)
            out[todo[ok]] = y[ok]
            todo = todo[~ok]
        return out


def discrete_gaussian(n: int, m: int, random_bytes: RandomBytes = system_random) -> np.ndarray:
    """m independent draws of N_ℤ(0, n²) at the lattice scale n ∈ [1, :data:`MAX_N`] (an integer), int64,
    exactly (:class:`DiscreteGaussian`); InvalidParameter naming ``noise`` for any other n."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_N:
        raise InvalidParameter("noise", f"must be an integer in [1, {MAX_N}]", n)
    return DiscreteGaussian(int(n)).sample(m, random_bytes)
