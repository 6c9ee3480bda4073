"""Exact discrete Laplace samples DLap(t), Pr[Y = y] = (1 − q)/(1 + q)·q^|y| with q = exp(−1/t), t a positive integer.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), Alg. 2, on arrays:
U ~ Uniform{0..t − 1} (:func:`~darrm_opt.sampling.uniform.uniform_below`); reject unless Bernoulli(exp(−U/t));
V ← the number of successes of Bernoulli(exp(−1)) before the first failure; X ← U + tV; B ~ Bernoulli(½);
reject if B = 1 and X = 0; Y ← (1 − 2B)X. Every coin is Alg. 1 on integers
(:func:`~darrm_opt.sampling.bernoulli.bernoulli_exp_fraction`), so no float lies between the bytes and Y.
Byte order per round: 8 bytes per pending element for U, its coins, then the Bernoulli(e^{−1}) coins round by
round, then the sign bits of the accepted ones in one read of ⌈m/8⌉ bytes (``np.unpackbits`` order).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from darrm_opt.errors import InvalidParameter

from .bernoulli import bernoulli_exp_fraction
from .source import RandomBytes, system_random
from .uniform import uniform_below

#: the largest scale t accepted (U and t·V stay far inside int64)
MAX_T = 1 << 40


def discrete_laplace(t: int, m: int, random_bytes: RandomBytes = system_random) -> np.ndarray:
    """m independent DLap(t) samples (int64), exactly (module docstring)."""
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 1 <= int(t) <= MAX_T:
        raise InvalidParameter("noise", f"the discrete Laplace scale must be an integer in 1..{MAX_T}", t)
    t = int(t)

    def exp_minus_u_over_t(u: np.ndarray, source: RandomBytes) -> np.ndarray:
        return bernoulli_exp_fraction(u, t, source) if t > 1 else np.ones(u.size, dtype=bool)

    def exp_minus_one(n: int, source: RandomBytes) -> np.ndarray:
        return bernoulli_exp_fraction(np.ones(n, dtype=np.int64), 1, source)

    return laplace_rounds(t, m, random_bytes, exp_minus_u_over_t, exp_minus_one)


def laplace_rounds(t: int, m: int, random_bytes: RandomBytes,
                   exp_minus_u_over_t: Callable[[np.ndarray, RandomBytes], np.ndarray],
                   exp_minus_one: Callable[[int, RandomBytes], np.ndarray]) -> np.ndarray:
    """Alg. 2 on arrays with the caller's coins: ``exp_minus_u_over_t(u, bytes)`` draws Bernoulli(exp(−u_i/t))
    and ``exp_minus_one(n, bytes)`` n Bernoulli(exp(−1)) coins; the rounds and the byte order are the module
    docstring's. The discrete Gaussian (Alg. 3) proposes from here with coins of its own representation of σ²."""
    out = np.zeros(m, dtype=np.int64)
    pending = np.arange(m)
    step = np.int64(t)
    while pending.size:
        u = uniform_below(t, pending.size, random_bytes).astype(np.int64)
        ok = exp_minus_u_over_t(u, random_bytes)
        rows = np.flatnonzero(ok)
        v = np.zeros(rows.size, dtype=np.int64)
        run = np.arange(rows.size)
        while run.size:  # V: successes of Bernoulli(exp(−1)) before the first failure
            run = run[exp_minus_one(run.size, random_bytes)]
            v[run] += 1
        x = u[rows] + step * v
        sign = np.unpackbits(np.frombuffer(random_bytes((rows.size + 7) // 8), dtype=np.uint8),
                             count=rows.size).astype(bool)
        keep = ~(sign & (x == 0))
        ok[rows[~keep]] = False
        out[pending[rows[keep]]] = np.where(sign, -x, x)[keep]
        pending = pending[~ok]
    return out
