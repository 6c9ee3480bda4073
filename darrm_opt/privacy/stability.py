"""Stability-based release with a sparse-vector test: distance to instability, its (ε, δ), its exact error.

Bassily, Thakkar, Thakurta, "Model-Agnostic Private Learning" (NeurIPS 2018), in the manner of
propose-test-release: per query, the distance to instability d of the vote histogram is tested by the sparse
vector technique (AboveThreshold with a cut-off c); a stable query releases the exact plurality, an unstable
one releases ⊥ and is counted, and after c unstable queries the job answers ⊥ without looking at the votes.

**The plurality and its distance to instability.** For a histogram h of K votes over C classes (C = 2: 0/1
votes, h = (K − L, L)), f(h) is the unique plurality class, or "tie" when several classes share the top
count (the product breaks such a tie uniformly at random; as a value of f it is one outcome). One record
changes one teacher's vote, so neighbouring histograms are h′ = h − e_a + e_b. The unstable set is
U = {h : some neighbour h′ has f(h′) ≠ f(h)} and

    d(h) = min { k : some h′ at k vote changes from h lies in U },   d(h) = max(0, ⌈g/2⌉ − 1),

with g = h₍₁₎ − h₍₂₎ the top gap (0 for a tie): one change lowers g by at most 2 (the top loses at most one
vote, the runner-up gains at most one), a unique top stays unique and the same at its neighbours iff g ≥ 3,
and ties are unstable (a vote moved between two tied classes breaks the tie). Hence (checked by brute force
in the tests): d is 1-Lipschitz under the neighbour relation (a distance to a set), and d(h) ≥ 1 implies
f(h′) = f(h) at every neighbour h′ (h ∉ U).

**The test** (Lyu, Su, Li 2017, "Understanding the Sparse Vector Technique", Alg. 1, on an integer lattice):
scores are s·d (a lattice scale s ≥ 1, sensitivity s), the threshold noise ρ ~ DLap(t_ρ), one query noise
ν_i ~ DLap(t_ν) per query (DLap(t): Pr[x] ∝ exp(−|x|/t) on ℤ, t a positive integer), and query i is
*unstable* iff s·d_i + ν_i ≤ T + ρ. Theorem (docs/maths.md, "Stability-based release"): the whole job, any
number of queries, adaptively chosen, is (ε, δ)-DP with

    ε = s/t_ρ + 2c·s/t_ν,
    δ = E_ρ[1 − (1 − Pr[ν > T + ρ])^{min(c, Q)}] = Σ_z Pr[ρ = z]·(1 − Pr[ν ≤ T + z]^{min(c, Q)}),

ε from the SVT (a pure-DP bound, unchanged by the release of f on stable queries) and δ bounding the
probability, on the worst dataset, that some query with d = 0 passes the test (the only event on which the
released pluralities may differ between neighbours).

**Exact expected error** of a job of Q i.i.d. queries under a prior (⊥ counted as an error): with the law of
d (``mass[d]``) and the probability of a wrong released plurality (``wrong[d]``), for each threshold noise z
the per-query unstable probability u(z) = Σ_d mass[d]·Pr[ν ≤ T + z − s·d] and wrong-and-stable probability
w(z) = Σ_d wrong[d]·Pr[ν > T + z − s·d] give, with A_i(z) = Pr[Bin(i − 1, u(z)) ≤ c − 1] (the job still runs
at query i),

    error = (1/Q) Σ_z Pr[ρ = z] Σ_{i=1..Q} [(1 − A_i(z)) + A_i(z)·(u(z) + w(z))],

a finite sum over the support of ρ (the part of ρ's law beyond it, whose error is at most 1, is added).

**The GNMax fallback** (docs/maths.md, "Stability-based release with a GNMax fallback"): an unstable query
before the cut-off is answered by GNMax at σ (argmax of h + N_ℤ(0, σ²) per class) instead of ⊥. With (P, Q)
one GNMax answer's dominating pair (:class:`~darrm_opt.privacy.gaussian_profile.GaussianProfile` (σ, (1, 1)))
and δ_G(ε′) the hockey-stick divergence of (P, Q)^c at e^{ε′}, the job is (ε, δ)-DP for every ε ≥ ε_svt with

    δ(ε) = e^{ε_svt}·δ_G(ε − ε_svt) + δ_PTR,

stated at the one point ε = ε_svt + ε_G (:func:`fallback_statement`). Its error: in the term of a query the
job reaches, u(z) becomes g(z) = Σ_d gw[d]·Pr[ν ≤ T + z − s·d], gw[d] = Pr[d(h) = d, GNMax_σ(h) wrong]
(:func:`binary_fallback_wrong`), and every query the job reaches is answered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter

#: relative margin added to a δ summed in float64 (every term non-negative with relative error far below it)
DELTA_MARGIN = 1e-9
#: ρ's law is summed over |z| ≤ TAIL·t_ρ; the mass beyond, exp(−TAIL)·2/(1 + q) at most, is added as error
TAIL = 120.0
#: the error sums ρ's law over |z| ≤ reach·t_ρ for the first reach of these whose tail is below 1e-3 of the error
ERROR_TAILS = (40.0, 80.0, 160.0, 700.0)
#: the largest lattice scale, noise scale and threshold accepted (keeps every score an int64)
MAX_INT = 1 << 40


# ------------------------------------------------------------------------------------------------------
# Distance to instability
# ------------------------------------------------------------------------------------------------------
def top_gap(h: Sequence[int] | np.ndarray) -> int:
    """g = h₍₁₎ − h₍₂₎ (0 for a tie at the top) of a histogram of C ≥ 2 counts."""
    a = np.sort(np.asarray(h, dtype=np.int64))
    return int(a[-1] - a[-2])


def distance_from_gap(g: int | np.ndarray) -> Any:
    """d = max(0, ⌈g/2⌉ − 1) for a top gap g ≥ 0 (module docstring)."""
    g = np.asarray(g, dtype=np.int64)
    d = np.maximum(0, (g + 1) // 2 - 1)
    return int(d) if d.ndim == 0 else d


def instability_distance(h: Sequence[int] | np.ndarray) -> int:
    """The distance to instability d(h) of a vote histogram (module docstring): the least number of votes
    whose change reaches a histogram at which one more change can change the plurality (or the tie)."""
    return int(distance_from_gap(top_gap(h)))


def plurality(h: Sequence[int] | np.ndarray) -> int | None:
    """f(h): the unique plurality class, or None for a tie at the top."""
    a = np.asarray(h, dtype=np.int64)
    top = np.flatnonzero(a == a.max())
    return int(top[0]) if top.size == 1 else None


# ------------------------------------------------------------------------------------------------------
# The discrete Laplace DLap(t), Pr[x] = (1 − q)/(1 + q)·q^|x|, q = exp(−1/t)
# ------------------------------------------------------------------------------------------------------
def dlap_pmf(t: int, x: np.ndarray) -> np.ndarray:
    """Pr[X = x] for X ~ DLap(t)."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    return (-math.expm1(-1.0 / t)) / (1.0 + math.exp(-1.0 / t)) * np.exp(-x / t)


def dlap_cdf(t: int, x: np.ndarray) -> np.ndarray:
    """Pr[X ≤ x] = q^{−x}/(1 + q) for x < 0, 1 − q^{x+1}/(1 + q) for x ≥ 0 (each side without cancellation)."""
    x = np.asarray(x, dtype=np.float64)
    q1 = 1.0 + math.exp(-1.0 / t)
    low = np.exp(np.minimum(x, 0.0) / t) / q1
    high = 1.0 - np.exp(-(np.maximum(x, 0.0) + 1.0) / t) / q1
    return np.where(x < 0, low, high)


def dlap_log_cdf(t: int, x: np.ndarray) -> np.ndarray:
    """log Pr[X ≤ x] = −x/t − log(1 + q) for x < 0 and log1p(−q^{x+1}/(1 + q)) for x ≥ 0: near 1 (x ≥ 0) from the
    small tail itself, so that 1 − Pr[X ≤ x]^m = −expm1(m·log Pr[X ≤ x]) keeps the tail's relative precision."""
    x = np.asarray(x, dtype=np.float64)
    lq1 = math.log1p(math.exp(-1.0 / t))
    low = np.minimum(x, 0.0) / t - lq1
    high = np.log1p(-np.exp(-(np.maximum(x, 0.0) + 1.0) / t - lq1))
    return np.where(x < 0, low, high)


def dlap_sf(t: int, x: np.ndarray) -> np.ndarray:
    """Pr[X > x] = Pr[X < −x] = Pr[X ≤ −x − 1] (symmetry)."""
    return dlap_cdf(t, -np.asarray(x, dtype=np.float64) - 1.0)


# ------------------------------------------------------------------------------------------------------
# The test's parameters and its (ε, δ)
# ------------------------------------------------------------------------------------------------------
def _positive_int(name: str, value: object, top: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= int(value) <= top:
        raise InvalidParameter(name, f"must be an integer with 1 <= {name} <= {top}", value)
    return int(value)


def round_up(v: Fraction) -> float:
    """The least float64 ≥ v."""
    f = float(v)
    return f if Fraction(f) >= v else math.nextafter(f, math.inf)


@dataclass(frozen=True)
class SvtParams:
    """The sparse-vector test: lattice ``scale`` s, threshold noise DLap(``t_rho``), query noise
    DLap(``t_nu``), ``threshold`` T (an integer, in lattice units: a query is unstable iff
    s·d + ν ≤ T + ρ) and ``cutoff`` c (the job answers ⊥ after c unstable queries)."""

    scale: int
    t_rho: int
    t_nu: int
    threshold: int
    cutoff: int

    def __post_init__(self) -> None:
        for name in ("scale", "t_rho", "t_nu", "cutoff"):
            object.__setattr__(self, name, _positive_int(name, getattr(self, name)))
        T = self.threshold
        if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not abs(int(T)) <= MAX_INT:
            raise InvalidParameter("threshold", f"must be an integer with |threshold| <= {MAX_INT}", T)
        object.__setattr__(self, "threshold", int(T))

    @property
    def epsilon_threshold(self) -> Fraction:
        """ε₁ = s/t_ρ (the threshold's share)."""
        return Fraction(self.scale, self.t_rho)

    @property
    def epsilon_queries(self) -> Fraction:
        """ε₂ = 2c·s/t_ν (the queries' share)."""
        return Fraction(2 * self.cutoff * self.scale, self.t_nu)

    def canonical(self) -> dict[str, int]:
        return {"scale": self.scale, "t_rho": self.t_rho, "t_nu": self.t_nu, "threshold": self.threshold,
                "cutoff": self.cutoff}


def svt_epsilon(p: SvtParams) -> float:
    """ε = s/t_ρ + 2c·s/t_ν (Lyu, Su, Li 2017, Thm 2, on the lattice: docs/maths.md), rounded up."""
    return round_up(p.epsilon_threshold + p.epsilon_queries)


def _rho_support(t_rho: int, reach: float = TAIL) -> np.ndarray:
    z = int(math.ceil(reach * t_rho))
    return np.arange(-z, z + 1, dtype=np.int64)


def _rho_tail(t_rho: int, reach: float = TAIL) -> float:
    """Pr[|ρ| > Z] = 2q^{Z+1}/(1 + q) for Z = ⌈reach·t_ρ⌉, rounded up."""
    z = int(math.ceil(reach * t_rho))
    q = math.exp(-1.0 / t_rho)
    return 2.0 * math.exp(-(z + 1) / t_rho) / (1.0 + q) * (1 + DELTA_MARGIN)


def ptr_delta(p: SvtParams, queries: int) -> float:
    """δ = Σ_z Pr[ρ = z]·(1 − Pr[ν ≤ T + z]^{min(c, Q)}) (module docstring; docs/maths.md), an upper bound:
    the sum over |z| ≤ Z in float64 (non-negative terms) raised by DELTA_MARGIN, plus Pr[|ρ| > Z]."""
    m = min(p.cutoff, _positive_int("queries", queries, 1 << 62))
    z = _rho_support(p.t_rho)
    bracket = -np.expm1(m * dlap_log_cdf(p.t_nu, p.threshold + z))
    total = float(np.sum(dlap_pmf(p.t_rho, z) * bracket))
    return min(1.0, total * (1 + DELTA_MARGIN) + _rho_tail(p.t_rho))


# ------------------------------------------------------------------------------------------------------
# The law of d under a prior and the exact expected error of a job
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DistanceLaw:
    """Under a prior: ``mass[d]`` = Pr[d(h) = d], ``wrong[d]`` = Pr[d(h) = d and the released plurality is
    wrong] (a tie released as a uniform class of the top set)."""

    mass: np.ndarray
    wrong: np.ndarray


def law_from_gaps(gap_mass: np.ndarray, gap_wrong: np.ndarray) -> DistanceLaw:
    """The law of d from that of the top gap g = 0..K (d = max(0, ⌈g/2⌉ − 1))."""
    g = np.arange(gap_mass.size)
    d = distance_from_gap(g)
    n = int(d.max()) + 1
    return DistanceLaw(np.bincount(d, weights=np.maximum(gap_mass, 0.0), minlength=n),
                       np.bincount(d, weights=np.maximum(gap_wrong, 0.0), minlength=n))


@lru_cache(maxsize=32)
def binary_law(K: int, prior: Any) -> DistanceLaw:
    """0/1 votes under a DaRRM prior (:class:`darrm_opt.model.params.Prior`): L ~ E_prior[α], g = |2L − K|.
    The released majority is DaRRM's reference (Def. 2.4: error counted against the majority, ties broken
    uniformly, as the other binary kinds count it), so ``wrong`` is 0 and the error is Pr[⊥]."""
    from darrm_opt.model.objective import expected_pmf
    from darrm_opt.model.params import Prior

    alpha = expected_pmf(K, Prior.parse(prior))
    gaps = np.abs(2 * np.arange(K + 1) - K)
    gap_mass = np.bincount(gaps, weights=alpha, minlength=K + 1)
    return law_from_gaps(gap_mass, np.zeros(K + 1))


@lru_cache(maxsize=32)
def multiclass_law(K: int, C: int, prior: Any) -> DistanceLaw:
    """Class labels under a :class:`darrm_opt.model.multiclass.MulticlassPrior`, from the exact law of
    (gap, true class on top, tie size) (:func:`darrm_opt.model.multiclass.gap_law`); wrong = Pr[released
    class ≠ y]: the top is not y, or a tie of t broken away from y (1 − 1/t when y is tied)."""
    from darrm_opt.model.multiclass import MulticlassPrior, gap_law

    law = gap_law(K, C, MulticlassPrior.parse(prior))
    mass = np.asarray(law.top_true + law.top_wrong, dtype=np.float64).copy()
    wrong = np.asarray(law.top_wrong, dtype=np.float64).copy()
    t = np.arange(C + 1)
    mass[0] = float(law.tie_true.sum() + law.tie_wrong.sum())
    wrong[0] = float((law.tie_true[2:] * (1 - 1 / t[2:])).sum() + law.tie_wrong.sum())
    return law_from_gaps(mass, wrong)


@dataclass(frozen=True)
class JobError:
    """A job's exact expected figures: ``error`` (per query, ⊥ counted as an error), ``answered`` (the expected
    number of queries answered with a class) and ``bottom_share`` (the expected share of ⊥)."""

    error: float
    answered: float
    bottom_share: float


def per_threshold(p: SvtParams, law: DistanceLaw, z: np.ndarray, fallback_wrong: np.ndarray | None = None
                  ) -> Any:
    """(u(z), w(z)): per query, Pr[unstable | ρ = z] and Pr[stable, released class wrong | ρ = z]; with
    ``fallback_wrong`` (gw[d], of law.mass's length) also g(z) = Pr[unstable, GNMax wrong | ρ = z]."""
    x = p.threshold + z[:, None] - p.scale * np.arange(law.mass.size)[None, :]
    cdf = dlap_cdf(p.t_nu, x)
    u = _rows_dot(cdf, law.mass)
    w = _rows_dot(dlap_sf(p.t_nu, x), law.wrong)
    if fallback_wrong is None:
        return u, w
    return u, w, _rows_dot(cdf, fallback_wrong)


def _rows_dot(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """a @ v summed in numpy's fixed pairwise order, not by BLAS, whose order (and so the last bits) moves with
    its thread count: verify rebuilds a file's figures bit for bit."""
    return (a * v[None, :]).sum(axis=1)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """a·b correctly rounded (math.fsum of the products): the same float however BLAS is threaded."""
    return math.fsum((a * b).tolist())


def _stop_sums(u: np.ndarray, queries: int, cutoff: int) -> tuple[np.ndarray, np.ndarray]:
    """(R, S) per u: R = Σ_{i=1..Q} Pr[Bin(i − 1, u) ≤ c − 1] (queries the job reaches), S = Q − R (queries after
    the c-th unstable one), by Σ_{i=0}^{Q−1} Pr[Bin(i, u) = j] = Pr[Bin(Q, u) > j]/u: R = Σ_{j<c} Pr[N > j]/u and
    S = Σ_{c≤j<Q} Pr[N > j]/u, N ~ Bin(Q, u), sums of non-negative terms. Where Pr[Bin(Q − 1, u) ≥ c] ≥ 1e-2
    (then S ≥ 1e-2 and Q − R loses at most ~Q·1e-16 to cancellation) S is Q − R; elsewhere the terms of S
    decrease fast in j and the sum stops once the rest, at most (Q − j)·Pr[N > j − 1], is below 1e-17 of it,
    adding that bound. u below 1e-280 is read as 0 (R = Q, S = 0: below float64's reach)."""
    from scipy import stats

    Q, c = queries, cutoff
    R, S = np.full(u.shape, float(Q)), np.zeros(u.shape)
    if c >= Q:
        return R, S
    pos = np.flatnonzero(u > 1e-280)
    if not pos.size:
        return R, S
    uu = u[pos]
    R[pos] = stats.binom.sf(np.arange(c)[None, :], Q, uu[:, None]).sum(axis=1) / uu
    big = stats.binom.sf(c - 1, Q - 1, uu) >= 1e-2
    S[pos[big]] = Q - R[pos[big]]
    rows, ur = pos[~big], uu[~big]
    acc = np.zeros(ur.size)
    open_ = np.arange(ur.size)
    j = c
    while open_.size and j < Q:
        hi = min(Q, j + 16)
        sf = stats.binom.sf(np.arange(j, hi)[None, :], Q, ur[open_, None])
        acc[open_] += sf.sum(axis=1)
        last = sf[:, -1]
        j = hi
        done = (j >= Q) | (last * (Q - j) <= 1e-17 * acc[open_]) | (last == 0)
        acc[open_[done]] += last[done] * (Q - j)  # the rest, each term at most the last one
        open_ = open_[~done]
    S[rows] = acc / ur
    return R, S


def job_error(p: SvtParams, law: DistanceLaw, queries: int, chunk: int = 1 << 16,
              fallback_wrong: np.ndarray | None = None) -> JobError:
    """The exact expected error of Q i.i.d. queries (module docstring), with the expected number answered and
    the share of ⊥; the mass of ρ beyond its summed support counted as errors. Per ρ = z the sums over the
    queries are :func:`_stop_sums`: Σ_i error_i = S + R·(u + w), answered R·(1 − u), ⊥ S + R·u. With the GNMax
    fallback (``fallback_wrong`` = gw[d], :func:`binary_fallback_wrong`) an unstable query the job reaches is
    answered, wrong with probability g(z) = Σ_d gw[d]·Pr[ν ≤ T + z − s·d]: Σ_i error_i = S + R·(g + w),
    answered R, ⊥ S."""
    Q = _positive_int("queries", queries, 1 << 40)
    for reach in ERROR_TAILS:
        z = _rho_support(p.t_rho, reach)
        pz = dlap_pmf(p.t_rho, z)
        keep = pz > 0
        z, pz = z[keep], pz[keep]
        # per_threshold row by row, ``chunk`` values of z at a time (its arrays are z × d): the same values
        parts = [per_threshold(p, law, z[i:i + chunk], fallback_wrong) for i in range(0, z.size, chunk)]
        u, w = np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts])
        # _stop_sums forms u.size × c arrays: in pieces of at most 2²² cells (element by element: the same values)
        step = max(1, (1 << 22) // max(1, min(p.cutoff, Q)))
        sums = [_stop_sums(u[i:i + step], Q, p.cutoff) for i in range(0, u.size, step)]
        R, S = np.concatenate([r for r, _ in sums]), np.concatenate([t for _, t in sums])
        if fallback_wrong is None:
            err = _dot(pz, S + R * (u + w)) / Q
        else:
            g = np.concatenate([q[2] for q in parts])
            err = _dot(pz, S + R * (g + w)) / Q
        tail = _rho_tail(p.t_rho, reach)
        if tail <= 1e-3 * err:
            break
    if fallback_wrong is not None:
        ans = _dot(pz, R)
        bot = _dot(pz, S) / Q
        return JobError(min(1.0, err + tail), ans, min(1.0, bot + tail))
    ans = _dot(pz, R * (1 - u))
    bot = _dot(pz, S + R * u) / Q
    return JobError(min(1.0, err + tail), ans, min(1.0, bot + tail))


# ------------------------------------------------------------------------------------------------------
# The job's statement as a dominating pair
# ------------------------------------------------------------------------------------------------------
def dp_pair_profile(epsilon: float, delta: float) -> Any:
    """The privacy profile of an (ε, δ)-DP statement as a dominating pair (Kairouz, Oh, Viswanath 2015, Thm
    2.4; Zhu, Dong, Wang 2022, Prop. 8): P = (δ, (1 − δ)e^ε/(1 + e^ε), (1 − δ)/(1 + e^ε), 0) against Q its
    mirror image, whose envelope has the vertices (0, δ), (b₁, a₁) = ((1 − δ)/(1 + e^ε), δ + (1 − δ)e^ε/(1 + e^ε)),
    (1, 1), i.e. δ(ε′) = δ + (1 − δ)·max(0, e^ε − e^{ε′})/(1 + e^ε). b₁ is rounded down and a₁ up, so the stored
    envelope is never below the true one; its swept statement is (ε, δ) itself."""
    from darrm_opt.privacy.profile import PrivacyProfile, check_vertices

    x = Fraction(math.exp(epsilon))
    if x < 1 or not math.isfinite(epsilon):  # exp rounded below 1 cannot happen for ε ≥ 0
        raise InvalidParameter("epsilon", "must be finite and >= 0", epsilon)
    x_hi = Fraction(math.nextafter(float(x), math.inf))  # e^ε lies in [x, x_hi] (exp within one ulp)
    d = Fraction(delta)
    b1 = (1 - d) / (1 + x_hi)  # a lower bound of (1 − δ)/(1 + e^ε)
    a1 = d + (1 - d) * x_hi / (1 + x_hi)  # an upper bound of δ + (1 − δ)e^ε/(1 + e^ε)
    b1_f = float(b1) if Fraction(float(b1)) <= b1 else math.nextafter(float(b1), 0.0)
    vertices = ((0.0, round_up(d)), (b1_f, min(1.0, round_up(a1))), (1.0, 1.0))
    check_vertices(vertices)
    return PrivacyProfile(((epsilon, round_up(d)),), vertices)


# ------------------------------------------------------------------------------------------------------
# The GNMax fallback of unstable queries
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fallback:
    """Unstable queries before the cut-off answered by GNMax with noise N_ℤ(0, ``sigma``²) per class, the
    job's statement taken at ε = ε_svt + ``epsilon`` (the GNMax share ε_G)."""

    sigma: float
    epsilon: float

    def __post_init__(self) -> None:
        from darrm_opt.model.gnmax import MAX_SIGMA

        s, e = self.sigma, self.epsilon
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not (0 < s <= MAX_SIGMA):
            raise InvalidParameter("fallback_sigma", f"must be a number with 0 < fallback_sigma <= {MAX_SIGMA:g}", s)
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not (0 <= e <= 700):
            raise InvalidParameter("fallback_epsilon", "must be a number with 0 <= fallback_epsilon <= 700", e)
        object.__setattr__(self, "sigma", float(s))
        object.__setattr__(self, "epsilon", float(e))

    def profile(self) -> Any:
        """One GNMax answer's dominating pair (P, Q): N_ℤ(0, σ²)² against N_ℤ((1, 1), σ²)."""
        from darrm_opt.privacy.gaussian_profile import GaussianProfile

        return GaussianProfile(self.sigma, (1, 1))


def fallback_delta(sigma: float, cutoff: int, epsilon: float) -> float:
    """δ_G(ε′): the hockey-stick divergence at e^{ε′} of c GNMax answers' product pair (P, Q)^c (Zhu, Dong,
    Wang 2022, Thm 10), an upper bound read off the composed pessimistic PLD on the coarse grid
    (:func:`darrm_opt.privacy.pld.exact_delta`)."""
    from darrm_opt.privacy.pld import exact_delta

    return exact_delta(((Fallback(sigma, epsilon).profile(), cutoff),), epsilon, coarse=True)


def _exp_up(v: Fraction) -> float:
    """An upper bound of e^v (exp of v rounded up, within one ulp, raised four ulps)."""
    x = math.exp(round_up(v))
    for _ in range(4):
        x = math.nextafter(x, math.inf)
    return x


def fallback_statement(p: SvtParams, queries: int, fb: Fallback) -> tuple[float, float]:
    """The job's (ε, δ) with the fallback: ε = ε_svt + ε_G rounded up and δ = e^{ε_svt}·δ_G(ε_G) + δ_PTR
    (docs/maths.md, "Stability-based release with a GNMax fallback"), every factor an upper bound and the sum
    rounded up. δ_G decreases in its argument and the stated ε − ε_svt ≥ ε_G, so δ bounds δ(ε)."""
    e_svt = p.epsilon_threshold + p.epsilon_queries
    eps = round_up(e_svt + Fraction(fb.epsilon))
    d_g = fallback_delta(fb.sigma, p.cutoff, fb.epsilon)
    total = _exp_up(e_svt) * d_g * (1 + 4 * DELTA_MARGIN) + ptr_delta(p, queries)
    return eps, min(1.0, math.nextafter(total * (1 + 1e-15), math.inf))


def binary_fallback_wrong(K: int, prior: Any, sigma: float) -> np.ndarray:
    """gw[d] = Pr[d(h) = d and GNMax_σ answers against the majority] for 0/1 votes under a DaRRM prior:
    given L = l ≠ K/2, Pr[wrong | l] = (1 − γ(l))/2 with γ GNMax's effective table
    (:func:`darrm_opt.model.gnmax.binary_gamma`: Pr[right] − Pr[wrong], a noisy tie split evenly), raised by
    the noise mass it drops (2·Pr[|Z| > L] per query); a tie l = K/2 is answered uniformly, as the stable
    release answers it, and counted as the kind counts a tie (no error)."""
    from darrm_opt.model.gnmax import binary_gamma, discrete_gaussian_pmf, tail_cut
    from darrm_opt.model.objective import expected_pmf
    from darrm_opt.model.params import Prior

    alpha = expected_pmf(K, Prior.parse(prior))
    _, tail = discrete_gaussian_pmf(sigma, tail_cut(sigma))
    l = np.arange(K + 1)
    wrong = np.minimum(1.0, (1.0 - binary_gamma(K, sigma)) / 2 + 2 * tail)
    wrong[2 * l == K] = 0.0
    gaps = np.abs(2 * l - K)
    d = distance_from_gap(gaps)
    n = int(distance_from_gap(K)) + 1
    return np.bincount(d, weights=np.maximum(alpha, 0.0) * wrong, minlength=n)


@lru_cache(maxsize=64)
def multiclass_fallback_wrong(K: int, C: int, prior: Any, sigma: float) -> np.ndarray:
    """gw*[d], an upper bound for class labels under a :class:`~darrm_opt.model.multiclass.MulticlassPrior`
    of the fallback's part of the error: Σ_d u(d)·gw*[d] ≥ Σ_d u(d)·Pr[d(h) = d, GNMax_σ(h) ≠ y] for every
    u decreasing in d (each u_z(d) = Pr[ν ≤ T + z − s·d] of :func:`per_threshold` is), so the job's error
    computed from gw* bounds the exact one (docs/maths.md, "The fallback's error for class labels").

    With V = h + Z, q_lo ≤ Pr[Z_c − Z_y > k] + ½·Pr[Z_c − Z_y = k] ≤ q_hi (:func:`~darrm_opt.model.gnmax.difference_sf`,
    decreasing in k), the law of (gap, y on top) (:func:`~darrm_opt.model.multiclass.gap_law`) and J
    (:func:`~darrm_opt.model.multiclass.top_pair_law`), per histogram h:

    * y on top, gap g ≥ 1: Pr[wrong | h] ≤ Σ_{c≠y} (Pr[V_c > V_y] + ½·Pr[V_c = V_y]) (a tie of t classes at the
      top loses y with 1 − 1/t ≤ (t − 1)/2), and ≥ the runner-up r's term (V_r > V_y is wrong, V_r = V_y at
      least half wrong), so Pr[g, top y]·q_lo(g) ≤ Pr[g, top y, wrong] ≤ min(Pr[g, top y], (C − 1)·Σ_k J[g, k]·q_hi(k));
    * t ≠ y on top, gap g ≥ 1: Pr[answer y | h] ≤ Pr[V_y > V_t] + ½·Pr[V_y = V_t] ≤ q_hi(g), so the part is
      between Pr[g, top ≠ y]·(1 − q_hi(g)) and Pr[g, top ≠ y];
    * a tie of t classes with y: between ½ (a tied class's term, q(0) = ½) and min(1, (t − 1)/2 +
      (C − t)·q_hi(1)) of its mass; a tie without y: between 1 − q_hi(1) and 1.

    Summed over the gaps of each d: upper parts b(d), lower parts l(d). With E ≥ Pr[wrong]
    (:func:`~darrm_opt.model.gnmax.gnmax_error`, omitted when its work would exceed MAX_ERROR_WORK), the
    cumulative bound B(x) = min(Σ_{d≤x} b(d), E − Σ_{d>x} l(d)) ≥ Pr[d(h) ≤ x, wrong], and gw* = B(x) − B(x − 1)
    (Abel summation: Σ_d u(d) gw[d] = Σ_x (u(x) − u(x + 1)) Pr[d ≤ x, wrong], every u(x) − u(x + 1) ≥ 0)."""
    from darrm_opt.model.gnmax import MAX_ERROR_WORK, error_work, gnmax_error
    from darrm_opt.model.multiclass import MulticlassPrior

    pr = MulticlassPrior.parse(prior)
    b, lo = _fallback_parts(K, C, pr, sigma)
    B = np.cumsum(b)
    if error_work(K, C, sigma) <= MAX_ERROR_WORK:
        above = np.concatenate([np.cumsum(lo[::-1])[::-1][1:], [0.0]])  # Σ_{d > x} l(d)
        B = np.minimum(B, gnmax_error(K, C, sigma, pr) - above)
    out = np.diff(np.maximum(B, 0.0), prepend=0.0)
    out.setflags(write=False)
    return out


def multiclass_fallback_floor(K: int, C: int, prior: Any, sigma: float) -> np.ndarray:
    """l[d], the lower parts of :func:`multiclass_fallback_wrong` (without GNMax's error E): Σ_{d≤x} l(d) ≤
    B(x) at every x (l ≤ b part by part, and E ≥ Σ_d l(d)), so the job error computed from l is at most the one
    computed from gw*: the planner's cheap floor for a candidate it may pass over unrefined."""
    from darrm_opt.model.multiclass import MulticlassPrior

    return _fallback_parts(K, C, MulticlassPrior.parse(prior), sigma)[1]


@lru_cache(maxsize=256)
def _fallback_parts(K: int, C: int, pr: Any, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(b, l) per d of :func:`multiclass_fallback_wrong` (read-only arrays)."""
    from darrm_opt.model.gnmax import difference_sf

    law, J = _gap_laws(K, C, pr)
    q_lo, q_hi = difference_sf(sigma, K)
    b_g = np.minimum(law.top_true, (C - 1) * (J @ q_hi)) + law.top_wrong
    l_g = law.top_true * q_lo + law.top_wrong * (1.0 - q_hi)
    t = np.arange(C + 1)
    tie_hi = float(law.tie_true[2:] @ np.minimum(1.0, (t[2:] - 1) / 2 + (C - t[2:]) * q_hi[1])) + float(
        law.tie_wrong.sum())
    tie_lo = 0.5 * float(law.tie_true.sum()) + (1.0 - q_hi[1]) * float(law.tie_wrong.sum())
    b_g[0], l_g[0] = tie_hi, tie_lo
    d = distance_from_gap(np.arange(K + 1))
    n = int(d.max()) + 1
    b, lo = np.bincount(d, weights=b_g, minlength=n), np.bincount(d, weights=l_g, minlength=n)
    b.setflags(write=False)
    lo.setflags(write=False)
    return b, lo


@lru_cache(maxsize=8)
def _gap_laws(K: int, C: int, prior: Any) -> tuple[Any, np.ndarray]:
    """(:func:`~darrm_opt.model.multiclass.gap_law`, :func:`~darrm_opt.model.multiclass.top_pair_law`) of a
    prior: every σ of a plan reads the same two."""
    from darrm_opt.model.multiclass import gap_law, top_pair_law

    return gap_law(K, C, prior), top_pair_law(K, C, prior)
