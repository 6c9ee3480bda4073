"""Planning a job with GNMax or Confident-GNMax: σ calibrated so that Q answers fit the total budget.

The ε that Q answers of a Gaussian release spend at δ_B, spent(σ), is the ledger's exact composition of its
dominating pair (:func:`darrm_opt.privacy.pld.exact_epsilon`), decreasing in σ. The plan takes the smallest
σ with spent(σ) ≤ ε_B, to a relative SIGMA_RTOL:

1. a start from Gaussian DP: μ with δ_μ(ε_B) = δ_B (:func:`darrm_opt.privacy.gaussian_profile.gdp_mu`; Balle–Wang
   Thm 8; Dong, Roth, Su 2022 Cor. 3.3), the
   per-answer μ/√Q, σ₀ = ‖shifts‖/(μ/√Q) (the discrete pair spends within about 1e-6 of it);
2. a bracket [σ_lo, σ_hi] around σ₀ with spent(σ_hi) ≤ ε_B < spent(σ_lo), found by steps of relative
   size STEP (SIGMA_RTOL/2: σ₀ is usually that close) growing fourfold each time
   (:func:`darrm_opt.privacy.calibrate.walk`);
3. Illinois false position (log spent against log σ; :func:`darrm_opt.privacy.calibrate.bisect` with the
   midpoint rule :class:`_Illinois`) on it until its relative width is SIGMA_RTOL or its
   fitting end spends at least (1 − EPS_RTOL)·ε_B. The chosen σ's spent ε is that composition's, ≤ ε_B by
   construction, and checked again.

Confident-GNMax splits one Gaussian budget between the check (σ₁) and the argmax (σ₂): σ₁ = s/√(2ρ),
σ₂ = s/√(1 − ρ), so 1/σ₁² + 2/σ₂² = 2/s²; s is calibrated as above for its three-coordinate pair. With
data-independent accounting abstaining only adds error (⊥ counts as wrong), so the offer spends
CONFIDENT_SHARE of the budget on the check and takes the largest integer T at which Pr[⊥] is at most
ABSTAIN_RATIO times GNMax_σ₂'s error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.gnmax import (
    LABELS,
    MAX_SIGMA,
    ConfidentGnmaxParams,
    GnmaxParams,
    abstain_probability,
    gnmax_error,
)
from darrm_opt.privacy.calibrate import bisect, integer, reach, walk
from darrm_opt.privacy.gaussian_profile import GaussianProfile, gdp_mu
from darrm_opt.privacy.pld import EXACT_MAX_ANSWERS, exact_epsilon

from .job import Job, Offer

SETTING = "disjoint-nonprivate"
#: relative resolution of σ (GNMax's error moves by about gap²/(2σ²) times σ's relative change, 10–40× at
#: K = 250, so σ is resolved far finer than the error is reported)
SIGMA_RTOL = 1e-5
#: the first step of the bracket search (relative), half of SIGMA_RTOL: the Gaussian-DP start σ₀ is within a
#: few 1e-6 of the calibrated σ whenever Q·(the grid's interval) is small against ε_B (3.3e-6 at Q = 100,
#: (8, 1e-3); below 1e-6 at Q = 100 and 1000 at (2, 1e-5) and (8, 1e-6)), so the first one or two steps
#: bracket it at width SIGMA_RTOL and the search ends after two or three compositions; where σ₀ is farther
#: (Q = 1: 8e-4) the fourfold growth reaches it in a few more
STEP = SIGMA_RTOL / 2
#: the search also ends once the chosen σ spends at least (1 − EPS_RTOL)·ε_B
EPS_RTOL = 1e-6
#: calibration stops below this σ (every neighbouring count is then told apart almost surely)
MIN_SIGMA = 1e-3
#: the smallest δ target a Gaussian plan calibrates σ for: below it the σ search composes on loss grids whose
#: proven float error (darrm_opt.privacy.pld.Bounded) needs long-double compositions at every trial σ, minutes
#: per plan; a ledger still states and checks any δ down to the pairs' truncation (1e-40)
MIN_PLAN_DELTA = 1e-10
CONFIDENT_SHARE = 0.05
ABSTAIN_RATIO = 0.1


def calibrate(profile_of: Callable[[float], GaussianProfile], queries: int, budget_epsilon: float,
              budget_delta: float, rate: float = 1.0) -> tuple[float, float]:
    """(the smallest s found with spent(s) ≤ ε_B, its spent ε by the ledger's exact composition) for the
    profiles ``profile_of(s)`` (module docstring). ``rate``: the share γ = m/K of the teachers each answer
    reads (the profiles are amplified): the start is then the σ at which the central limit of Q subsampled
    answers is μ-GDP, μ = γ√Q·(e^{μ₀²} − 1)^{1/2} with μ₀ the per-answer μ (Bu, Dong, Long, Su 2020, Thm 5),
    at most the plain pair's start, refined by :func:`_refined` (only a start: the search decides).
    InvalidParameter naming ``queries`` above EXACT_MAX_ANSWERS (the ledger cannot compose them exactly)."""
    if not budget_delta > 0:
        raise InvalidParameter("budget_delta", "must be > 0 for a Gaussian release (no Gaussian mechanism is "
                                               "pure DP)", budget_delta)
    if budget_delta < MIN_PLAN_DELTA:
        raise InvalidParameter("budget_delta", f"must be >= {MIN_PLAN_DELTA:g} for a Gaussian plan: below it the "
                                               "σ search cannot prove its compositions' float error in useful "
                                               "time (a ledger takes any δ; choose σ for it directly)", budget_delta)
    if queries > EXACT_MAX_ANSWERS:
        raise InvalidParameter("queries", f"a Gaussian plan needs the exact composition of at most "
                                          f"{EXACT_MAX_ANSWERS} answers", queries)

    cache: dict[float, float] = {}

    def spent(s: float) -> float:
        if s not in cache:
            cache[s] = exact_epsilon([(profile_of(s), queries)], budget_delta)
        return cache[s]

    def fits(s: float) -> bool:
        return spent(s) <= budget_epsilon

    unit = profile_of(1.0)
    mu_total = gdp_mu(budget_epsilon, budget_delta)
    s0 = math.sqrt(queries) / mu_total * unit.mu  # μ(s) = unit.mu / s
    if rate < 1.0:  # an amplified pair needs no more σ than the plain one (the central limit is poor at huge μ)
        clt = unit.mu / math.sqrt(math.log1p((mu_total / (rate * math.sqrt(queries))) ** 2))
        s0 = _refined(spent, min(clt, s0), budget_epsilon)
    if s0 / (1 + STEP) > MAX_SIGMA:
        raise InvalidParameter("budget_epsilon", f"too small for a Gaussian release: it needs σ ≈ {s0:.3g} > "
                                                 f"{MAX_SIGMA:g}", budget_epsilon)
    top = reach(lambda s: fits(s) or s >= MAX_SIGMA, min(s0, MAX_SIGMA),
                lambda s, i: min(s * (1 + STEP * 4 ** i), MAX_SIGMA))
    if not fits(top):
        raise InvalidParameter("budget_epsilon", f"no σ ≤ {MAX_SIGMA:g} fits the budget", budget_epsilon)
    top, lo = walk(lambda s: not fits(s), top, lambda s, i: s / (1 + STEP * 4 ** i),
                   end=lambda s, i: i > 0 and s < MIN_SIGMA)
    if lo is None:  # a budget this large fits any σ worth having
        return top, spent(top)
    top, _ = bisect(fits, top, lo, _Illinois(spent, budget_epsilon, lo, top),
                    done=lambda t, b: t / b - 1 <= SIGMA_RTOL or spent(t) >= budget_epsilon * (1 - EPS_RTOL))
    final = exact_epsilon([(profile_of(top), queries)], budget_delta)
    if final > budget_epsilon:  # pragma: no cover - top was checked above
        raise AssertionError("a calibrated σ spends more than the budget")
    return top, final


def _refined(spent: Callable[[float], float], s0: float, budget: float) -> float:
    """A start closer than ``s0`` (a few per cent off for amplified pairs): two secant steps of log spent
    against log σ (the spent ε falls about as 1/σ), the first from the slope −1; ``s0`` itself where a spend
    is not finite and positive. Only a start: the bracket search decides."""
    e0 = spent(s0)
    if not (math.isfinite(e0) and e0 > 0):
        return s0
    s1 = min(s0 * e0 / budget, MAX_SIGMA)
    e1 = spent(s1)
    if not (math.isfinite(e1) and e1 > 0) or s1 == s0 or e1 == e0:
        return s1
    slope = (math.log(e1) - math.log(e0)) / (math.log(s1) - math.log(s0))
    if slope >= 0:
        return s1
    return min(math.exp(math.log(s1) + (math.log(budget) - math.log(e1)) / slope), MAX_SIGMA)


class _Illinois:
    """The midpoint rule of step 3 (module docstring): the root of log(spent/ε_B) linear in log σ between
    the bracket's ends, kept 1 % inside it; an end that moves twice in a row halves the other end's value
    (the Illinois rule). Called by :func:`darrm_opt.privacy.calibrate.bisect` with (σ_hi, σ_lo)."""

    def __init__(self, spent: Callable[[float], float], budget: float, lo: float, top: float) -> None:
        self.spent, self.budget = spent, budget
        e_lo, e_top = spent(lo), spent(top)
        self.fa = math.log(e_lo / budget) if math.isfinite(e_lo) else 1.0
        self.fb = math.log(e_top / budget) if e_top > 0 else -1.0  # ε = 0 spends nothing (a δ target ≥ δ(0))
        self.ends = (top, lo)
        self.moved = 0  # the end the last step moved (1: σ_lo, -1: σ_hi)

    def _f(self, s: float) -> float:
        e = self.spent(s)
        return math.log(e / self.budget) if e > 0 else -1.0

    def __call__(self, top: float, lo: float) -> float:
        if top != self.ends[0]:
            self.fb, self.fa, self.moved = self._f(top), (self.fa / 2 if self.moved == -1 else self.fa), -1
        elif lo != self.ends[1]:
            self.fa, self.fb, self.moved = self._f(lo), (self.fb / 2 if self.moved == 1 else self.fb), 1
        self.ends = (top, lo)
        a, b = math.log(lo), math.log(top)
        fa, fb = self.fa, self.fb
        x = a - fa * (b - a) / (fb - fa) if fb != fa else 0.5 * (a + b)
        x = min(max(x, a + 0.01 * (b - a)), b - 0.01 * (b - a))
        return math.exp(x)


def classes_and_prior(job: Job) -> tuple[int, str]:
    """(C, prior spec): 0/1 votes are C = 2 with a 0/1-vote prior (DaRRM's error, as darrm and darrm-pate
    report); class labels keep a class-label prior even for C = 2 (the error against the true class, as
    darrm-multiclass reports), so that every offer for a job states the same error (a job's class-label prior
    is written without the ``labels:`` prefix: :func:`darrm_opt.planning.job.normal_prior`)."""
    if job.classes is None:
        return 2, job.prior
    return job.classes, LABELS + job.prior if job.classes == 2 else job.prior


def _gnmax_pair(sigma: float, subsample: tuple[int, int] | None) -> GaussianProfile:
    """GNMax's pair at σ (amplified for ``subsample`` (m, K))."""
    return GaussianProfile(sigma, (1, 1), subsample=subsample)


def plan_gnmax(mech: Any, job: Job) -> Offer | None:
    """GNMax's offer for ``job``: σ calibrated (module docstring) for each m of
    :func:`~darrm_opt.planning.pate_plan.subsample_grid` when the job is ``thorough`` (the kind named; each
    answer reads a uniform m of the K teachers, its pair amplified: :mod:`darrm_opt.privacy.gaussian_profile`),
    the job's own ``subsample``, else K alone (subsampling never lowered GNMax's error on the measured jobs);
    the m of least expected error wins (ties to the larger m). Every m tried is listed in the details'
    ``candidates``. None outside the PATE setting."""
    if job.teachers != SETTING:
        return None
    from darrm_opt.planning.pate_plan import subsample_grid

    t0 = time.perf_counter()
    C, prior = classes_and_prior(job)
    GnmaxParams(job.K, C, 1.0, prior)  # the job's K, C and prior, checked before any composition
    fixed = getattr(job, "subsample", None)
    tried = []
    for m in (fixed,) if fixed is not None else subsample_grid(job.K) if job.thorough else (job.K,):
        sigma, spent = calibrate(partial(_gnmax_pair, subsample=None if m == job.K else (m, job.K)), job.queries,
                                 job.budget_epsilon, job.budget_delta, m / job.K)
        params = GnmaxParams(job.K, C, sigma, prior, m)
        tried.append((mech.expected_error(params, np.zeros(0)), -m, params, spent))
    _, _, params, spent = min(tried, key=lambda t: (t[0], t[1]))
    table = mech.certify_table(params, np.zeros(0), teachers=SETTING)
    details = mech.offer_details(table, "exact")
    details["candidates"] = [{"subsample": -mm, "sigma": p.sigma, "spent_epsilon": e, "expected_error": err}
                             for err, mm, p, e in tried]
    return Offer(mech.kind, table, table.expected_error, spent, details, time.perf_counter() - t0)


def plan_confident(mech: Any, job: Job) -> Offer | None:
    """Confident-GNMax's offer for ``job`` (module docstring); None outside the PATE setting."""
    if job.teachers != SETTING:
        return None
    t0 = time.perf_counter()
    C, prior = classes_and_prior(job)
    ConfidentGnmaxParams(job.K, C, 0.0, 1.0, 1.0, prior)
    rho = CONFIDENT_SHARE

    def pair(s: float) -> GaussianProfile:
        s2 = s / math.sqrt(1 - rho)
        return GaussianProfile(s2, (1, 1, 1), sigmas=(s / math.sqrt(2 * rho), s2, s2))

    s, spent = calibrate(pair, job.queries, job.budget_epsilon, job.budget_delta)
    prof = pair(s)
    s1, s2 = prof.sigmas[0], prof.sigmas[1]
    base = ConfidentGnmaxParams(job.K, C, 0.0, s1, s2, prior)
    allowed = ABSTAIN_RATIO * gnmax_error(job.K, C, s2, base.prior)
    def ok(t: int) -> bool:
        return abstain_probability(ConfidentGnmaxParams(job.K, C, float(t), s1, s2, prior)) <= allowed

    # Pr[⊥] grows with T; at the low end it is below any allowance
    lo, _ = bisect(ok, -math.ceil(20 * s1) - 1, job.K, integer, done=lambda g, b: b - g <= 1)
    params = ConfidentGnmaxParams(job.K, C, float(lo), s1, s2, prior)
    table = mech.certify_table(params, np.zeros(0), teachers=SETTING)
    return Offer(mech.kind, table, table.expected_error, spent, mech.offer_details(table, "exact"),
                 time.perf_counter() - t0)
