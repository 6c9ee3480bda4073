"""Exact Bernoulli coins from random bytes: no float between the bytes and the outcome.

* :func:`exact_bernoulli`: Bernoulli(p) for one rational p ∈ [0, 1]. A uniform 64-bit word U against
  T = ⌊p·2^64⌋: U < T gives 1, U > T gives 0, and in the event U = T (probability 2^-64) the same draw on the
  remainder p·2^64 − T ∈ [0, 1) with fresh bytes. Pr[1] = T/2^64 + 2^-64·(p·2^64 − T) = p exactly; the
  recursion ends with probability 1 (and after the last binary digit of a dyadic p).
* :func:`bernoulli`: Bernoulli(a_i/b) for integers a_i over one b < 2^63, vectorised: U uniform in {0..b − 1}
  (:func:`~darrm_opt.sampling.uniform.uniform_below`, read as u < a_i·⌊2^64/b⌋ for the kept word u), 1 iff
  U < a_i.
* :class:`FixedWidthCoins`: Bernoulli(γ_j) for a table of floats (dyadic rationals), every coin from the
  same number of bytes whatever γ_j or the outcome (issue 33: its time does not depend on either).
* Bernoulli(exp(−γ)) for rational γ ≥ 0, Canonne, Kamath and Steinke, "The Discrete Gaussian for
  Differential Privacy" (NeurIPS 2020), Alg. 1: for γ ∈ [0, 1], draw A_k ~ Bernoulli(γ/k) for k = 1, 2, …
  until the first A_k = 0 and output 1 iff that k is odd: Pr = Σ_{k odd} γ^{k−1}/(k−1)! · (1 − γ/k) = e^{−γ}.
  For γ > 1: ⌊γ⌋ draws of Bernoulli(e^{−1}) must all be 1, then Bernoulli(exp(−(γ − ⌊γ⌋))). Two forms:
  :func:`bernoulli_exp` / :func:`bernoulli_exp_fraction` for γ_i = a_i/b with int64 integers (each A_k by
  :func:`bernoulli`), and :class:`ExpNegTable` for a family of rationals γ_key with any denominators (each
  A_k by :func:`exact_bernoulli`'s threshold ⌊γ_key/k · 2^64⌋, computed once per (key, k) and cached).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from darrm_opt.errors import InvalidParameter

from .source import TWO64, RandomBytes, uint64_words

#: the largest int64
_INT63 = (1 << 63) - 1
#: the series of Bernoulli(γ/k) runs vectorised up to this k (and while b·k stays in int64)
SERIES_K = 1 << 9


def exact_bernoulli(p: Fraction, random_bytes: RandomBytes) -> bool:
    """True with probability exactly ``p`` (a rational in [0, 1]), 64 fresh bits a round (module docstring)."""
    while p > 0:
        scaled = p * TWO64
        t = scaled.numerator // scaled.denominator
        u = int.from_bytes(random_bytes(8), "little")
        if u != t:
            return u < t
        p = scaled - t
    return False


class FixedWidthCoins:
    """Bernoulli(γ_j), exactly, for a fixed table of floats γ_j ∈ [0, 1], each coin from the same number of
    random bytes (``nbytes`` = W/8) whatever j or the outcome.

    A float64 γ is a dyadic rational, γ_j = T_j / 2^W with T_j an integer (W: the largest position of a last
    binary digit in the table, rounded up to a multiple of 64; at least 64; W ≤ 1074 + 53 for any float in
    [0, 1]). A coin reads W random bits as a big-endian integer U (uniform on {0..2^W − 1}) and is 1 iff
    U < T_j, so Pr[1] = T_j/2^W = γ_j exactly, and neither the number of bits nor the work that compares them
    depends on γ_j or on the outcome.

    One row (:meth:`one`): the W/8 bytes of U compared with a precomputed ``bytearray`` (Python's bytearray
    comparison is one ``memcmp`` of the shorter length, then the lengths): T_j − 1 followed by one byte for
    T_j ≥ 1 (U ≤ T_j − 1 ⟺ U < T_j; equal prefixes leave U the shorter, hence smaller), W/8 zero bytes for
    T_j = 0 (U < 0 never). Every coin is that one ``memcmp`` of W/8 bytes. Many rows (:meth:`many`): U as
    W/64 big-endian 64-bit limbs, compared limb by limb with T_j − 1 by the same numpy operations for every
    row, and ANDed with T_j ≥ 1."""

    def __init__(self, gamma: Sequence[float] | np.ndarray) -> None:
        fracs = [Fraction(float(x)) for x in gamma]
        if any(not 0 <= f <= 1 for f in fracs):
            raise InvalidParameter("gamma", "must be values in [0, 1]")
        last = max(f.denominator.bit_length() - 1 for f in fracs)  # γ·2^last is an integer for every γ
        self.limbs = max(1, -(-last // 64))
        self.nbytes = 8 * self.limbs
        self.bits = 64 * self.limbs
        self.thresholds = [f.numerator << (self.bits - (f.denominator.bit_length() - 1)) for f in fracs]  # T_j
        assert all(Fraction(t, 1 << self.bits) == f for t, f in zip(self.thresholds, fracs))
        self._below = [bytearray(self.nbytes) if t == 0 else bytearray((t - 1).to_bytes(self.nbytes, "big") + b"\0")
                       for t in self.thresholds]
        mask = (1 << 64) - 1
        #: limb k (0: the most significant) of T_j − 1 (0 for T_j = 0), one array per limb, indexed by j
        self._cols = [np.array([(max(t - 1, 0) >> (64 * (self.limbs - 1 - k))) & mask for t in self.thresholds],
                               dtype=np.uint64) for k in range(self.limbs)]
        self._some = np.array([t > 0 for t in self.thresholds])

    def one(self, u: bytes, j: int) -> bool:
        """The coin of γ_j from the ``nbytes`` bytes ``u``."""
        return u < self._below[j]  # bytes < bytearray: bytearray's comparison, one memcmp

    def many(self, u: bytes, j: np.ndarray) -> np.ndarray:
        """The coins of γ_{j_i}, i = 0..n − 1, from ``nbytes``·n bytes ``u`` (row i's U at i·nbytes)."""
        n = j.shape[0]
        limbs = np.frombuffer(u, dtype=">u8", count=n * self.limbs).astype(np.uint64)
        if self.limbs == 1:
            le = limbs <= self._cols[0][j]
        else:  # U ≤ T − 1, from the lowest limb up
            limbs = limbs.reshape(n, self.limbs)
            le = limbs[:, -1] <= self._cols[-1][j]
            for k in range(self.limbs - 2, -1, -1):
                u_k, t_k = limbs[:, k], self._cols[k][j]
                le = (u_k < t_k) | ((u_k == t_k) & le)
        le &= self._some[j]
        return le


def bernoulli(a: np.ndarray, b: int, random_bytes: RandomBytes) -> np.ndarray:
    """Bernoulli(a_i / b) per entry, exactly (0 ≤ a_i ≤ b < 2^63 integers): U < a_i for U of
    :func:`~darrm_opt.sampling.uniform.uniform_below`, i.e. u < a_i·⌊2^64/b⌋ for the kept word u (no division
    per entry)."""
    m = a.shape[0]
    if m == 0 or b == 1:
        return a >= 1
    step = TWO64 // b
    limit = b * step
    a = a.astype(np.uint64)
    full = a == np.uint64(b)  # a·step = L may be 2^64: always true
    thresholds = np.where(full, np.uint64(0), a) * np.uint64(step)
    out = np.zeros(m, dtype=bool)
    todo = np.arange(m)
    while todo.size:
        u = uint64_words(random_bytes, todo.size)
        ok = u < np.uint64(limit) if limit < TWO64 else np.ones(todo.size, dtype=bool)
        idx = todo[ok]
        out[idx] = full[idx] | (u[ok] < thresholds[idx])
        todo = todo[~ok]
    return out


def _exp_fraction_series(gamma: Fraction, random_bytes: RandomBytes, k: int = 1) -> bool:
    """Bernoulli(exp(−γ)) for γ ∈ [0, 1] (Alg. 1), the series from its k-th draw on, by :func:`exact_bernoulli`."""
    while exact_bernoulli(gamma / k, random_bytes):
        k += 1
    return k % 2 == 1


def bernoulli_exp_exact(a: int, b: int, random_bytes: RandomBytes) -> bool:
    """Bernoulli(exp(−a/b)) for integers a ≥ 0, b ≥ 1 of any size (Alg. 1, one entry, :func:`exact_bernoulli`)."""
    q, r = divmod(a, b)
    for _ in range(q):
        if not _exp_fraction_series(Fraction(1), random_bytes):
            return False
    return _exp_fraction_series(Fraction(r, b), random_bytes)


def bernoulli_exp_fraction(a: np.ndarray, b: int, random_bytes: RandomBytes) -> np.ndarray:
    """Bernoulli(exp(−a_i/b)) per entry for 0 ≤ a_i ≤ b (γ ∈ [0, 1]): Alg. 1, each A_k by :func:`bernoulli`
    while b·k stays in int64 and k ≤ :data:`SERIES_K`, then one entry at a time by :func:`exact_bernoulli`."""
    n = a.shape[0]
    out = np.zeros(n, dtype=bool)
    k = 1
    todo = np.arange(n)
    while todo.size:
        if k > SERIES_K or b * k > _INT63:
            for i in todo.tolist():  # b·k past int64: finish these in Python integers
                out[i] = _exp_fraction_series(Fraction(int(a[i]), b), random_bytes, k)
            break
        hit = bernoulli(a[todo], b * k, random_bytes)
        out[todo[~hit]] = k % 2 == 1
        todo = todo[hit]
        k += 1
    return out


def bernoulli_exp(a: np.ndarray, b: int, random_bytes: RandomBytes) -> np.ndarray:
    """Bernoulli(exp(−a_i/b)) per entry for any a_i ≥ 0 (int64), b ≥ 1: ⌊a_i/b⌋ coins Bernoulli(e^{−1}), then
    Bernoulli(exp(−(a_i mod b)/b))."""
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


class ExpNegTable:
    """Bernoulli(exp(−γ_key)) for rationals γ_key = ``gamma(key)`` ∈ [0, 1], keys 0, 1, 2, … (Alg. 1): each
    A_k ~ Bernoulli(γ_key/k) is one word U against the threshold ⌊γ_key/k · 2^64⌋ (:func:`exact_bernoulli`,
    the remainder drawn on a tie), the thresholds in a table grown on demand."""

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
        return p * TWO64 - (p.numerator << 64) // p.denominator

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
            u = uint64_words(random_bytes, todo.size)
            t = self._thr[key, kk - 1]
            a = (u < t) | self._always[key, kk - 1]
            for i in np.flatnonzero((u == t) & ~self._always[key, kk - 1]):  # probability 2^-64 each
                a[i] = exact_bernoulli(self._remainder(int(key[i]), int(kk[i])), random_bytes)
            k[todo[a]] += 1
            todo = todo[a]
        return (k % 2) == 1
