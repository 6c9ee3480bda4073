"""Data-dependent per-query Rényi-DP costs of PATE's aggregators and their local sensitivity at distance d.

References are to Papernot et al., "Scalable private learning with PATE" (ICLR 2018), *PATE* below. The
per-query formulas (Prop. 7's q̃, Thm. 6's eq. 2 with Prop. 10's orders, the threshold check's cost) are
:mod:`darrm_opt.privacy.gnmax`; this module shapes them, at one fixed Rényi order λ, into costs whose
sensitivity is bounded (what :mod:`darrm_opt.privacy.smooth_sensitivity` needs):

* **GNMax, the shaped per-query cost** β(q) (C5, :class:`GnmaxShape`): the Thm.-6 bound where it applies and
  lies below the data-independent λ/σ² (Prop. 8), for q ≤ q₀; β* = λ/σ² for q > q₀. β(q) ≥ the per-query
  RDP bound everywhere, so Σ β(q(n̄ᵢ)) is a valid data-dependent RDP of the answered queries (Thm. 4).
  q₀ is the first log q at which eq. 2 stops applying, reaches λ/σ², or stops increasing. B_U / B_L
  (App. B.1) bound q at a neighbour; Alg. 3 bounds the local sensitivity; Alg. 4 walks the histogram d
  moves towards the largest local sensitivity (:func:`gnmax_sensitivity_at_distance`).
* **the threshold check of Confident-GNMax** (:class:`ThresholdShape`): a function of the top count M,
  which moves by ≤ 1 per move; its local sensitivity and maximum at distance ≤ d are enumerated exactly.
* **γ tables** (multi-class DaRRM, :mod:`darrm_opt.model.multiclass`, :class:`TableShape`): the output law
  depends on the histogram only through its state s = (gap g, top-set size t), so the data-dependent RDP at
  order λ is f(s) = max over the neighbouring pair types at s (both orders) of
  D_λ(P‖P′) = 1/(λ−1) log Σ_c P(c)^λ P′(c)^{1−λ}. It is finite iff P′ > 0 wherever P > 0 on every
  pair, e.g. whenever γ < 1. f(s) is exact per state: the largest data-dependent RDP of the histograms in
  state s (tested by brute force). (PATE's Prop. 7 union bound is not needed: q̃ = (1 − γ(g))(1 − 1/C).)
  The local sensitivity and its maximum at distance ≤ d follow the neighbour graph of the pair types.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from scipy import special

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.dd_arguments import count_value, order_value, positive_value
from darrm_opt.privacy.gnmax import log_q_tilde, rdp_data_dependent_from_log_q, rdp_threshold_check

__all__ = [
    "GnmaxShape",
    "gnmax_shape",
    "discrete_gnmax_shape",
    "discrete_q_sigma",
    "gnmax_sensitivity_at_distance",
    "ThresholdShape",
    "threshold_shape",
    "discrete_gaussian_log_tail",
    "discrete_threshold_shape",
    "TableShape",
    "table_shape",
    "DISCRETE_Q_EXTRA_VARIANCE",
    "MAX_TAIL_GRID",
]


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 − e^x) for x < 0 (Mächler 2012)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _thm6(logq: np.ndarray, sigma: float, lam: float) -> np.ndarray:
    """Thm. 6 (eq. 2) at Prop. 10's orders μ₂ = σ√(log 1/q̃), μ₁ = μ₂ + 1, ε_i = μ_i/σ², vectorised over
    log q̃; +inf where its conditions (q̃ condition, λ ≤ μ₁, μ₂ > 1, q̃e^{ε₂} < 1) fail. Agrees with
    :func:`darrm_opt.privacy.gnmax.rdp_data_dependent_from_log_q` where it applies (tested)."""
    lq = np.asarray(logq, dtype=float)
    v = sigma * sigma
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu2 = sigma * np.sqrt(np.maximum(-lq, 0.0))
        mu1 = mu2 + 1.0
        eps1, eps2 = mu1 / v, mu2 / v
        lq_max = (mu2 - 1.0) * eps2 - mu2 * (np.log1p(1.0 / (mu1 - 1.0)) + np.log1p(1.0 / (mu2 - 1.0)))
        ok = (lq < 0) & (mu2 > 1.0) & (lq <= lq_max) & (lq + eps2 < 0.0) & (lam <= mu1)
        log1mq = _log1mexp(np.minimum(lq, -1e-300))
        log_a = log1mq - _log1mexp((lq + eps2) * (1.0 - 1.0 / mu2))
        log_b = eps1 - lq / (mu1 - 1.0)
        bound = np.logaddexp(log1mq + (lam - 1.0) * log_a, lq + (lam - 1.0) * log_b) / (lam - 1.0)
    return np.where(ok & np.isfinite(bound), bound, np.inf)


@dataclass(frozen=True)
class GnmaxShape:
    """The shaped per-query cost of GNMax at (σ, λ, m classes) and App. B.1's functions.

    ``log_q0``: the end of the data-dependent range (C5); ``log_q1`` = log B_L(q₀) (Alg. 3's plateau);
    ``beta_star`` = λ/σ² (Prop. 8)."""

    sigma: float
    order: float
    classes: int
    log_q0: float
    log_q1: float
    beta_star: float
    #: C5 (β non-decreasing on [0, q₀]) and C6 (Δβ(q) = β(B_U(q)) − β(q) non-decreasing on [0, q₁]) hold on
    #: a fine grid of log q (App. B.4.2 checks them numerically the same way); Alg. 4 is valid only then
    conditions: bool = True
    #: the σ̂ of Prop. 7's q̃ and of B_U / B_L (σ for Gaussian noise; :func:`discrete_q_sigma` for N_ℤ noise)
    q_sigma: float = 0.0

    def __post_init__(self) -> None:
        if not self.q_sigma:
            object.__setattr__(self, "q_sigma", self.sigma)

    def beta(self, logq: object) -> np.ndarray:
        """β(q) (C5): Thm. 6 for log q ≤ log q₀, λ/σ² above; vectorised over log q (−inf gives 0)."""
        lq = np.asarray(logq, dtype=float)
        b = np.minimum(_thm6(lq, self.sigma, self.order), self.beta_star)
        b = np.where(lq == -np.inf, 0.0, b)
        return np.where(lq <= self.log_q0, b, self.beta_star)

    def beta_up(self, logq: np.ndarray) -> np.ndarray:
        """β evaluated on the upper side of a neighbour bound: β* at and beyond q₀ (within 1e-9 relative),
        so a jump of β at q₀ is never missed (Alg. 3 at q ∈ [q₁, q₀] takes β(B_U(q₁)) = β*)."""
        lq = np.asarray(logq, dtype=float)
        near = lq >= self.log_q0 - 1e-9 * max(1.0, abs(self.log_q0))
        return np.where(near, self.beta_star, self.beta(lq))

    def log_bu(self, logq: object) -> np.ndarray:
        """log B_U(q) = log min{(m−1)/2 · erfc(erfc⁻¹(2q/(m−1)) − 1/σ), 1} (App. B.1), in logs:
        ½erfc(z) = Φ(−√2 z), so with z = −Φ⁻¹(q/(m−1))/√2, B_U = (m−1) Φ(−√2 z + √2/σ)."""
        return np.minimum(self._shift(np.asarray(logq, dtype=float), +1.0), 0.0)

    def log_bl(self, logq: object) -> np.ndarray:
        """log B_L(q) = log (m−1)/2 · erfc(erfc⁻¹(2q/(m−1)) + 1/σ) (App. B.1)."""
        return self._shift(np.asarray(logq, dtype=float), -1.0)

    def _shift(self, lq: np.ndarray, sign: float) -> np.ndarray:
        lm = math.log(self.classes - 1)
        inner = np.minimum(lq - lm, 0.0)
        with np.errstate(divide="ignore"):
            x = special.ndtri_exp(inner)  # Φ⁻¹(q/(m−1)) = −√2 z
            out = lm + special.log_ndtr(x + sign * math.sqrt(2.0) / self.q_sigma)
        return np.where(lq == -np.inf, -np.inf, out)

    def local_sensitivity(self, logq: object) -> np.ndarray:
        """Alg. 3: LS(q) = max{β(B_U(q)) − β(q), β(q) − β(B_L(q))}, with q ← q₁ on [q₁, q₀]."""
        lq = np.asarray(logq, dtype=float)
        lq = np.where((lq >= self.log_q1) & (lq <= self.log_q0), self.log_q1, lq)
        b = self.beta(lq)
        return np.maximum(self.beta_up(self.log_bu(lq)) - b, b - self.beta(self.log_bl(lq)))

    @cached_property
    def plateau(self) -> float:
        """LS(q₁), the largest value of Alg. 3 (C6)."""
        return float(self.local_sensitivity(self.log_q1))


#: σ̂² − σ²: Prop. 7 at σ̂ = √(σ² + 1/6) bounds GNMax with discrete noise (:func:`discrete_q_sigma`)
DISCRETE_Q_EXTRA_VARIANCE = 1.0 / 6.0


def discrete_q_sigma(sigma: float) -> float:
    """σ̂ = √(σ² + 1/6), the σ at which Prop. 7's q̃ = Σ_{i≠i*} ½ erfc((n_{i*} − nᵢ)/(2σ̂)) bounds
    Pr[GNMax ≠ i*] for N_ℤ(0, σ²) noise with ties broken uniformly. That probability is at most
    Σ_{i≠i*} (Pr[D > gᵢ] + ½ Pr[D = gᵢ]), D = Z_i − Z_{i*} (union bound; a tie of s classes is lost with
    probability (s − 1)/s ≤ (s − 1)/2), and Pr[D > g] + ½ Pr[D = g] ≤ ½ erfc(g/(2σ̂)) for every integer
    g ≥ 0: checked numerically for σ from 0.3 to 100 at every g down to 10⁻³⁰⁰ (tests/test_interactive_gnmax.py),
    as App. B checks C5/C6, not proven. With σ itself the bound fails (4.7× at σ = 0.5, 1.035× at σ = 7.7)."""
    sigma = positive_value("sigma", sigma)
    return math.sqrt(sigma * sigma + DISCRETE_Q_EXTRA_VARIANCE)


@lru_cache(maxsize=256)
def gnmax_shape(sigma: float, order: float, classes: int, q_sigma: float | None = None) -> GnmaxShape:
    """:class:`GnmaxShape` at (σ, λ, m): q₀ is found on a fine grid of log q in [−10⁴, log ½] and refined by
    bisection: the first point where eq. 2 fails, reaches λ/σ², or decreases. ``q_sigma``: the σ̂ of q̃ and
    B_U / B_L (default σ; :func:`discrete_q_sigma` for discrete noise)."""
    sigma = positive_value("sigma", sigma)
    qs = sigma if q_sigma is None else positive_value("q_sigma", q_sigma)
    lam = order_value(order)
    m = count_value("classes", classes, 2)
    beta_star = lam / sigma**2
    grid = -np.exp(np.linspace(math.log(1e4), math.log(math.log(2.0)), 6000))

    def good(lq: np.ndarray) -> np.ndarray:
        return _thm6(lq, sigma, lam) < beta_star

    vals = _thm6(grid, sigma, lam)
    with np.errstate(invalid="ignore"):
        ok = (vals < beta_star) & np.concatenate([[True], np.diff(vals) >= 0])
    if ok[0] == 0:
        log_q0 = -math.inf
    elif ok.all():
        log_q0 = float(grid[-1])
    else:
        i = int(np.argmin(ok))  # first failure; grid[i-1] good
        lo, hi = float(grid[i - 1]), float(grid[i])
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if good(np.array(mid))[()] and _thm6(np.array(mid), sigma, lam)[()] >= vals[i - 1]:
                lo = mid
            else:
                hi = mid
        log_q0 = lo
    tmp = GnmaxShape(sigma, lam, m, log_q0, -math.inf, beta_star, q_sigma=qs)
    if log_q0 == -math.inf:
        return GnmaxShape(sigma, lam, m, log_q0, -math.inf, beta_star, False, q_sigma=qs)
    log_q1 = float(tmp.log_bl(log_q0))
    shape = GnmaxShape(sigma, lam, m, log_q0, log_q1, beta_star, q_sigma=qs)
    return GnmaxShape(sigma, lam, m, log_q0, log_q1, beta_star, _conditions_hold(shape), q_sigma=qs)


def discrete_gnmax_shape(sigma: float, order: float, classes: int, discrete: bool) -> GnmaxShape:
    """:func:`gnmax_shape` for GNMax with N_ℤ noise (``discrete``: q̃ at :func:`discrete_q_sigma`) or N."""
    return gnmax_shape(sigma, order, classes, discrete_q_sigma(sigma) if discrete else None)


def _conditions_hold(shape: GnmaxShape) -> bool:
    """C5 and C6 on 20 000 points of log q (log-spaced towards q₀, and linear over the last 2 of log q), to a
    tolerance of 1e-12 relative to β*; and q₀ ≤ ½, B_U(q₀) < 1 (C5)."""
    if shape.log_q0 > math.log(0.5) or float(shape.log_bu(shape.log_q0)) >= 0.0:
        return False
    tol = 1e-12 * shape.beta_star
    top = shape.log_q0
    far = top - np.exp(np.linspace(math.log(1e4), math.log(1e-9), 10000))
    near = np.linspace(top - 2.0, top, 10000)
    lq = np.unique(np.concatenate([far, near, [top]]))
    b = shape.beta(lq)
    if np.any(np.diff(b) < -tol):
        return False
    low = lq[lq <= shape.log_q1]
    delta = shape.beta(shape.log_bu(low)) - shape.beta(low)
    return bool(np.all(np.diff(delta) >= -tol))


def gnmax_sensitivity_at_distance(votes: object, shape: GnmaxShape, K: int) -> np.ndarray:
    """Alg. 4 for every d = 0..K: an upper bound A(d) on the local sensitivity (Alg. 3) of β(q(·)) over the
    histograms within d moves of ``votes``; non-decreasing in d.

    q in [q₁, q₀]: every A(d) is the plateau LS(q₁). q < q₁: the histogram n̄ + d·(−1, +1, 0, …) (sorted)
    has the largest q at distance d (C7); the walk stops once q ≥ q₁ (plateau after). q > q₀: the
    histogram with d votes moved from the runner-up to the top (re-sorted each move) has the smallest q;
    the walk stops once q ≤ q₀ or no runner-up vote is left (plateau after). The plateau is the global
    maximum of LS (C6), so filling with it is an upper bound."""
    K = count_value("K", K, 1)
    if not shape.conditions:
        raise InvalidParameter("sigma", f"App. B's conditions C5/C6 fail at σ = {shape.sigma:g}, order "
                               f"{shape.order:g}, {shape.classes} classes: no smooth sensitivity (choose a larger "
                               "σ or another order)", shape.sigma)
    n = np.sort(np.asarray(votes, dtype=float))[::-1].copy()
    plateau = shape.plateau
    A = np.full(K + 1, plateau)
    lq = float(log_q_tilde(n, shape.q_sigma))
    if shape.log_q1 <= lq <= shape.log_q0:
        return A
    path = [n.copy()]
    if lq < shape.log_q1:
        steps = int(n[0])
        d = np.arange(min(steps, K) + 1)
        hist = np.repeat(n[None, :], d.size, axis=0)
        hist[:, 0] -= d
        hist[:, 1] += d
        lqs = np.asarray(log_q_tilde(hist, shape.q_sigma))
        stop = np.flatnonzero(lqs >= shape.log_q1)
        end = int(stop[0]) if stop.size else d.size
        ls = shape.local_sensitivity(lqs[:end])
    else:
        cur = n.copy()
        for _ in range(K):
            if cur[1] <= 0:
                break
            cur = cur.copy()
            cur[0] += 1
            cur[1] -= 1
            cur[1:] = np.sort(cur[1:])[::-1]
            path.append(cur)
        lqs = np.asarray(log_q_tilde(np.array(path), shape.q_sigma))
        stop = np.flatnonzero(lqs <= shape.log_q0)
        end = int(stop[0]) if stop.size else lqs.size
        ls = shape.local_sensitivity(lqs[:end])
    A[: ls.size] = ls
    return np.maximum.accumulate(A)


@dataclass(frozen=True)
class ThresholdShape:
    """The threshold check's data-dependent cost f(M) for every top count M = 0..K and its exact
    sensitivity at distance ≤ d: A_M(d) = max_{|M′−M| ≤ d} max_{M″ = M′±1} |f(M″) − f(M′)|."""

    cost: np.ndarray  #: f(M), M = 0..K
    reach: np.ndarray  #: reach[M, d] = A_M(d), d = 0..K


@lru_cache(maxsize=64)
def threshold_shape(threshold: float, sigma1: float, order: float, K: int) -> ThresholdShape:
    """:class:`ThresholdShape` from :func:`darrm_opt.privacy.gnmax.rdp_threshold_check` (App. B.4's method
    applied to a one-dimensional statistic, enumerated exactly)."""
    K = count_value("K", K, 1)
    lam = order_value(order)
    f = np.array([float(rdp_threshold_check(M, threshold, sigma1, lam)) for M in range(K + 1)])
    return _threshold_reach(f)


#: the most integers a discrete Gaussian tail is summed over; beyond it the check is charged λ/(2σ₁²)
MAX_TAIL_GRID = 4_000_000


def discrete_gaussian_log_tail(j: object, sigma: float) -> np.ndarray:
    """log Pr[Z ≥ j] for Z ~ N_ℤ(0, σ²) (Pr[Z = z] ∝ e^{−z²/(2σ²)}) and integers j ≥ 1, rounded up:
    Σ_{z ≥ j} e^{−z²/(2σ²)} / Σ_z e^{−z²/(2σ²)} summed in logs over z ≤ max j + L and |z| ≤ L,
    L = ⌈40σ⌉ + 1 (the mass left out is below e^{−800} of the sum), plus a relative 1e-9 that covers the
    summation's rounding (the normaliser's truncation only makes the ratio larger)."""
    sigma = positive_value("sigma", sigma)
    jj = np.asarray(j, dtype=np.int64)
    if jj.size and int(jj.min()) < 1:
        raise InvalidParameter("j", "tails are taken at integers >= 1", int(jj.min()))
    L = math.ceil(40.0 * sigma) + 1
    hi = (int(jj.max()) if jj.size else 1) + L
    if hi + L > MAX_TAIL_GRID:
        raise InvalidParameter("sigma", f"the discrete Gaussian tail would be summed over more than "
                               f"{MAX_TAIL_GRID} integers", sigma)
    z = np.arange(-L, hi + 1, dtype=float)
    w = -(z * z) / (2.0 * sigma * sigma)
    log_norm = float(special.logsumexp(w[: 2 * L + 1]))
    # tail[i] = log Σ_{z ≥ z_i} e^{w(z)}, by a reverse cumulative log-sum-exp
    tail = np.logaddexp.accumulate(w[::-1])[::-1]
    return tail[jj + L] - log_norm + 1e-9


@lru_cache(maxsize=64)
def discrete_threshold_shape(threshold: float, sigma1: float, order: float, K: int) -> ThresholdShape:
    """:class:`ThresholdShape` of the check "i + Z ≥ T", Z ~ N_ℤ(0, σ₁²), on an integer statistic i ∈ 0..K
    that moves by at most 1 between neighbours (as the ledger's answer path draws it; Interactive-GNMax's
    :func:`interactive_check_statistic`). Z integer, so it passes iff Z ≥ k = ⌈T⌉ − i; the likely outcome is
    the more probable one, q̃(i) = min(Pr[Z ≥ k], Pr[Z ≤ k − 1]) = Pr[Z ≥ max(k, 1 − k)] (symmetry), exact
    for the discrete law (:func:`discrete_gaussian_log_tail`), and f(i) = Thm. 6 (eq. 2, Prop. 10's orders)
    at q̃(i) for the (μ, μ/(2σ₁²))-RDP check (N_ℤ noise on a sensitivity-1 integer: Canonne, Kamath &
    Steinke 2020, Prop. 5), capped at λ/(2σ₁²). Where the tail would need more than MAX_TAIL_GRID terms
    f ≡ λ/(2σ₁²), the data-independent cost (no sensitivity)."""
    K = count_value("K", K, 1)
    lam = order_value(order)
    sigma1 = positive_value("sigma1", sigma1)
    c = math.ceil(float(threshold))
    k = c - np.arange(K + 1)
    j = np.maximum(k, 1 - k)
    cap = lam / (2.0 * sigma1**2)
    try:
        logq = discrete_gaussian_log_tail(j, sigma1)
        f = np.array([float(rdp_data_dependent_from_log_q(min(float(x), 0.0), lam, math.sqrt(2.0) * sigma1))
                      for x in logq])
        f = np.minimum(f, cap)
    except InvalidParameter:
        f = np.full(K + 1, cap)
    return _threshold_reach(f)


def _threshold_reach(f: np.ndarray) -> ThresholdShape:
    """A one-dimensional statistic's cost f(0..K) and its exact sensitivity at distance ≤ d."""
    K = f.size - 1
    step = np.abs(np.diff(f))
    ls = np.zeros(K + 1)
    ls[:-1] = step
    ls[1:] = np.maximum(ls[1:], step)
    reach = np.empty((K + 1, K + 1))
    reach[:, 0] = ls
    for d in range(1, K + 1):
        prev = reach[:, d - 1]
        reach[:, d] = np.maximum(prev, np.maximum(np.r_[prev[1:], prev[-1]], np.r_[prev[0], prev[:-1]]))
    return ThresholdShape(f, reach)


def _renyi(P: Sequence[float], Q: Sequence[float], n: Sequence[float], lam: float) -> float:
    """D_λ(P‖Q) = 1/(λ−1) log Σ_grp n_grp P^λ Q^{1−λ} over groups of equal laws (inf if Q = 0 < P)."""
    terms = []
    for p, q, k in zip(P, Q, n, strict=True):
        if k == 0 or p == 0:
            continue
        if q == 0:
            return math.inf
        terms.append(math.log(k) + lam * math.log(p) + (1.0 - lam) * math.log(q))
    return max(0.0, float(special.logsumexp(terms)) / (lam - 1.0)) if terms else 0.0


@dataclass(frozen=True)
class TableShape:
    """A γ table's exact data-dependent RDP per state and its sensitivity at distance ≤ d.

    ``states``: (g, t) with index g for a unique top (t = 1, g ≥ 1) and the ties (0, t); ``cost[s]``: the
    max over neighbouring pair types at s (both orders) of D_λ; ``reach[s, d]`` = max of the local
    sensitivity over states within d edges of the pair-type graph (a histogram d moves away is at most d
    edges away, so this is an upper bound on Alg. 4's quantity, and β-smooth by the triangle inequality)."""

    K: int
    C: int
    order: float
    states: tuple[tuple[int, int], ...]
    cost: np.ndarray
    reach: np.ndarray

    def state(self, votes: object) -> int:
        from darrm_opt.model.multiclass import top_structure

        h = np.asarray(votes, dtype=np.int64)
        if h.shape != (self.C,) or int(h.sum()) != self.K or np.any(h < 0):
            raise InvalidParameter("votes", f"must be {self.C} non-negative counts summing to K = {self.K}", votes)
        g, T = top_structure(h)
        return self.states.index((g, len(T)))


def table_shape(K: int, C: int, gamma: Sequence[float], order: float) -> TableShape:
    """:class:`TableShape` of a multi-class γ table (MC-1) at order λ; raises InvalidParameter when a
    reachable state has infinite RDP (e.g. γ = 1 where the top set can change)."""
    from darrm_opt.model.multiclass import pair_types

    K = count_value("K", K, 1)
    C = count_value("classes", C, 2)
    lam = order_value(order)
    g = np.asarray(gamma, dtype=float)
    if g.shape != (K + 1,) or np.any(~np.isfinite(g)) or np.any(g < 0) or np.any(g > 1):
        raise InvalidParameter("gamma", f"must be K + 1 = {K + 1} values in [0, 1]", gamma)
    types = pair_types(K, C)
    states: list[tuple[int, int]] = []
    for pt in types:
        for s in ((pt.g, pt.t), (pt.g2, pt.t2)):
            if s not in states:
                states.append(s)
    states.sort()
    idx = {s: i for i, s in enumerate(states)}
    cost = np.zeros(len(states))
    adj: list[set[int]] = [set() for _ in states]
    for pt in types:
        for a in (pt, pt.reversed()):
            n, inT, inT2 = a.groups(C)
            P = [(1.0 - g[a.g]) / C + (g[a.g] / a.t if x else 0.0) for x in inT.tolist()]
            Q = [(1.0 - g[a.g2]) / C + (g[a.g2] / a.t2 if x else 0.0) for x in inT2.tolist()]
            i, j = idx[(a.g, a.t)], idx[(a.g2, a.t2)]
            d = max(_renyi(P, Q, n.tolist(), lam), _renyi(Q, P, n.tolist(), lam))
            if not math.isfinite(d):
                raise InvalidParameter("gamma", "the table has infinite Rényi divergence on a neighbouring pair "
                                       f"({a}); data-dependent RDP needs γ < 1 there", float(g[a.g]))
            cost[i] = max(cost[i], d)
            cost[j] = max(cost[j], d)
            adj[i].add(j)
            adj[j].add(i)
    ls = np.zeros(len(states))
    for i in range(len(states)):
        for j in adj[i]:
            ls[i] = max(ls[i], abs(cost[i] - cost[j]))
    S = len(states)
    reach = np.empty((S, K + 1))
    reach[:, 0] = ls
    for d in range(1, K + 1):
        prev = reach[:, d - 1]
        reach[:, d] = [max([prev[i]] + [prev[j] for j in adj[i]]) for i in range(S)]
    return TableShape(K, C, lam, tuple(states), cost, reach)
