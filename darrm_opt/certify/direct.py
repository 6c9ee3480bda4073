"""Event probabilities of corner multisets by direct convolution, with a proven *relative* error bound.

For a multiset n of corners (darrm_opt.model.corners) and an output o ∈ {1, 0}, DaRRM's event point is

    (b, a) = (Pr_{D′}[out = o], Pr_D[out = o]),   Pr_D[out = o] = Σ_l w^o_l α_l(n),   w^o_l = (1 + σ_o h_l)/2,

σ_1 = +1, σ_0 = −1, h_l = s_l γ(l) (Alg. 1, Lemma 3.4), α the pmf of L under the multiset's p's and α′ under its
p′'s. The exhaustive sweeps (darrm_opt.certify.sweep) bound the error of a − x b *absolutely*, by η(x), which
grows like x: at a steep slope (x ≈ 2.6·10³ at K = 5, m = 3) η(x)/2 ≈ 10⁻¹⁰ is larger than what is to be
resolved (an infinite-loss mass of 6·10⁻¹⁰). Here a and b are computed from non-negative quantities only,
so each carries a small *relative* error and a − x b is bounded to within θ(a + x b), tiny wherever a − x b
is near its maximum (there x b ≤ a):

- each corner's probabilities are taken as p and q = 1 − p from their own formulas, rounded once from 50-digit
  values: 0, 1, Δ, 1 − Δ, H = (e + Δ)/(e + 1) and L = (1 − Δ)/(e + 1) (e = e^ε; H = e/(e + 1), L = 1/(e + 1)
  for Δ = 0), so that q = 1 − p is never a rounded difference (1 − fl(1 − Δ) would lose Δ's accuracy):
  relative error ≤ ρ = 2u, u = 2⁻⁵³;
- Bin(n, p) by the recurrence T[n, k] = q T[n−1, k] + p T[n−1, k−1] (every term a product of n inputs, 2n
  roundings);
- α by convolving the corners' binomial rows (corners with p ∈ {0, 1} as exact shifts), each convolution a
  sum of at most K + 1 non-negative products (K + 2 roundings per term, in any summation order);
- Pr = Σ_l w_l α_l with w_l = fl(1 ± h_l)/2 (one rounding) and K + 2 more.

Every result is then a sum of non-negative exact terms, each multiplied by at most K factors (1 + ρ_i) and
N = 2K + 8(K + 2) + (K + 3) factors (1 + δ_i), |ρ_i| ≤ 2u, |δ_i| ≤ u, so without underflow

    |P̃r − Pr| ≤ ((1 + 2u)^K (1 + u)^N − 1) Pr ≤ θ Pr,    θ = 2 (13K + 19) u      (a factor 2 to spare).

Underflow (gradual) adds at most 2⁻¹⁰⁷⁵ per product; each binomial entry, convolution and weighted sum
multiplies earlier absolute errors by pmf masses summing to ≤ 1 + θ, so the absolute part is at most
τ = 32 (K + 1)² 2⁻¹⁰⁷⁴. Hence Pr ∈ [(P̃r − τ)/(1 + θ), (P̃r + τ)/(1 − θ)], and :meth:`EventPoints.upper` /
:meth:`EventPoints.lower` turn that into float bounds on a − x b with every rounding of their own directed
outwards (module tests compare them with 60-digit interval arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np

from darrm_opt.certify.sweep import signed_h
from darrm_opt.model.params import Params

UNIT_ROUNDOFF = 2.0**-53
#: relative error of one corner probability (a 50-digit value rounded once to float64)
RHO = 2.0 * UNIT_ROUNDOFF
#: the largest slope x handled in float64 (x·b stays finite for b ≤ 2)
MAX_SLOPE = 2.0**1000


def relative_error(K: int) -> float:
    """θ(K) = 2 (13K + 19) u (module docstring)."""
    return 2.0 * (13 * K + 19) * UNIT_ROUNDOFF


def underflow_error(K: int) -> float:
    """τ(K) = 32 (K + 1)² 2⁻¹⁰⁷⁴ (module docstring)."""
    return 32.0 * (K + 1) ** 2 * 2.0**-1074


def corner_pq(params: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(p, 1 − p, p′, 1 − p′) of every corner, in the order of darrm_opt.model.corners, each entry rounded once
    from its 50-digit value (0, 1 and Δ exactly)."""
    with mpmath.workdps(50):
        e = mpmath.exp(mpmath.mpf(params.epsilon))
        D = mpmath.mpf(params.teacher_delta)
        H, L = float((e + D) / (e + 1)), float((1 - D) / (e + 1))
        d, od = float(D), float(1 - D)
    if params.teacher_delta == 0:
        p, q = [0.0, H, 1.0, L], [1.0, L, 0.0, H]
        pp, qp = [0.0, L, 1.0, H], [1.0, H, 0.0, L]
    else:
        p, q = [0.0, 0.0, d, H, 1.0, 1.0, od, L], [1.0, 1.0, od, L, 0.0, 0.0, d, H]
        pp, qp = [0.0, d, 0.0, L, 1.0, od, 1.0, H], [1.0, od, 1.0, H, 0.0, d, 0.0, L]
    return np.array(p), np.array(q), np.array(pp), np.array(qp)


def binomial_rows(p: float, q: float, K: int) -> np.ndarray:
    """T[n, k] = Bin(n, p)(k) for n, k = 0..K by T[n, k] = q T[n−1, k] + p T[n−1, k−1]."""
    T = np.zeros((K + 1, K + 1))
    T[0, 0] = 1.0
    for n in range(1, K + 1):
        T[n, : n + 1] = q * T[n - 1, : n + 1]
        T[n, 1: n + 1] += p * T[n - 1, :n]
    return T


def _pmfs(p: np.ndarray, q: np.ndarray, counts: np.ndarray, K: int) -> np.ndarray:
    """α (rows) of every count vector: binomial rows convolved, p = 0 skipped, p = 1 an exact shift."""
    M = counts.shape[0]
    alpha = np.zeros((M, K + 1))
    alpha[:, 0] = 1.0
    cols = np.arange(K + 1)
    rows = np.arange(M)[:, None]
    for c in range(p.size):
        n = counts[:, c].astype(np.int64)
        if not n.any() or p[c] == 0.0:
            continue
        if p[c] == 1.0:
            src = cols[None, :] - n[:, None]
            alpha = np.where(src >= 0, alpha[rows, np.maximum(src, 0)], 0.0)
            continue
        B = binomial_rows(float(p[c]), float(q[c]), K)[n]  # (M, K + 1), row m supported on 0..n_m
        out = np.zeros_like(alpha)
        for j in range(int(n.max()) + 1):
            out[:, j:] += alpha[:, : K + 1 - j] * B[:, j: j + 1]
        alpha = out
    return alpha


@dataclass(frozen=True)
class EventPoints:
    """Float event probabilities of M multisets, columns (output 1, output 0): ``a`` under D, ``b`` under D′,
    each within relative ``theta`` and absolute ``tau`` of the exact value (module docstring)."""

    a: np.ndarray
    b: np.ndarray
    theta: float
    tau: float

    def _scaled(self, v: np.ndarray, up: bool) -> np.ndarray:
        """Upper (lower) bounds of the exact probabilities behind ``v``: (v + τ)/(1 − θ) ≤ fl((v + τ)(1 + 2θ′))
        and (v − τ)⁺/(1 + θ) ≥ fl((v − τ)⁺ (1 − 2θ′)), θ′ = θ + 2u covering the three roundings."""
        t = self.theta + 2.0 * UNIT_ROUNDOFF
        if up:
            return (v + self.tau) * (1.0 + 2.0 * t)
        return np.maximum(v - self.tau, 0.0) * (1.0 - 2.0 * t)

    def upper(self, x_lo: float) -> np.ndarray:
        """Upper bounds of a − x b for every x ≥ ``x_lo`` ≥ 0: A↑ − x_lo·B↓, plus 4u(A↑ + x_lo B↓), which
        exceeds the ≤ 3.1u(A↑ + x_lo B↓) that the product, the difference and the final sum can round away."""
        if not (0.0 <= x_lo <= MAX_SLOPE):
            raise ValueError("x_lo must be in [0, 2^1000]")
        A, P = self._scaled(self.a, True), x_lo * self._scaled(self.b, False)
        return (A - P) + 4.0 * UNIT_ROUNDOFF * (A + P)

    def lower(self, x_hi: float) -> np.ndarray:
        """Lower bounds of a − x b for every x ≤ ``x_hi`` (−∞ where ``x_hi`` is infinite: b > 0 cannot be ruled
        out in float64), symmetric to :meth:`upper`."""
        if not x_hi >= 0.0:
            raise ValueError("x_hi must be >= 0")
        if x_hi > MAX_SLOPE:
            return np.full(self.a.shape, -math.inf)
        A, P = self._scaled(self.a, False), x_hi * self._scaled(self.b, True)
        return (A - P) - 4.0 * UNIT_ROUNDOFF * (A + P)


def event_points(params: Params, gamma: np.ndarray, counts) -> EventPoints:
    """(a, b) of both outputs of every count vector in ``counts`` (rows over the corners of ``params``)."""
    counts = np.atleast_2d(np.asarray(counts, dtype=np.int64))
    K = params.K
    h = signed_h(np.asarray(gamma, dtype=np.float64))
    p, q, pp, qp = corner_pq(params)
    if counts.shape[1] != p.size or np.any(counts < 0) or np.any(counts.sum(axis=1) != K):
        raise ValueError("counts must be count vectors over the corners summing to K")
    alpha = _pmfs(p, q, counts, K)
    alpha_p = _pmfs(pp, qp, counts, K)
    w = np.stack([(1.0 + h) / 2.0, (1.0 - h) / 2.0], axis=1)  # (K + 1, 2): outputs 1, 0
    a = np.stack([(alpha * w[:, 0]).sum(axis=1), (alpha * w[:, 1]).sum(axis=1)], axis=1)
    b = np.stack([(alpha_p * w[:, 0]).sum(axis=1), (alpha_p * w[:, 1]).sum(axis=1)], axis=1)
    return EventPoints(a, b, relative_error(K), underflow_error(K))
