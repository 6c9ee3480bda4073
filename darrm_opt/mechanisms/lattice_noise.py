"""Exact discrete Gaussian noise N_ℤ(0, n²) from CSPRNG bytes, vectorised (Canonne, Kamath, Steinke 2020).

For an integer n ≥ 1 the discrete Gaussian has Pr[X = x] ∝ exp(−x²/(2n²)), x ∈ ℤ. It is sampled with the
algorithms of Canonne, Kamath and Steinke ("The Discrete Gaussian for Differential Privacy", NeurIPS 2020),
every step in exact integer arithmetic, no float on the path of a sample:

- Bernoulli(a/b), a, b integers: a uniform integer U in {0..b−1} (64 random bits u, rejected when they fall in
  the top 2^64 mod b values: exactly uniform, U = ⌊u/⌊2^64/b⌋⌋), output U < a, i.e. u < a·⌊2^64/b⌋.
- Bernoulli(exp(−γ)) for rational γ = a/b ∈ [0, 1] (their Alg. 1): draw A_k ~ Bernoulli(γ/k) for k = 1, 2, …
  until the first A_k = 0; output 1 iff that k is odd (Pr = Σ_{k odd} γ^{k−1}/(k−1)! (1 − γ/k) = e^{−γ}).
  For γ > 1: ⌊γ⌋ draws of Bernoulli(e^{−1}) must all be 1, then Bernoulli(exp(−(γ − ⌊γ⌋))).
- Discrete Laplace with scale t (their Alg. 2): U uniform in {0..t−1}, kept with probability exp(−U/t);
  V ~ Geometric(1 − e^{−1}) (count of Bernoulli(e^{−1}) successes); X = U + tV; a fair sign bit B;
  (B = 1, X = 0) is rejected; output (1 − 2B)·X.
- Discrete Gaussian (their Alg. 3): t = n + 1; Y from the discrete Laplace with scale t, accepted with
  probability exp(−(|Y| − n²/t)²/(2n²)) = exp(−((n+1)|Y| − n²)² / (2n²(n+1)²)).

Every loop runs over the still-pending entries of an array at once. Integers stay below 2^63 for
n ≤ 2^13 and (n+1)|Y| < 2^31.5; the rare larger |Y| (a discrete Laplace tail beyond about 45 t) and any
Bernoulli(γ/k) with k past :data:`SERIES_K` are finished one at a time with Python integers, the same
algorithm. Random bytes are read in blocks of 8 per draw, in the order the loops need them.
"""

from __future__ import annotations

import numpy as np

from darrm_opt.errors import InvalidParameter

from .samplers import RandomBytes, system_random

#: largest n whose integers fit int64 in the vectorised path
MAX_N = 1 << 13
#: Bernoulli(γ/k) with b·k beyond int64 is finished in Python integers
_INT63 = (1 << 63) - 1
_TWO64 = 1 << 64


def _u64(random_bytes: RandomBytes, m: int) -> np.ndarray:
    return np.frombuffer(random_bytes(8 * m), dtype=np.uint64, count=m)


def uniform_below(b: int, m: int, random_bytes: RandomBytes) -> np.ndarray:
    """m draws of U uniform in {0..b − 1} (1 ≤ b < 2^63), uint64: a 64-bit word u below L = b·⌊2^64/b⌋ (words
    at or above L are drawn again), U = ⌊u / ⌊2^64/b⌋⌋; no word for b = 1."""
    if b == 1:
        return np.zeros(m, dtype=np.uint64)
    step = _TWO64 // b
    limit = b * step
    out = np.zeros(m, dtype=np.uint64)
    todo = np.arange(m)
    while todo.size:
        u = _u64(random_bytes, todo.size)
        ok = u < np.uint64(limit) if limit < _TWO64 else np.ones(todo.size, dtype=bool)
        out[todo[ok]] = u[ok] // np.uint64(step)
        todo = todo[~ok]
    return out


def bernoulli(a: np.ndarray, b: int, random_bytes: RandomBytes) -> np.ndarray:
    """Bernoulli(a_i / b) per entry, exactly (0 ≤ a_i ≤ b < 2^63 integers): U < a_i for U of
    :func:`uniform_below`, i.e. u < a_i·⌊2^64/b⌋ for the accepted word u (no division per entry)."""
    m = a.shape[0]
    if m == 0 or b == 1:
        return a >= 1
    step = _TWO64 // b
    limit = b * step
    a = a.astype(np.uint64)
    full = a == np.uint64(b)  # a·step = L may be 2^64: always true
    thresholds = np.where(full, np.uint64(0), a) * np.uint64(step)
    out = np.zeros(m, dtype=bool)
    todo = np.arange(m)
    while todo.size:
        u = _u64(random_bytes, todo.size)
        ok = u < np.uint64(limit) if limit < _TWO64 else np.ones(todo.size, dtype=bool)
        idx = todo[ok]
        out[idx] = full[idx] | (u[ok] < thresholds[idx])
        todo = todo[~ok]
    return out


def _bernoulli_py(a: int, b: int, random_bytes: RandomBytes) -> bool:
    """Bernoulli(a/b) for Python integers of any size (uniform below b by rejection of whole words)."""
    nbytes = (b.bit_length() + 7) // 8 + 8
    top = 1 << (8 * nbytes)
    limit = top - top % b
    while True:
        u = int.from_bytes(random_bytes(nbytes), "little")
        if u < limit:
            return u % b < a


def _bernoulli_exp_py(a: int, b: int, random_bytes: RandomBytes) -> bool:
    """Bernoulli(exp(−a/b)), Python integers (the module's algorithm, one entry)."""
    q, r = divmod(a, b)
    for _ in range(q):
        if not _bernoulli_exp_fraction_py(1, 1, random_bytes):
            return False
    return _bernoulli_exp_fraction_py(r, b, random_bytes)


def _bernoulli_exp_fraction_py(a: int, b: int, random_bytes: RandomBytes, k: int = 1) -> bool:
    """Bernoulli(exp(−a/b)) for a ≤ b (CKS Alg. 1), Python integers, the series from its k-th draw on."""
    while _bernoulli_py(a, b * k, random_bytes):
        k += 1
    return k % 2 == 1


#: the series of Bernoulli(γ/k) runs vectorised while b·k stays in int64
SERIES_K = 1 << 9


def bernoulli_exp_fraction(a: np.ndarray, b: int, random_bytes: RandomBytes) -> np.ndarray:
    """Bernoulli(exp(−a_i/b)) per entry for 0 ≤ a_i ≤ b (γ ∈ [0, 1]): CKS Alg. 1."""
    n = a.shape[0]
    out = np.zeros(n, dtype=bool)
    k = 1
    todo = np.arange(n)
    while todo.size:
        if k > SERIES_K or b * k > _INT63:
            for i in todo.tolist():  # b·k past int64: finish these in Python integers
                out[i] = _bernoulli_exp_fraction_py(int(a[i]), b, random_bytes, k)
            break
        hit = bernoulli(a[todo], b * k, random_bytes)
        out[todo[~hit]] = k % 2 == 1
        todo = todo[hit]
        k += 1
    return out


def bernoulli_exp(a: np.ndarray, b: int, random_bytes: RandomBytes) -> np.ndarray:
    """Bernoulli(exp(−a_i/b)) per entry for any a_i ≥ 0 (int64), b ≥ 1."""
    q, r = np.divmod(a, b)
    alive = np.ones(a.shape[0], dtype=bool)
    j = 0
    while True:
        todo = np.flatnonzero(alive & (q > j))
        if not todo.size:
            break
        alive[todo] = bernoulli_exp_fraction(np.ones(todo.size, dtype=np.int64), 1, random_bytes)
        j += 1
    out = np.zeros(a.shape[0], dtype=bool)
    todo = np.flatnonzero(alive)
    out[todo] = bernoulli_exp_fraction(r[todo], b, random_bytes)
    return out


def discrete_laplace(t: int, m: int, random_bytes: RandomBytes) -> np.ndarray:
    """m draws of the discrete Laplace with scale t, Pr[x] ∝ exp(−|x|/t) (CKS Alg. 2), int64."""
    out = np.zeros(m, dtype=np.int64)
    todo = np.arange(m)
    tt = np.int64(t)
    while todo.size:
        u = uniform_below(t, todo.size, random_bytes).astype(np.int64)
        keep = bernoulli_exp(u, t, random_bytes)
        idx, u = todo[keep], u[keep]
        v = np.zeros(idx.size, dtype=np.int64)
        going = np.arange(idx.size)
        while going.size:
            more = bernoulli_exp_fraction(np.ones(going.size, dtype=np.int64), 1, random_bytes)
            v[going[more]] += 1
            going = going[more]
        x = u + tt * v
        sign = np.unpackbits(np.frombuffer(random_bytes((idx.size + 7) // 8), dtype=np.uint8),
                             count=idx.size).astype(bool)
        ok = ~(sign & (x == 0))
        out[idx[ok]] = np.where(sign[ok], -x[ok], x[ok])
        done = np.zeros(m, dtype=bool)
        done[todo] = True
        done[idx[ok]] = False
        todo = np.flatnonzero(done)
    return out


def discrete_gaussian(n: int, m: int, random_bytes: RandomBytes = system_random) -> np.ndarray:
    """m independent draws of N_ℤ(0, n²) (module docstring), int64, exactly."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_N:
        raise InvalidParameter("noise", f"must be an integer in [1, {MAX_N}]", n)
    n = int(n)
    t = n + 1
    nn = n * n
    den = 2 * nn * t * t
    vector_max = 3_037_000_499 // t  # ((n+1)|Y| − n²)² < 2^63 below it
    out = np.zeros(m, dtype=np.int64)
    todo = np.arange(m)
    while todo.size:
        y = discrete_laplace(t, todo.size, random_bytes)
        ay = np.abs(y)
        small = ay <= vector_max
        acc = np.zeros(todo.size, dtype=bool)
        s = np.flatnonzero(small)
        num = (t * ay[s] - nn) ** 2
        acc[s] = bernoulli_exp(num, den, random_bytes)
        for i in np.flatnonzero(~small).tolist():  # a far tail: Python integers
            acc[i] = _bernoulli_exp_py((t * int(ay[i]) - nn) ** 2, den, random_bytes)
        out[todo[acc]] = y[acc]
        todo = todo[~acc]
    return out
