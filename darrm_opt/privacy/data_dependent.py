"""Data-dependent Rényi-DP of vote aggregators and the smooth-sensitivity release of its ε (PATE, App. B).

References are to Papernot et al., "Scalable private learning with PATE" (ICLR 2018), *PATE* below. The
per-query formulas (Prop. 7's q̃, Thm. 6's eq. 2 with Prop. 10's orders, the threshold check's cost,
Thm. 5's conversion) are :mod:`darrm_opt.privacy.gnmax`; this module adds what a data-dependent account
needs on top of them, at one fixed Rényi order λ:

* **the shaped per-query cost** β(q) (C5): the Thm.-6 bound where it applies and lies below the
  data-independent λ/σ² (Prop. 8), for q ≤ q₀; β* = λ/σ² for q > q₀. β(q) ≥ the per-query RDP bound
  everywhere, so Σ β(q(n̄ᵢ)) is a valid data-dependent RDP of the answered queries (Thm. 4).
  q₀ is the first log q at which eq. 2 stops applying, reaches λ/σ², or stops increasing.
* **Confident-GNMax with real abstention** (Alg. 1): every query pays the threshold check's data-dependent
  cost (a function of its top count), the GNMax step only when it was answered (the answered set is
  released, so it is public).
* **γ tables** (multi-class DaRRM, :mod:`darrm_opt.model.multiclass`): the output law depends on the
  histogram only through its state s = (gap g, top-set size t), so the data-dependent RDP at order λ is
  f(s) = max over the neighbouring pair types at s (both orders) of
  D_λ(P‖P′) = 1/(λ−1) log Σ_c P(c)^λ P′(c)^{1−λ}. It is finite iff P′ > 0 wherever P > 0 on every
  pair, e.g. whenever γ < 1. f(s) is exact per state: the largest data-dependent RDP of the histograms in
  state s (tested by brute force). (PATE's Prop. 7 union bound is not needed: q̃ = (1 − γ(g))(1 − 1/C).)
* **smooth sensitivity** (Def. 12, Alg. 3–5, Thm. 24): for GNMax, B_U / B_L (App. B.1) bound q at a
  neighbour; Alg. 3 bounds the local sensitivity; Alg. 4 walks the histogram d moves towards the largest
  local sensitivity; Thm. 24 adds the per-query maxima at distance ≤ d, and Alg. 5 takes
  SS_β = max_d e^{−βd} Σᵢ Aᵢ(d). For the threshold check (a function of the top count M, which moves by
  ≤ 1 per move) and for γ tables (a function of the state, whose neighbour graph is the pair types),
  the local sensitivity and its maximum at distance ≤ d are computed exactly by enumeration.
* **the GNSS release** (Def. 22, Thm. 23): publish f(D) + SS_β(D)·N(0, σ_SS²); it is
  (λ, λe^{2β}/σ_SS² + (βλ − ½ log(1 − 2λβ))/(λ − 1))-RDP for 1 < λ < 1/(2β). The published ε is
  ε̂ = f(D) + Z·σ_SS·SS_β(D) + ε_GNSS(λ) + log(1/δ)/(λ − 1) (Thm. 5; PATE's Table 2 divides by λ).

What ε̂ means: the data-dependent RDP is a bound for *this* dataset only (its neighbours may have a larger
one); ε̂ is a noisy, differentially private estimate of that bound plus the fixed cost of releasing it,
not a worst-case guarantee (docs/data-dependent.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

import numpy as np
from scipy import special

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.gnmax import log_q_tilde, rdp_data_dependent_from_log_q, rdp_threshold_check

__all__ = [
    "GnmaxShape",
    "gnmax_shape",
    "discrete_gnmax_shape",
    "discrete_q_sigma",
    "gnmax_sensitivity_at_distance",
    "ThresholdShape",
    "threshold_shape",
    "TableShape",
    "table_shape",
    "smooth_sensitivity",
    "gnss_rdp",
    "DataDependentAccount",
    "account_confident_gnmax",
    "account_gnmax",
    "account_table",
    "account_interactive_gnmax",
    "interactive_gnmax",
    "interactive_statistic",
    "interactive_check_statistic",
    "student_probabilities",
    "discrete_gaussian_log_tail",
    "discrete_threshold_shape",
    "sanitised_epsilon",
    "sample_gnss_noise",
    "CONVERSIONS",
    "dp_tail",
]

#: RDP → (ε, δ) conversions: PATE's Thm. 5, and the tighter one of Canonne, Kamath & Steinke (2020, Prop. 12)
CONVERSIONS = ("thm5", "improved")


def _order(lam: object) -> float:
    try:
        x = float(lam)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameter("order", "must be a number > 1", lam) from None
    if not (math.isfinite(x) and x > 1.0):
        raise InvalidParameter("order", "must be a finite number > 1", lam)
    return x


def _positive(name: str, value: object) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameter(name, "must be a finite number > 0", value) from None
    if not (math.isfinite(x) and x > 0.0):
        raise InvalidParameter(name, "must be a finite number > 0", value)
    return x


def _count(name: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise InvalidParameter(name, f"must be an integer >= {low}", value)
    return int(value)


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 − e^x) for x < 0 (Mächler 2012)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


# --------------------------------------------------------------------------------------------------
# GNMax: β(q), q₀, B_U / B_L, Alg. 3 and Alg. 4
# --------------------------------------------------------------------------------------------------


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
    sigma = _positive("sigma", sigma)
    return math.sqrt(sigma * sigma + DISCRETE_Q_EXTRA_VARIANCE)


@lru_cache(maxsize=256)
def gnmax_shape(sigma: float, order: float, classes: int, q_sigma: float | None = None) -> GnmaxShape:
    """:class:`GnmaxShape` at (σ, λ, m): q₀ is found on a fine grid of log q in [−10⁴, log ½] and refined by
    bisection: the first point where eq. 2 fails, reaches λ/σ², or decreases. ``q_sigma``: the σ̂ of q̃ and
    B_U / B_L (default σ; :func:`discrete_q_sigma` for discrete noise)."""
    sigma = _positive("sigma", sigma)
    qs = sigma if q_sigma is None else _positive("q_sigma", q_sigma)
    lam = _order(order)
    m = _count("classes", classes, 2)
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
    K = _count("K", K, 1)
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


# --------------------------------------------------------------------------------------------------
# the threshold check of Confident-GNMax: a function of the top count
# --------------------------------------------------------------------------------------------------


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
    K = _count("K", K, 1)
    lam = _order(order)
    f = np.array([float(rdp_threshold_check(M, threshold, sigma1, lam)) for M in range(K + 1)])
    return _threshold_reach(f)


#: the most integers a discrete Gaussian tail is summed over; beyond it the check is charged λ/(2σ₁²)
MAX_TAIL_GRID = 4_000_000


def discrete_gaussian_log_tail(j: object, sigma: float) -> np.ndarray:
    """log Pr[Z ≥ j] for Z ~ N_ℤ(0, σ²) (Pr[Z = z] ∝ e^{−z²/(2σ²)}) and integers j ≥ 1, rounded up:
    Σ_{z ≥ j} e^{−z²/(2σ²)} / Σ_z e^{−z²/(2σ²)} summed in logs over z ≤ max j + L and |z| ≤ L,
    L = ⌈40σ⌉ + 1 (the mass left out is below e^{−800} of the sum), plus a relative 1e-9 that covers the
    summation's rounding (the normaliser's truncation only makes the ratio larger)."""
    sigma = _positive("sigma", sigma)
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
    K = _count("K", K, 1)
    lam = _order(order)
    sigma1 = _positive("sigma1", sigma1)
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


# --------------------------------------------------------------------------------------------------
# γ tables (multi-class DaRRM)
# --------------------------------------------------------------------------------------------------


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

    K = _count("K", K, 1)
    C = _count("classes", C, 2)
    lam = _order(order)
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


# --------------------------------------------------------------------------------------------------
# Alg. 5 / Thm. 24, Thm. 23 and the sanitised ε
# --------------------------------------------------------------------------------------------------


def smooth_sensitivity(reach_sum: object, beta: float) -> float:
    """Alg. 5 with Thm. 24: SS_β = max_d e^{−βd} · Σᵢ Aᵢ(d), given the summed A(d) for d = 0, 1, …"""
    beta = _positive("beta", beta)
    a = np.asarray(reach_sum, dtype=float)
    if a.ndim != 1 or a.size == 0 or np.any(~np.isfinite(a)) or np.any(a < 0):
        raise InvalidParameter("reach_sum", "must be a non-empty vector of non-negative numbers", reach_sum)
    return float(np.max(a * np.exp(-beta * np.arange(a.size))))


def gnss_rdp(order: float, beta: float, sigma_ss: float) -> float:
    """Thm. 23: the (β, σ)-GNSS mechanism is (λ, λe^{2β}/σ² + (βλ − ½ log(1 − 2λβ))/(λ − 1))-RDP for
    1 < λ < 1/(2β). Example: λ = 14, β = 0.0329, σ = 6.23 → 0.5185 (PATE Table 2: 0.52)."""
    lam = _order(order)
    beta = _positive("beta", beta)
    s = _positive("sigma_ss", sigma_ss)
    if not lam < 1.0 / (2.0 * beta):
        raise InvalidParameter("beta", f"Thm. 23 needs order < 1/(2β) = {1 / (2 * beta):.6g}", beta)
    return lam * math.exp(2.0 * beta) / s**2 + (beta * lam - 0.5 * math.log1p(-2.0 * lam * beta)) / (lam - 1.0)


@dataclass(frozen=True)
class DataDependentAccount:
    """The private data-dependent state of a run of queries at one order: ``rdp`` = Σ of the per-query
    data-dependent RDP (Thm. 4), ``reach`` = Σᵢ Aᵢ(d) for d = 0..K (Thm. 24), ``answered`` the count.
    Never published as is: :func:`sanitised_epsilon` is its release."""

    order: float
    rdp: float
    reach: np.ndarray
    answered: int
    queries: int

    def smooth_sensitivity(self, beta: float) -> float:
        return smooth_sensitivity(self.reach, beta)


def discrete_gnmax_shape(sigma: float, order: float, classes: int, discrete: bool) -> GnmaxShape:
    """:func:`gnmax_shape` for GNMax with N_ℤ noise (``discrete``: q̃ at :func:`discrete_q_sigma`) or N."""
    return gnmax_shape(sigma, order, classes, discrete_q_sigma(sigma) if discrete else None)


def account_gnmax(votes: object, sigma: float, order: float, K: int, discrete: bool = False) -> DataDependentAccount:
    """Every histogram (rows of ``votes``, shape (Q, m)) answered by GNMax at σ; ``discrete``: with N_ℤ noise
    (q̃ and its neighbour bounds at :func:`discrete_q_sigma`), else with N(0, σ²) noise."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2 or n.shape[1] < 2:
        raise InvalidParameter("votes", "must have shape (queries, classes >= 2)", n.shape)
    shape = discrete_gnmax_shape(float(sigma), float(order), n.shape[1], discrete)
    rdp = float(np.sum(shape.beta(log_q_tilde(n, shape.q_sigma)))) if n.shape[0] else 0.0
    reach = np.zeros(K + 1)
    for row in n:
        reach += gnmax_sensitivity_at_distance(row, shape, K)
    return DataDependentAccount(shape.order, rdp, reach, n.shape[0], n.shape[0])


def account_confident_gnmax(votes: object, answered: object, threshold: float, sigma1: float, sigma2: float,
                            order: float, K: int, weights: object | None = None,
                            discrete: bool = False) -> DataDependentAccount:
    """Confident-GNMax (Alg. 1) with real abstention: the threshold check's cost on every query, GNMax's
    (at σ₂) only on the answered ones (``answered``: a boolean per query, public since ⊥ is released).
    ``weights`` (default: ``answered``) may instead weigh the GNMax part by Pr[answered], which gives
    the expectation over the first step's coins that PATE's Table 2 reports. ``discrete``: the answers drew
    N_ℤ noise (the check: :func:`discrete_threshold_shape` at i = the top count; GNMax: q̃ at
    :func:`discrete_q_sigma`), else N noise (:func:`threshold_shape`)."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2 or n.shape[1] < 2:
        raise InvalidParameter("votes", "must have shape (queries, classes >= 2)", n.shape)
    ans = np.asarray(answered, dtype=bool)
    if ans.shape != (n.shape[0],):
        raise InvalidParameter("answered", "must hold one boolean per query", ans.shape)
    w = ans.astype(float) if weights is None else np.asarray(weights, dtype=float)
    th = (discrete_threshold_shape if discrete else threshold_shape)(float(threshold), float(sigma1), float(order),
                                                                    int(K))
    top = np.clip(np.rint(n.max(axis=1)).astype(int), 0, K)
    shape = discrete_gnmax_shape(float(sigma2), float(order), n.shape[1], discrete)
    rdp = float(th.cost[top].sum())
    reach = th.reach[top].sum(axis=0) if n.shape[0] else np.zeros(K + 1)
    for i in np.flatnonzero(w > 0):
        rdp += float(w[i] * shape.beta(log_q_tilde(n[i], shape.q_sigma)))
        reach = reach + w[i] * gnmax_sensitivity_at_distance(n[i], shape, K)
    return DataDependentAccount(shape.order, rdp, reach, int(ans.sum()), n.shape[0])


def student_probabilities(student: object, queries: int, classes: int) -> np.ndarray:
    """The student's class probabilities (PATE Alg. 2, line 1), one vector of ``classes`` per query, checked:
    finite, non-negative, each summing to 1 within 1e-9; InvalidParameter naming ``student`` otherwise."""
    try:
        p = np.asarray(student, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameter("student", "must be one probability vector per query", None) from None
    if p.shape != (queries, classes):
        raise InvalidParameter("student", f"must hold one probability vector of {classes} classes per query "
                               f"({queries} queries)", list(p.shape))
    if np.any(~np.isfinite(p)) or np.any(p < 0):
        raise InvalidParameter("student", "probabilities must be finite and non-negative", None)
    bad = np.flatnonzero(np.abs(p.sum(axis=1) - 1.0) > 1e-9)
    if bad.size:
        raise InvalidParameter("student", f"every probability vector must sum to 1 (query {int(bad[0])} sums to "
                               f"{float(p[bad[0]].sum())!r})", None)
    return p


def interactive_statistic(votes: object, student: object, K: int) -> np.ndarray:
    """Interactive-GNMax's check statistic (PATE Alg. 2, line 2): s = max_j (n_j − K·p_j), per query.
    One teacher's vote moving from class a to b moves n_a and n_b by one and no p_j (the student's
    predictions are public), so every term, and s, moves by at most 1: a sensitivity-1 Gaussian check.
    Σ_j (n_j − K p_j) = 0, so s ∈ [0, K]."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2:
        raise InvalidParameter("votes", "must have shape (queries, classes)", n.shape)
    p = student_probabilities(student, n.shape[0], n.shape[1])
    return np.max(n - K * p, axis=1)


def interactive_check_statistic(votes: object, student: object, threshold: float, K: int) -> np.ndarray:
    """The integer statistic the ledger's Interactive-GNMax check draws on: i = clip(⌈T⌉ − ⌈T − s⌉, 0, K),
    s = max_j (n_j − K p_j) computed exactly (the floats p_j and T as rationals). For Z ~ N_ℤ(0, σ₁²),
    s + Z ≥ T ⟺ Z ≥ ⌈T − s⌉ ⟺ i + Z ≥ ⌈T⌉ (s ∈ [0, K] puts i in 0..K; the clip only absorbs the 1e-9 slack
    of Σ p = 1). s moves by ≤ 1 between neighbours, ⌈·⌉ is monotone and the clip 1-Lipschitz, so i moves by
    ≤ 1: :func:`discrete_threshold_shape` prices the check."""
    n = np.asarray(votes, dtype=np.int64)
    if n.ndim != 2:
        raise InvalidParameter("votes", "must have shape (queries, classes)", n.shape)
    p = student_probabilities(student, n.shape[0], n.shape[1])
    T = Fraction(float(threshold))
    c = math.ceil(T)
    out = np.empty(n.shape[0], dtype=np.int64)
    for q in range(n.shape[0]):
        s = max(Fraction(int(n[q, j])) - K * Fraction(float(p[q, j])) for j in range(n.shape[1]))
        out[q] = min(max(c - math.ceil(T - s), 0), K)
    return out


def interactive_gnmax(votes: object, student: object, confidence: float, threshold: float, sigma1: float,
                      sigma2: float, K: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Interactive-GNMax (PATE Alg. 2), simulated with ``rng`` (numpy; for experiments, not for a release):
    if s + N(0, σ₁²) ≥ T the teachers answer by GNMax at σ₂; else if max_j p_j > ``confidence`` the
    student's own argmax is returned (reinforced, no vote read); else ⊥. Returns (labels, -1 for ⊥;
    ``answered``: which the teachers answered), the outcome :func:`account_interactive_gnmax` needs."""
    conf = _positive("confidence", confidence)
    s = interactive_statistic(votes, student, K)
    n = np.asarray(votes, dtype=float)
    p = np.asarray(student, dtype=float)
    answered = s + rng.normal(0.0, _positive("sigma1", sigma1), size=s.shape) >= float(threshold)
    teachers = np.argmax(n + rng.normal(0.0, _positive("sigma2", sigma2), size=n.shape), axis=1)
    labels = np.where(answered, teachers, np.where(p.max(axis=1) > conf, np.argmax(p, axis=1), -1))
    return labels.astype(np.int64), answered


def account_interactive_gnmax(votes: object, answered: object, sigma1: float, sigma2: float, order: float,
                              K: int, student: object | None = None, threshold: float | None = None,
                              discrete: bool = False) -> DataDependentAccount:
    """Interactive-GNMax (Alg. 2): the check is paid on every query, GNMax at σ₂ (data-dependently) only on the
    queries the teachers answered; reinforcing the student or ⊥ reads no votes and costs nothing more.
    ``answered`` is public (the student sees the source). The check's cost: with the student's
    probabilities (and T), as the Confident check on the student-relative statistic (PATE Sec. 4.3), the
    exact discrete-noise data-dependent cost f(i) of :func:`discrete_threshold_shape` at
    i = :func:`interactive_check_statistic`, with its sensitivity; without them, its data-independent
    λ/(2σ₁²) (no sensitivity), an upper bound of the former. ``discrete``: GNMax drew N_ℤ noise
    (q̃ at :func:`discrete_q_sigma`)."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2 or n.shape[1] < 2:
        raise InvalidParameter("votes", "must have shape (queries, classes >= 2)", n.shape)
    ans = np.asarray(answered, dtype=bool)
    if ans.shape != (n.shape[0],):
        raise InvalidParameter("answered", "must hold one boolean per query", ans.shape)
    lam = _order(order)
    s1 = _positive("sigma1", sigma1)
    reach = np.zeros(K + 1)
    if student is None:
        check = n.shape[0] * lam / (2.0 * s1**2)
    else:
        if threshold is None:
            raise InvalidParameter("threshold", "the check's data-dependent cost needs T", None)
        th = discrete_threshold_shape(float(threshold), s1, lam, int(K))
        i = interactive_check_statistic(n.astype(np.int64), student, float(threshold), int(K))
        check = float(th.cost[i].sum())
        reach = th.reach[i].sum(axis=0) if i.size else reach
    g = (account_gnmax(n[ans], sigma2, lam, K, discrete) if ans.any()
         else DataDependentAccount(lam, 0.0, np.zeros(K + 1), 0, 0))
    return DataDependentAccount(lam, check + g.rdp, reach + g.reach, int(ans.sum()), n.shape[0])


def account_table(votes: object, shape: TableShape) -> DataDependentAccount:
    """Every histogram answered by the γ table of ``shape``."""
    n = np.asarray(votes)
    if n.ndim != 2:
        raise InvalidParameter("votes", "must have shape (queries, classes)", n.shape)
    s = [shape.state(row) for row in n]
    return DataDependentAccount(shape.order, float(shape.cost[s].sum()), shape.reach[s].sum(axis=0),
                                len(s), len(s))


def dp_tail(order: float, delta: float, conversion: str = "thm5") -> float:
    """What (λ, ε_RDP)-RDP adds to reach (ε, δ)-DP: ``thm5`` (PATE Thm. 5) log(1/δ)/(λ − 1); ``improved``
    (Canonne, Kamath & Steinke 2020, Prop. 12; ``dp_accounting.rdp.compute_epsilon``)
    log(1 − 1/λ) − (log δ + log λ)/(λ − 1)."""
    lam = _order(order)
    d = float(delta) if isinstance(delta, (int, float)) and not isinstance(delta, bool) else math.nan
    if not 0.0 < d < 1.0:
        raise InvalidParameter("delta", "must satisfy 0 < delta < 1", delta)
    if conversion == "thm5":
        return math.log(1.0 / d) / (lam - 1.0)
    if conversion == "improved":
        return math.log1p(-1.0 / lam) - (math.log(d) + math.log(lam)) / (lam - 1.0)
    raise InvalidParameter("conversion", f"must be one of {', '.join(CONVERSIONS)}", conversion)


def sanitised_epsilon(rdp: float, ss: float, z: float, order: float, beta: float, sigma_ss: float,
                      delta: float, conversion: str = "thm5") -> float:
    """The published ε (Thm. 23 + the conversion): rdp + z·σ_SS·SS + ε_GNSS(λ) + :func:`dp_tail`, z ~ N(0, 1)."""
    return rdp + z * sigma_ss * ss + gnss_rdp(order, beta, sigma_ss) + dp_tail(order, delta, conversion)


def sample_gnss_noise(mean: float, scale: float, grid: float, random_bytes) -> float:  # noqa: ANN001
    """mean + scale·Z, Z ~ N(0, 1), rounded to the nearest multiple of ``grid`` (post-processing), drawn
    exactly up to 2⁻¹²⁸: a 128-bit uniform U from ``random_bytes`` (a CSPRNG) and the cell k with
    F(k − ½) ≤ U < F(k + ½), F the Gaussian CDF on the grid, found by bisection in 60-digit arithmetic.
    No float Gaussian is drawn, so the low bits carry nothing about ``mean``."""
    import mpmath

    scale = _positive("scale", scale)
    grid = _positive("grid", grid)
    u = Fraction(int.from_bytes(random_bytes(16), "big"), 1 << 128)
    with mpmath.workdps(60):
        U = mpmath.mpf(u.numerator) / u.denominator
        mu, s, h = mpmath.mpf(mean), mpmath.mpf(scale), mpmath.mpf(grid)

        def F(k: int) -> mpmath.mpf:  # Pr[output ≤ k·h] = Φ(((k + ½)h − μ)/s)
            return mpmath.ncdf(((k + mpmath.mpf(0.5)) * h - mu) / s)

        c = int(mpmath.nint(mu / h))
        span = int(mpmath.ceil(40 * s / h)) + 2
        lo, hi = c - span, c + span  # F(lo) < U ≤ F(hi) but for mass < e^{-800}
        if F(lo) >= U:
            return float(lo * h)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if F(mid) >= U:
                hi = mid
            else:
                lo = mid
        return float(hi * grid)
